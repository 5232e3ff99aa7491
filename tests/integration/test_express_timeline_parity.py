"""The same workflows on both engines show the same timeline (issue 27, item 3): an agent with
a tool, a failing for_each, a fallback, and a 100-branch parallel with failing branches run on
the local runtime once with ``engine: standard`` (the timeline folds the execution history)
and once with ``engine: express`` (it folds the machine's CloudWatch Logs, with the outputs the
steps recorded). Entries are compared one by one: key, type, status, attempts, refusals,
error and output, and the run's status and failing step. The differences docs/engines.md
allows: an Express entry has no ``cause``, and an output no record, final document or
definition holds is left out, with ``timeline_note`` naming the step."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from relayflow_testing import Server, allowed_server
from workflow_shapes import soft_failure

from relayflow.control.express_sweep import sweep_express_runs
from relayflow.control.models import RunDetail
from relayflow.control.recorder import record_status_change, status_change_event
from relayflow.control.service import ControlPlane
from relayflow.local import LocalRuntime
from relayflow.settings import override_settings

pytestmark = pytest.mark.integration


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """An HTTP server the agent's tool calls, and the scripted model's fixture directory."""
    turns = [
        {
            "content": [
                {"type": "text", "text": "Looking the customer up."},
                {
                    "type": "tool_call",
                    "id": "c1",
                    "name": "http_crm_customer",
                    "input": {"id": "7"},
                },
            ],
            "usage": {"input_tokens": 100, "output_tokens": 20},
        },
        {
            "content": [{"type": "text", "text": "Customer 7 is on the pro plan."}],
            "usage": {"input_tokens": 150, "output_tokens": 10},
        },
    ]
    (tmp_path / "lookup.json").write_text(json.dumps({"turns": turns}))
    with allowed_server() as srv, override_settings(ai_fixtures_dir=str(tmp_path)):
        yield srv


def agent(server: Server, *, keep: bool) -> dict[str, Any]:
    """An agent that calls one HTTP tool and answers; with ``keep`` its record stays in the
    final document (``outputs:``)."""
    return {
        "id": "lookup",
        "start": "triage",
        **({"outputs": ["triage"]} if keep else {}),
        "http_tools": {
            "crm": {
                "base_url": f"{server.url}/crm",
                "timeout_seconds": 5,
                "operations": {"customer": {"method": "GET", "path": "/customers/{{ args.id }}"}},
            }
        },
        "steps": {
            "triage": {
                "type": "agent",
                "model": "scripted:lookup",
                "prompt": "Who is customer 7?",
                "tools": ["http.crm.customer"],
                "timeout_seconds": 10,
                "on_success": "done",
            },
            "done": {"type": "noop"},
        },
    }


def failing_for_each() -> dict[str, Any]:
    """Three items one at a time (so which ran is not a matter of timing); the second fails."""
    return {
        "id": "prices",
        "start": "each",
        "steps": {
            "each": {
                "type": "for_each",
                "items": "{{ trigger.items }}",
                "step": "price",
                "max_items": 3,
                "max_concurrency": 1,
            },
            "price": {
                "type": "code",
                "input": {"item": "{{ item }}"},
                "code": "if input['item'] == 2:\n    raise ValueError('no price')\n"
                "return input['item'] * 10",
                "timeout_seconds": 10,
                "retry": "none",
            },
        },
    }


def fallback() -> dict[str, Any]:
    """A step that fails into its on_error fallback; its record leaves the document."""
    return soft_failure({"type": "transform", "mapping": {"ok": True}})


def wide_parallel(settle: str) -> dict[str, Any]:
    """100 branches; b7 and b99 fail. ``settle: all`` runs every branch to its end, then fails
    the parallel with Relayflow.BranchesFailed; ``fail_fast`` fails it at the first failure."""
    steps: dict[str, Any] = {
        "fan": {"type": "parallel", "branches": [f"b{i}" for i in range(100)]},
    }
    if settle == "all":
        steps["fan"].update(settle="all", fail_when="any")
    for i in range(100):
        fails = i in (7, 99)
        steps[f"b{i}"] = {
            "type": "code",
            "code": "raise ValueError('branch down')" if fails else f"return {i}",
            "timeout_seconds": 10,
            "retry": "none",
        }
    # A run timeout under Express's 300 s: the bound adds up every branch's Lambda timeout.
    return {
        "id": f"wide-{settle.replace('_', '-')}",
        "start": "fan",
        "run_timeout_seconds": 120,
        "steps": steps,
    }


def run_on(
    runtime: LocalRuntime,
    plane: ControlPlane,
    tenant: str,
    engine: str,
    definition: dict[str, Any],
    trigger: Any,
) -> RunDetail:
    """Run ``definition`` on ``engine`` to its end and settle it (the recorder for Standard,
    the sweep for Express); ``GET /runs/{id}`` after."""
    workflow = {**definition, "id": f"{definition['id']}-{engine}", "engine": engine}
    plane.put_workflow(tenant, workflow["id"], workflow)
    started = plane.start_run(tenant, workflow["id"], trigger)
    assert started.engine == engine
    run = plane.dal.get_run(tenant, started.run_id)
    runtime.wait(run.execution_arn, timeout=120)
    if engine == "standard":
        described = runtime.sfn_client.describe_execution(executionArn=run.execution_arn)
        record_status_change(status_change_event(described), control=plane)
    else:
        # Read before the sweep settles it too: the timeline does not depend on the sweep.
        unsettled = plane.get_run(tenant, started.run_id)
        sweep_express_runs(plane, now=datetime.now(UTC) + timedelta(minutes=10))
        settled = plane.get_run(tenant, started.run_id)
        assert table(unsettled) == table(settled)
        assert unsettled.failing_step == settled.failing_step
    return plane.get_run(tenant, started.run_id)


def table(detail: RunDetail) -> dict[str, tuple[Any, ...]]:
    """The compared fields of each entry, by label (parallel branches may start in any order)."""
    found: dict[str, tuple[Any, ...]] = {}
    for step in detail.steps:
        assert step.key not in found, f"{step.key} appears twice"
        found[step.key] = (step.type, step.status, step.attempts, step.refusals, step.error)
    return found


def unknown_outputs(detail: RunDetail) -> set[str]:
    """The entries whose output the Express timeline's note says it does not know."""
    note = detail.timeline_note or ""
    if "output not known for " not in note:
        return set()
    named = note.split("output not known for ", 1)[1].split(":", 1)[0]
    assert " more" not in named, "every unknown output is named in these tests"
    return {name.strip() for name in named.replace(" and ", ", ").split(",")}


