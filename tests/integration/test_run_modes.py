"""Run modes on the control plane and the local runtime: the engine-version guard and the
engine version every run records.

One runtime serves the module; every test works in its own tenant, so tests share nothing.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from runs import entered_states, settle
from workflow_shapes import THREE_STEPS, kind_dispatch

from relayflow.adapters.aws import client
from relayflow.control import workflow_publish
from relayflow.control.errors import InvalidDefinition
from relayflow.control.recorder import record_status_change, status_change_event
from relayflow.control.service import ControlPlane
from relayflow.engine import ENGINE_VERSION
from relayflow.local import LocalRuntime
from relayflow.settings import get_settings
from relayflow.tenancy import TENANT_TAG

pytestmark = pytest.mark.integration


def greet(greeting: str = "hi", requires: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "greet",
        "start": "done",
        "steps": {"done": {"type": "transform", "mapping": {"greeting": greeting}}},
    }
    if requires is not None:
        data["requires"] = requires
    return data


# --------------------------------------------------------------------------- engine version


def test_a_definition_for_a_newer_engine_is_refused_and_nothing_is_stored(plane, tenant):
    with pytest.raises(InvalidDefinition) as info:
        plane.put_workflow(tenant, "greet", greet(requires=">=99"))
    [problem] = info.value.details
    assert problem["path"] == "requires" and problem["rule"] == "engine-version"
    assert ">=99" in problem["message"] and ENGINE_VERSION in problem["message"]
    assert plane.dal.get_workflow(tenant, "greet") is None


def test_every_run_records_the_engine_that_compiled_its_version(
    runtime, plane, tenant, monkeypatch
):
    # Given version 1 compiled by an older engine, and version 2 by this one
    monkeypatch.setattr(workflow_publish, "ENGINE_VERSION", "0.0.9")
    plane.put_workflow(tenant, "greet", greet("v1"))
    monkeypatch.undo()
    plane.put_workflow(tenant, "greet", greet("v2", requires=f">={ENGINE_VERSION}"))
    assert [v.engine_version for v in plane.get_workflow(tenant, "greet").versions] == [
        "0.0.9",
        ENGINE_VERSION,
    ]
    # When a run starts on the live version, and one on version 1
    live = plane.start_run(tenant, "greet", {})
    pinned = plane.start_run(tenant, "greet", {}, version=1)
    # Then each run item records the engine of the machine it started on
    assert plane.dal.get_run(tenant, live.run_id).engine_version == ENGINE_VERSION
    assert plane.dal.get_run(tenant, pinned.run_id).engine_version == "0.0.9"
    # And GET /runs/{id} shows it
    detail = settle(runtime, plane, tenant, pinned.run_id)
    assert detail.engine_version == "0.0.9" and detail.status == "succeeded"
    # When version 1 is made live again, new runs record its engine
    plane.rollback_workflow(tenant, "greet", 1)
    again = plane.start_run(tenant, "greet", {})
    assert again.engine_version == "0.0.9"


def test_deploy_refuses_a_definition_that_needs_a_newer_client(tmp_path, capsys, monkeypatch):
    from relayflow.cli.main import main

    # Given a definition that needs Relayflow 99, and an API nobody listens on
    path = tmp_path / "greet.yaml"
    path.write_text("id: greet\nrequires: '>=99'\nstart: a\nsteps: {a: {type: noop}}\n")
    monkeypatch.delenv("RELAYFLOW_API_URL", raising=False)
    monkeypatch.delenv("RELAYFLOW_API_KEY", raising=False)
    # When it is deployed, then the client refuses it before any request (exit 2: invalid)
    assert main(["deploy", str(path), "--api", "http://127.0.0.1:9", "--api-key", "k"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: requires: this definition requires Relayflow >=99" in err
    assert f"this engine is Relayflow {ENGINE_VERSION}; upgrade the client [engine-version]" in err


# --------------------------------------------------------------------------- dry runs


def approve_then_put(table: str) -> dict[str, Any]:
    """An approval, then a tool that writes to ``table``."""
    return {
        "id": "gated",
        "start": "ask",
        "steps": {
            "ask": {"type": "approval", "title": "Ship {{ trigger.order }}?", "on_approve": "save"},
            "save": {
                "type": "tool",
                "tool": "aws.dynamodb.put_item",
                "args": {"table": table, "item": {"pk": "{{ run.tenant }}#{{ trigger.order }}"}},
                "dry_run_output": {"saved": "{{ trigger.order }}"},
            },
        },
    }


def test_a_dry_run_waits_on_its_approval_and_stays_dry_when_resumed(runtime, plane, tenant):
    from relayflow.control.waits import WaitService

    # Given a table the workflow would write to, and a dry run of it waiting on an approval
    table = f"orders-{tenant}"
    client("dynamodb").create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    plane.put_workflow(tenant, "gated", approve_then_put(table))
    started = plane.start_run(tenant, "gated", {"order": "o-1"}, dry_run=True)
    assert started.dry_run and plane.dal.get_run(tenant, started.run_id).dry_run
    waits = WaitService()
    pending = None
    for _ in range(200):
        found = waits.list_approvals(tenant).items
        if found:
            pending = found[0]
            break
        time.sleep(0.05)
    assert pending is not None and pending.run_id == started.run_id
    # When someone approves it
    waits.respond(tenant, pending.approval_id, "approve", responder="alice")
    detail = settle(runtime, plane, tenant, started.run_id)
    # Then the resumed run is still dry: the write was simulated, and the table is empty
    assert detail.status == "succeeded" and detail.dry_run
    steps = {step.key: step for step in detail.steps}
    assert steps["ask"].dry_run is None and steps["ask"].output["approved"] is True
    assert steps["save"].dry_run["simulated"] is True
    assert steps["save"].dry_run["call"]["args"]["item"] == {"pk": f"{tenant}#o-1"}
    assert steps["save"].output == {"saved": "o-1"}
    assert client("dynamodb").scan(TableName=table)["Items"] == []


def test_a_child_started_by_a_dry_parent_is_dry(runtime, plane, tenant):
    # Given a child that writes to a queue, and a parent that starts it
    # (the tenant's own queue: tagged relayflow-tenant=<tenant>)
    queue_url = client("sqs").create_queue(QueueName=f"q-{tenant}", tags={TENANT_TAG: tenant})[
        "QueueUrl"
    ]
    plane.put_workflow(
        tenant,
        "child",
        {
            "id": "child",
            "start": "send",
            "steps": {
                "send": {
                    "type": "tool",
                    "tool": "aws.sqs.send_message",
                    "args": {"queue_url": queue_url, "body": "{{ trigger.n }}"},
                }
            },
        },
    )
    plane.put_workflow(
        tenant,
        "parent",
        {
            "id": "parent",
            "start": "call",
            "steps": {"call": {"type": "sub_workflow", "workflow_id": "child", "input": {"n": 7}}},
        },
    )
    # When the parent runs dry
    started = plane.start_run(tenant, "parent", {}, dry_run=True)
    detail = settle(runtime, plane, tenant, started.run_id)
    assert detail.status == "succeeded", (detail.error, detail.cause)
    # Then the child's document and its recorded run are dry, and it sent nothing
    child_output = detail.output["steps"]["call"]["output"]
    child_id = child_output["run_id"]
    assert child_output["steps"]["send"]["output"]["dry_run"] is True
    machine = f"relayflow-{get_settings().stage}-{tenant}_child"
    described = runtime.sfn_client.describe_execution(
        executionArn=f"arn:aws:states:us-east-1:123456789012:execution:{machine}:{child_id}"
    )
    assert json.loads(described["input"])["run"]["dry_run"] is True
    record_status_change(status_change_event(described), control=plane)
    assert plane.dal.get_run(tenant, child_id).dry_run is True
    assert "Messages" not in client("sqs").receive_message(QueueUrl=queue_url)


def test_a_failed_dry_run_reaches_no_dlq_and_trips_no_breaker(runtime, plane, tenant):
    # Given a workflow with a breaker that opens on one failure, whose code step fails
    plane.put_workflow(
        tenant,
        "flaky",
        {
            "id": "flaky",
            "start": "boom",
            "breaker": {"failure_threshold": 1, "cooldown_seconds": 600},
            "steps": {"boom": {"type": "code", "code": "raise ValueError('no')"}},
        },
    )
    # When a dry run fails
    started = plane.start_run(tenant, "flaky", {}, dry_run=True)
    detail = settle(runtime, plane, tenant, started.run_id)
    assert detail.status == "failed" and detail.dry_run
    # Then nothing is archived and the breaker stays closed: a real run still starts
    assert plane.dlq.list_entries(tenant).items == []
    real = plane.start_run(tenant, "flaky", {})
    assert real.created and not real.dry_run
    # While the real run's failure does count (the breaker opens, the DLQ holds it)
    settle(runtime, plane, tenant, real.run_id)
    assert [e.run_id for e in plane.dlq.list_entries(tenant).items] == [real.run_id]


# --------------------------------------------------------------------------- dynamic targets


def handler(label: str) -> dict[str, Any]:
    return {
        "id": f"{label}-handler",
        "start": "answer",
        "steps": {"answer": {"type": "transform", "mapping": {"handled_by": label}}},
    }


DISPATCH = kind_dispatch(missing={"type": "transform", "mapping": {"error": "{{ error.Error }}"}})


def dispatched(runtime: LocalRuntime, plane: ControlPlane, tenant: str, kind: str) -> Any:
    """The settled, succeeded run of the dispatcher for ``kind``."""
    run = plane.start_run(tenant, "dispatch", {"kind": kind})
    detail = settle(runtime, plane, tenant, run.run_id)
    assert detail.status == "succeeded", (detail.error, detail.cause)
    return detail


def test_a_templated_target_routes_to_a_child_chosen_by_input(runtime, plane, tenant):
    # Given two handlers and a dispatcher whose target is rendered from the trigger
    plane.put_workflow(tenant, "order-handler", handler("order"))
    plane.put_workflow(tenant, "refund-handler", handler("refund"))
    plane.put_workflow(tenant, "dispatch", DISPATCH)
    # When it runs for each kind, then each run reaches its own child
    for kind in ("order", "refund"):
        detail = dispatched(runtime, plane, tenant, kind)
        child = detail.output["steps"]["route"]["output"]
        assert child["steps"]["answer"]["output"] == {"handled_by": kind}
        machine = f"relayflow-{get_settings().stage}-{tenant}_{kind}-handler"
        described = runtime.sfn_client.describe_execution(
            executionArn=f"arn:aws:states:us-east-1:123456789012:execution:{machine}:"
            f"{child['run_id']}"
        )
        assert json.loads(described["input"])["run"]["workflow_id"] == f"{kind}-handler"


def test_an_unknown_or_another_tenants_target_is_workflow_not_found(runtime, plane, tenant):
    # Given another tenant that has a "secret-handler", and a dispatcher in this tenant
    other = f"o-{uuid.uuid4().hex[:10]}"
    plane.put_workflow(other, "secret-handler", handler("secret"))
    plane.put_workflow(tenant, "dispatch", DISPATCH)
    for kind in ("nothing", "secret"):
        # When the rendered target names no workflow of this tenant
        detail = dispatched(runtime, plane, tenant, kind)
        # Then the step fails with Relayflow.WorkflowNotFound, which routes like any failure
        assert detail.output["steps"]["missing"]["output"] == {
            "error": "Relayflow.WorkflowNotFound"
        }
    # And the other tenant's workflow never ran
    machine = f"relayflow-{get_settings().stage}-{other}_secret-handler"
    arn = f"arn:aws:states:us-east-1:123456789012:stateMachine:{machine}"
    assert runtime.sfn_client.list_executions(stateMachineArn=arn)["executions"] == []


def test_a_templated_target_without_a_route_fails_the_run_naming_it(runtime, plane, tenant):
    definition = json.loads(json.dumps(DISPATCH))
    del definition["steps"]["route"]["on_failure"]
    del definition["steps"]["missing"]
    plane.put_workflow(tenant, "dispatch", definition)
    run = plane.start_run(tenant, "dispatch", {"kind": "ghost"})
    detail = settle(runtime, plane, tenant, run.run_id)
    assert (detail.status, detail.error) == ("failed", "Relayflow.WorkflowNotFound")
    assert "found no workflow ghost-handler of this tenant" in detail.cause


# --------------------------------------------------------------------------- step-through


def entered(runtime: LocalRuntime, plane: ControlPlane, tenant: str, run_id: str) -> list[str]:
    """The steps whose main state the run has entered so far."""
    states = entered_states(runtime, plane, tenant, run_id)
    return [name for name in states if name in THREE_STEPS["steps"]]


def waiting_gate(plane: ControlPlane, tenant: str, run_id: str) -> str:
    """The step the run waits before (polls until a gate is pending)."""
    from relayflow.dal.waits import WaitDal

    for _ in range(400):
        pending = [
            w.step
            for w in WaitDal(plane.dal).list_run_waitpoints(tenant, run_id)
            if w.label == "step-through" and w.status == "pending"
        ]
        if pending:
            return pending[-1]
        time.sleep(0.025)
    raise AssertionError("the run never waited at a gate")


def test_three_continues_walk_three_steps_one_each(runtime, plane, tenant):
    from relayflow.control.errors import Conflict

    plane.put_workflow(tenant, "three", THREE_STEPS)
    normal_arn = plane.dal.get_version(tenant, "three", 1).state_machine_version_arn
    # When a step-through run starts, it waits before the first step
    run = plane.start_run(tenant, "three", {}, step_through=True)
    assert run.step_through
    assert waiting_gate(plane, tenant, run.run_id) == "one"
    assert entered(runtime, plane, tenant, run.run_id) == []
    # Then each continue lets exactly one step run
    for step, seen in (("one", ["one"]), ("two", ["one", "two"])):
        assert plane.continue_run(tenant, run.run_id).released == step
        nxt = waiting_gate(plane, tenant, run.run_id)
        assert entered(runtime, plane, tenant, run.run_id) == seen
        assert nxt == {"one": "two", "two": "three"}[step]
    assert plane.continue_run(tenant, run.run_id).released == "three"
    detail = settle(runtime, plane, tenant, run.run_id)
    assert detail.status == "succeeded"
    assert [s.key for s in detail.steps] == ["one", "two", "three"]
    # And a continue after the end is refused
    with pytest.raises(Conflict):
        plane.continue_run(tenant, run.run_id)
    # And normal runs still start on the normal version, which has no gates
    version = plane.dal.get_version(tenant, "three", 1)
    assert version.step_through_version_arn not in (None, normal_arn)
    normal = plane.start_run(tenant, "three", {})
    described = runtime.sfn_client.describe_execution(
        executionArn=plane.dal.get_run(tenant, normal.run_id).execution_arn
    )
    assert described["stateMachineVersionArn"] == normal_arn
    assert settle(runtime, plane, tenant, normal.run_id).status == "succeeded"


def test_a_double_continue_releases_one_step(runtime, plane, tenant):
    from concurrent.futures import ThreadPoolExecutor

    from relayflow.control.errors import Conflict
    from relayflow.control.waits import WaitService
    from relayflow.dal.waits import WaitDal

    # Given a step-through run whose first step waits (so no gate is pending while it runs)
    definition = json.loads(json.dumps(THREE_STEPS))
    definition["steps"]["one"] = {"type": "waitpoint", "label": "hold", "on_success": "two"}
    plane.put_workflow(tenant, "three", definition)
    run = plane.start_run(tenant, "three", {}, step_through=True)
    assert waiting_gate(plane, tenant, run.run_id) == "one"

    def attempt(_: int) -> str:
        try:
            return f"released {plane.continue_run(tenant, run.run_id).released}"
        except Conflict:
            return "conflict"

    # When two continues race for the gate
    with ThreadPoolExecutor(2) as pool:
        outcomes = sorted(pool.map(attempt, range(2)))
    # Then one released step one and the other was refused
    assert outcomes == ["conflict", "released one"]
    # And while step one runs (it waits for its waitpoint), a continue releases nothing
    hold = None
    for _ in range(400):
        hold = next(
            (
                w
                for w in WaitDal(plane.dal).list_run_waitpoints(tenant, run.run_id)
                if w.label == "hold"
            ),
            None,
        )
        if hold is not None:
            break
        time.sleep(0.025)
    assert hold is not None
    with pytest.raises(Conflict, match="one is running"):
        plane.continue_run(tenant, run.run_id)
    # When step one ends, the run waits before step two
    WaitService(plane.dal).complete_waitpoint(tenant, hold.waitpoint_id, {"ok": True})
    assert waiting_gate(plane, tenant, run.run_id) == "two"
    assert entered(runtime, plane, tenant, run.run_id) == ["one"]
    # And to_end lets the rest run without pausing
    result = plane.continue_run(tenant, run.run_id, to_end=True)
    assert (result.released, result.to_end) == ("two", True)
    assert settle(runtime, plane, tenant, run.run_id).status == "succeeded"


def test_continue_refuses_a_run_that_is_not_stepping_through(runtime, plane, tenant):
    from relayflow.control.errors import Conflict

    plane.put_workflow(tenant, "three", THREE_STEPS)
    run = plane.start_run(tenant, "three", {})
    with pytest.raises(Conflict, match="not a step-through run"):
        plane.continue_run(tenant, run.run_id)


def test_the_local_runner_asks_before_each_step_and_can_run_to_the_end(runtime):
    from relayflow.cli.run import step_prompt
    from relayflow.definition.models import Workflow
    from relayflow.runner import run_workflow

    workflow = Workflow.model_validate(THREE_STEPS)
    # Given a prompt that is answered with Enter every time
    asked: list[str] = []

    def enter(question: str) -> str:
        asked.append(question)
        return ""

    result = run_workflow(workflow, {}, runtime=runtime, step=step_prompt(enter))
    # Then it asked once before each step, in order, and the run finished
    assert result.status == "succeeded", (result.error, result.cause)
    assert [q.split()[2] for q in asked] == ["one", "two", "three"]
    assert [s.key for s in result.steps] == ["one", "two", "three"]
    # And answering "c" once runs the rest without asking again
    asked.clear()
    result = run_workflow(
        workflow, {}, runtime=runtime, step=step_prompt(lambda q: asked.append(q) or "c")
    )
    assert result.status == "succeeded" and len(asked) == 1
