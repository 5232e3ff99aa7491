"""llm_batch on the local runtime with the scripted batch provider: it submits once, polls
across the compiled Wait loop, and returns per-item results; whole-batch failures and the
deadline are named errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from relayflow.local import LocalRuntime
from relayflow.runner import RunResult, run_workflow
from relayflow.settings import override_settings
from relayflow.validation import load_workflow_text

pytestmark = pytest.mark.integration
BARE_RUNTIME = True


@pytest.fixture
def fixtures(tmp_path: Path) -> Iterator[Any]:
    def write(name: str, batch: dict[str, Any]) -> str:
        (tmp_path / f"{name}.json").write_text(json.dumps({"turns": [], "batch": batch}))
        return name

    with override_settings(ai_fixtures_dir=str(tmp_path)):
        yield write


def batch_workflow(fixture: str, extra: str = "") -> str:
    return f"""
id: batch-test
start: summarise
steps:
  summarise:
    type: llm_batch
    model: scripted:{fixture}
    items: "{{{{ trigger.reviews }}}}"
    prompt_template: "Summarise review {{{{ index }}}}: {{{{ item.text }}}}"
    poll_interval_seconds: 30
{extra}
  done: {{type: transform, mapping: {{ok: "{{{{ steps.summarise.output.counts.succeeded }}}}"}}}}
"""


def run(runtime: LocalRuntime, definition: str) -> RunResult:
    trigger = {"reviews": [{"text": "great"}, {"text": "meh"}, {"text": "awful"}]}
    return run_workflow(load_workflow_text(definition, "batch.yaml"), trigger, runtime=runtime)


def step_output(result: RunResult, key: str) -> Any:
    """The output of the last run of step ``key`` in the run's timeline."""
    (last, *_) = [step for step in reversed(result.steps) if step.key == key]
    return last.output


def invocations(runtime: LocalRuntime) -> list[str | None]:
    return [
        (i.payload.get("context") or {}).get("state")
        for i in runtime.invocations
        if i.function_name == "relayflow-llm_batch"
    ]


def test_llm_batch_submits_polls_across_the_wait_loop_and_returns_per_item_results(
    runtime, fixtures
):
    # Given a batch job that ends on its third status check, with one failed item
    fixture = fixtures(
        "reviews",
        {
            "polls": 3,
            "results": [
                {"text": "Positive.", "usage": {"input_tokens": 40, "output_tokens": 3}},
                {"error": {"type": "overloaded_error"}},
                {"text": "Negative.", "usage": {"input_tokens": 41, "output_tokens": 3}},
            ],
        },
    )
    before = len(invocations(runtime))
    # When it runs
    result = run(runtime, batch_workflow(fixture, "    on_success: done"))
    # Then it submitted once and polled three times through the compiled Wait loop
    assert result.succeeded, (result.error, result.cause)
    assert invocations(runtime)[before:] == [
        "summarise",
        "summarise.poll",
        "summarise.poll",
        "summarise.poll",
    ]
    # (the final document keeps only live outputs: the step's own is read from the timeline)
    out = step_output(result, "summarise")
    assert out["state"] == "ended"
    assert [(r["index"], r["status"], r.get("response")) for r in out["results"]] == [
        (0, "succeeded", "Positive."),
        (1, "errored", None),
        (2, "succeeded", "Negative."),
    ]
    assert out["results"][1]["error"] == {"type": "overloaded_error"}
    assert out["counts"] == {"succeeded": 2, "failed": 1}
    assert out["usage"]["input_tokens"] == 81 and out["usage"]["batch"] is True
    assert result.output["steps"]["done"]["output"] == {"ok": 2}


def test_a_whole_batch_failure_is_a_named_error(runtime, fixtures):
    fixture = fixtures("failing", {"polls": 1, "status": "failed"})
    result = run(runtime, batch_workflow(fixture, "    on_success: done"))
    assert result.status == "failed" and result.error == "Relayflow.BatchFailed"


@pytest.mark.parametrize(
    ("retry", "polls"),
    [
        ("{max_attempts: 3, base_seconds: 1}", 1),
        ("{max_attempts: 3, base_seconds: 1, retry_on: [Relayflow.BatchFailed]}", 3),
    ],
)
def test_a_retry_policy_does_not_repeat_a_whole_batch_failure(runtime, fixtures, retry, polls):
    # Given a batch the provider fails, and a step with a retry policy
    fixture = fixtures(f"failing_retry_{polls}", {"polls": 1, "status": "failed"})
    before = len(invocations(runtime))
    # When it runs / Then BatchFailed is not retried (the retry would poll the same recorded
    # job) unless retry_on names it
    result = run(runtime, batch_workflow(fixture, f"    retry: {retry}\n    on_success: done"))
    assert result.status == "failed" and result.error == "Relayflow.BatchFailed"
    assert invocations(runtime)[before:] == ["summarise"] + ["summarise.poll"] * polls