def assert_same_timeline(standard: RunDetail, express: RunDetail) -> None:
    assert standard.timeline_source == "history"
    assert express.timeline_source == "records+logs"
    assert (express.status, express.outcome, express.failing_step, express.error) == (
        standard.status,
        standard.outcome,
        standard.failing_step,
        standard.error,
    )
    assert table(express) == table(standard)
    unknown = unknown_outputs(express)
    outputs = {s.key: s.output for s in standard.steps}
    for step in express.steps:
        if step.key not in unknown:
            assert step.output == outputs[step.key], step.key
        assert step.cause is None  # execution data: never in the logs


@pytest.mark.parametrize("keep", [True, False], ids=["output-kept", "output-dropped"])
def test_an_agent_with_a_tool_shows_once_with_its_answer(runtime, plane, tenant, server, keep):
    # Given an agent that called an HTTP tool, then answered, on each engine (its record kept
    # in the final document, or dropped from it once nothing reads it)
    definition = agent(server, keep=keep)
    standard = run_on(runtime, plane, tenant, "standard", definition, {})
    express = run_on(runtime, plane, tenant, "express", definition, {})
    # Then both show one entry for the agent (its turns and tool call are no steps)
    assert [s.key for s in express.steps] == [s.key for s in standard.steps] == ["triage", "done"]
    assert_same_timeline(standard, express)
    # And its answer, not a tool's response: on Express from the answer it recorded
    answer = standard.steps[0].output
    assert answer["response"] == "Customer 7 is on the pro plan."
    assert [c["tool"] for c in answer["tool_calls"]] == ["http.crm.customer"]
    assert express.steps[0].output == answer and express.timeline_note is None


def test_a_failing_for_each_shows_the_same_items_and_fails_in_the_for_each(runtime, plane, tenant):
    definition, trigger = failing_for_each(), {"items": [1, 2, 3]}
    standard = run_on(runtime, plane, tenant, "standard", definition, trigger)
    express = run_on(runtime, plane, tenant, "express", definition, trigger)
    assert_same_timeline(standard, express)
    assert table(express) == {
        "each": ("for_each", "failed", 1, 0, "Relayflow.CodeError"),
        "price[0]": ("code", "succeeded", 1, 0, None),
        "price[1]": ("code", "failed", 1, 0, "Relayflow.CodeError"),
    }
    assert express.steps[1].output == 10
    assert (express.status, express.failing_step) == ("failed", "each")
    assert plane.dal.get_run(tenant, express.run_id).failing_step == "each"


def test_a_fallback_shows_its_output_on_both_engines(runtime, plane, tenant):
    standard = run_on(runtime, plane, tenant, "standard", fallback(), {})
    express = run_on(runtime, plane, tenant, "express", fallback(), {})
    assert_same_timeline(standard, express)
    boom = express.steps[0]
    assert (boom.key, boom.status, boom.output) == ("boom", "fallback", {"price": 0})
    assert express.outcome == "succeeded_with_fallbacks"


def test_a_settled_100_branch_parallel_fails_in_the_parallel_on_both_engines(
    runtime, plane, tenant
):
    definition = wide_parallel("all")
    standard = run_on(runtime, plane, tenant, "standard", definition, {})
    express = run_on(runtime, plane, tenant, "express", definition, {})
    assert_same_timeline(standard, express)
    statuses = {key: row[1] for key, row in table(express).items()}
    assert statuses.pop("fan") == "failed"
    assert (statuses.pop("b7"), statuses.pop("b99")) == ("caught", "caught")
    assert set(statuses.values()) == {"succeeded"} and len(statuses) == 98
    assert (express.error, express.failing_step) == ("Relayflow.BranchesFailed", "fan")
    # And every branch's output is known on Express too (the code steps recorded them)
    assert unknown_outputs(express) == set()


def test_a_fail_fast_100_branch_parallel_names_the_parallel_as_its_failing_step(
    runtime, plane, tenant
):
    # Which branches were still running when b7 or b99 failed is a matter of timing, on
    # either engine: the failing step is the parallel, never the last branch left open
    definition = wide_parallel("fail_fast")
    for engine in ("standard", "express"):
        detail = run_on(runtime, plane, tenant, engine, definition, {})
        assert (detail.status, detail.failing_step) == ("failed", "fan")
        assert plane.dal.get_run(tenant, detail.run_id).failing_step == "fan"
        assert detail.steps[0].key == "fan" and detail.steps[0].status == "failed"


class _Refusing:
    """A logs client that refuses every read (the timeline falls back to the records)."""

    def filter_log_events(self, **_: Any) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": "AccessDeniedException"}}, "FilterLogEvents")


def test_without_logs_an_agents_turns_are_still_no_steps(runtime, plane, tenant, server):
    # Given an Express run of the agent, its answer kept in the final document
    from relayflow.control.express_logs import ExecutionLogs
    from relayflow.control.express_timeline import express_timeline

    express = run_on(runtime, plane, tenant, "express", agent(server, keep=True), {})
    run = plane.dal.get_run(tenant, express.run_id)
    version = plane.dal.get_version(tenant, run.workflow_id, run.version)
    # When its logs cannot be read
    timeline = express_timeline(plane.dal, run, version, ExecutionLogs(_Refusing()))
    # Then the records give one agent entry, its answer (not a turn or a tool's response)
    assert timeline.source == "records" and "AccessDeniedException" in (timeline.note or "")
    (triage,) = [s for s in timeline.steps if s.key == "triage"]
    assert triage.output == express.steps[0].output
    assert triage.output["response"] == "Customer 7 is on the pro plan."


def test_flow_control_refusals_are_shown_apart_from_the_one_call(
    runtime, plane, tenant, server, monkeypatch
):
    # Given a flow-controlled webhook that finds no free slot three times, then gets one (the
    # table's answer is replaced, so the count does not depend on timing; the guard, the
    # Relayflow.Throttled error and the compiled throttle retrier are the real ones)
    from relayflow.errors import Throttled
    from relayflow.reliability.flow import FlowControl

    acquire, refused = FlowControl.acquire, []

    def busy_three_times(self: FlowControl, scope: Any, group: str, limit: int, lease: float):
        if len(refused) % 4 < 3:  # each engine's run: three refusals, then a slot
            refused.append(scope.run_id)
            raise Throttled("no slot", kind="concurrency", limit=limit, retry_after=0.0)
        refused.append(None)
        return acquire(self, scope, group, limit, lease)

    monkeypatch.setattr(FlowControl, "acquire", busy_three_times)
    definition = {
        "id": "limited",
        "start": "post",
        "run_timeout_seconds": 120,
        "outputs": ["post"],
        "steps": {
            "post": {
                "type": "webhook_out",
                "url": f"{server.url}/hook",
                "body": {},
                "timeout_seconds": 5,
                "concurrency": {"limit": 1},
            }
        },
    }
    standard = run_on(runtime, plane, tenant, "standard", definition, {})
    express = run_on(runtime, plane, tenant, "express", definition, {})
    # Then each shows one call and three refusals, and the webhook was called once per run
    assert_same_timeline(standard, express)
    assert table(express)["post"] == ("webhook_out", "succeeded", 1, 3, None)
    assert len(server.requests) == 2