def test_every_item_failing_is_a_whole_batch_failure(runtime, fixtures):
    fixture = fixtures("all_errored", {"polls": 1, "results": [{"error": "bad"}]})
    definition = batch_workflow(fixture, "    on_failure: handle").replace(
        "  done:", '  handle: {type: transform, mapping: {error: "{{ error.Error }}"}}\n  unused:'
    )
    result = run(runtime, definition.split("  unused:")[0])
    assert result.succeeded, (result.error, result.cause)
    assert result.output["steps"]["handle"]["output"] == {"error": "Relayflow.BatchFailed"}


def test_the_deadline_stops_the_poll_loop_with_a_named_error(runtime, fixtures, monkeypatch):
    # Given a job that never ends and a deadline of one minute, on a clock where every status
    # check comes two minutes after the previous one
    import relayflow.steps.llm_batch as step

    fixture = fixtures("forever", {"polls": 1_000_000})
    ticks = iter(range(0, 10_000, 120))
    monkeypatch.setattr(step, "now", lambda: 1_000_000.0 + next(ticks))
    # When it runs / Then the first check past the deadline fails with BatchDeadline
    result = run(runtime, batch_workflow(fixture, "    deadline_seconds: 60\n    on_success: done"))
    assert result.status == "failed" and result.error == "Relayflow.BatchDeadline"


def test_one_prompt_is_one_item(runtime, fixtures):
    fixture = fixtures("single", {"polls": 1, "results": [{"text": "Hello."}]})
    definition = f"""
id: batch-one
start: greet
steps:
  greet:
    type: llm_batch
    model: scripted:{fixture}
    prompt: "Say hello to {{{{ trigger.name }}}}"
"""
    result = run_workflow(
        load_workflow_text(definition, "b.yaml"), {"name": "Ada"}, runtime=runtime
    )
    assert result.succeeded, (result.error, result.cause)
    (only,) = result.output["steps"]["greet"]["output"]["results"]
    assert only["response"] == "Hello." and only["custom_id"] == "item-0"


def test_a_dry_run_records_the_would_be_submission_and_submits_nothing(runtime, fixtures):
    # Given a batch whose job would take three status checks
    fixture = fixtures("dry", {"polls": 3, "results": [{"text": "Positive."}]})
    extra = '    on_success: done\n    dry_run_output: {counts: {succeeded: 0}, note: "dry"}'
    workflow = load_workflow_text(batch_workflow(fixture, extra), "batch.yaml")
    before = len(invocations(runtime))
    # When it runs dry
    trigger = {"reviews": [{"text": "great"}, {"text": "awful"}]}
    result = run_workflow(workflow, trigger, runtime=runtime, dry_run=True)
    # Then the step ran once, polled nothing and went straight on with its dry_run_output
    assert result.succeeded, (result.error, result.cause)
    assert invocations(runtime)[before:] == ["summarise"]
    step = next(s for s in result.steps if s.key == "summarise")
    assert step.output == {"counts": {"succeeded": 0}, "note": "dry"}
    assert result.output["steps"]["done"]["output"] == {"ok": 0}
    # And the would-be submission lists each item's rendered request
    call = step.dry_run["call"]
    assert (call["kind"], call["provider"], call["model"]) == ("llm_batch", "scripted", fixture)
    assert [(i["custom_id"], i["request"]["prompt"]) for i in call["items"]] == [
        ("item-0", "Summarise review 0: great"),
        ("item-1", "Summarise review 1: awful"),
    ]


def test_a_dry_run_of_a_real_provider_sends_nothing_and_records_its_request_bodies(
    runtime, monkeypatch
):
    # Given an Anthropic batch (no network is reachable: a submission would fail the run)
    sent: list[Any] = []
    monkeypatch.setattr("relayflow.ai.providers.http_common._send", lambda *a, **k: sent.append(a))
    definition = """
id: batch-real
start: summarise
steps:
  summarise:
    type: llm_batch
    model: anthropic:claude-haiku-4-5
    api_key: {name: relayflow/anthropic}
    prompt: "Summarise: {{ trigger.text }}"
    max_tokens: 100
"""
    result = run_workflow(
        load_workflow_text(definition, "b.yaml"), {"text": "great"}, runtime=runtime, dry_run=True
    )
    # Then nothing was sent (no key read either), and the record holds the Messages params
    assert result.succeeded, (result.error, result.cause)
    assert sent == []
    (item,) = next(s for s in result.steps if s.key == "summarise").dry_run["call"]["items"]
    assert item["request"] == {
        "model": "claude-haiku-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Summarise: great"}]}],
    }
