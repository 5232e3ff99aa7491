"""Express runs on the local runtime: the control plane creates an Express machine for a short
workflow, the machine records its run's end without the recorder, the maintenance sweep marks
a run that died ``timed_out`` and archives it, and a duplicate step invocation acts once."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from relayflow_testing import allowed_server, load_handler
from workflow_shapes import two_transforms

from relayflow.control.errors import InvalidDefinition, Unprocessable
from relayflow.control.express_sweep import sweep_express_runs
from relayflow.control.service import ControlPlane
from relayflow.dal.dlq import DlqDal
from relayflow.dal.express import ExpressDeadlines
from relayflow.local import LambdaContext, LocalRuntime
from relayflow.settings import override_settings

pytestmark = pytest.mark.integration


@pytest.fixture
def plane(runtime: LocalRuntime) -> Iterator[ControlPlane]:
    runtime.reset_invocations()
    yield ControlPlane()
    runtime.duplicate_invocations = False


def short(workflow_id: str = "quick", fail: bool = False) -> dict[str, Any]:
    """A native transform, then (with ``fail``) a code step that raises."""
    steps: dict[str, Any] = {
        "shape": {"type": "transform", "mapping": {"greeting": "hi {{ trigger.name }}"}},
    }
    if fail:
        steps["shape"]["on_success"] = "boom"
        steps["boom"] = {"type": "code", "code": "raise ValueError('no stock')"}
    return {"id": workflow_id, "start": "shape", "steps": steps}


def ended(runtime: LocalRuntime, plane: ControlPlane, tenant: str, run_id: str) -> Any:
    run = plane.dal.get_run(tenant, run_id)
    assert run is not None and run.execution_arn
    runtime.wait(run.execution_arn, timeout=30)
    return plane.dal.get_run(tenant, run_id)


def machine_type(runtime: LocalRuntime, plane: ControlPlane, tenant: str, workflow_id: str) -> str:
    head = plane.dal.get_workflow(tenant, workflow_id)
    assert head is not None
    described = runtime.sfn_client.describe_state_machine(stateMachineArn=head.state_machine_arn)
    return str(described["type"])


def test_a_short_workflow_gets_an_express_machine_and_shows_the_choice(runtime, plane, tenant):
    # Given a short workflow of native steps / When it is published
    plane.put_workflow(tenant, "quick", short())
    # Then its machine is Express, and the workflow says so and why
    assert machine_type(runtime, plane, tenant, "quick") == "EXPRESS"
    detail = plane.get_workflow(tenant, "quick")
    assert detail.engine == "express"
    assert detail.versions[-1].engine == "express"
    assert "short" in (detail.versions[-1].engine_reason or "")


def test_a_workflow_with_an_approval_gets_a_standard_machine_with_the_reason(
    runtime, plane, tenant
):
    definition = {
        "id": "review",
        "start": "ask",
        "steps": {"ask": {"type": "approval", "title": "ok?"}},
    }
    plane.put_workflow(tenant, "review", definition)
    assert machine_type(runtime, plane, tenant, "review") == "STANDARD"
    version = plane.get_workflow(tenant, "review").versions[-1]
    assert version.engine == "standard"
    assert "step 'ask' (approval)" in (version.engine_reason or "")


def test_engine_express_on_an_ineligible_workflow_is_refused_with_the_reason(plane, tenant):
    definition = {
        "id": "review",
        "engine": "express",
        "start": "ask",
        "steps": {"ask": {"type": "approval", "title": "ok?"}},
    }
    with pytest.raises(InvalidDefinition) as refused:
        plane.put_workflow(tenant, "review", definition)
    problems = refused.value.details
    assert [(p["path"], p["rule"]) for p in problems] == [("steps.ask", "engine")]
    assert "waits for a decision" in problems[0]["message"]


def test_a_version_the_express_machine_cannot_run_is_refused(plane, tenant):
    # Given a workflow on an Express machine
    plane.put_workflow(tenant, "quick", short())
    # When a version with an approval is published / Then 422: a machine keeps its type
    longer = {**short(), "steps": {"shape": {"type": "approval", "title": "ok?"}}}
    with pytest.raises(Unprocessable) as refused:
        plane.put_workflow(tenant, "quick", longer)
    assert "cannot change a machine's type" in refused.value.message


def test_an_express_run_records_its_success_without_the_recorder(runtime, plane, tenant):
    # Given an Express workflow / When a run ends (no recorder runs in this test)
    plane.put_workflow(tenant, "quick", short())
    started = plane.start_run(tenant, "quick", {"name": "Ada"})
    run = ended(runtime, plane, tenant, started.run_id)
    # Then the machine recorded it: succeeded, with the output, never through the recorder
    assert run.engine == "express"
    assert (run.status, run.native_status, run.recorded_status) == ("succeeded", "succeeded", None)
    assert json.loads(run.output)["steps"]["shape"]["output"] == {"greeting": "hi Ada"}
    assert run.ended_at
    assert runtime.invocations_of("relayflow-recorder") == []


def test_an_express_run_records_its_failure_then_fails(runtime, plane, tenant):
    plane.put_workflow(tenant, "failing", short("failing", fail=True))
    started = plane.start_run(tenant, "failing", {"name": "Ada"})
    run = ended(runtime, plane, tenant, started.run_id)
    # Then the run item says failed with the step's error, and the execution failed with it
    assert (run.status, run.native_status) == ("failed", "failed")
    assert run.error == "Relayflow.CodeError"
    assert "no stock" in run.cause
    described = runtime.sfn_client.describe_execution(executionArn=run.execution_arn)
    assert described["status"] == "FAILED"


def test_the_sweep_settles_a_recorded_failure_into_the_dlq(runtime, plane, tenant):
    # Given a failed Express run its machine recorded
    plane.put_workflow(tenant, "failing", short("failing", fail=True))
    started = plane.start_run(tenant, "failing", {"name": "Ada"})
    ended(runtime, plane, tenant, started.run_id)
    # When the sweep runs after its deadline
    later = datetime.now(UTC) + timedelta(minutes=10)
    result = sweep_express_runs(plane, now=later)
    # Then the run's end is settled as the recorder would: archived, recorded
    assert started.run_id in result["settled"]
    run = plane.dal.get_run(tenant, started.run_id)
    assert (run.status, run.recorded_status) == ("failed", "failed")
    assert DlqDal().get(tenant, started.run_id) is not None
    # And a second sweep finds nothing left to do for it
    again = sweep_express_runs(plane, now=later)
    assert started.run_id not in again["settled"] + again["timed_out"]


def put_slow(plane: ControlPlane, tenant: str, seconds: int) -> None:
    """``slow``, one delay of ``seconds``, published for ``tenant``."""
    definition = {
        "id": "slow",
        "start": "pause",
        "steps": {"pause": {"type": "delay", "seconds": seconds}},
    }
    plane.put_workflow(tenant, "slow", definition)


def test_a_killed_express_run_is_swept_to_timed_out_and_archived(runtime, plane, tenant):
    # Given an Express run killed before its machine could record an end
    put_slow(plane, tenant, 200)
    runtime.time_scale = 1.0
    try:
        started = plane.start_run(tenant, "slow", {})
        run = plane.dal.get_run(tenant, started.run_id)
        time.sleep(0.2)
        runtime.stop_execution(run.execution_arn, error="Killed", cause="host lost")
    finally:
        runtime.time_scale = 0.001
    assert plane.dal.get_run(tenant, started.run_id).status == "running"
    # When the sweep runs before the deadline / Then nothing happens yet
    assert started.run_id not in sweep_express_runs(plane)["timed_out"]
    # When it runs past the deadline
    result = sweep_express_runs(plane, now=datetime.now(UTC) + timedelta(minutes=10))
    # Then the run is timed_out and archived in the DLQ
    assert started.run_id in result["timed_out"]
    run = plane.dal.get_run(tenant, started.run_id)
    assert run.status == "timed_out"
    assert run.error == "States.Timeout"
    assert DlqDal().get(tenant, started.run_id) is not None


def test_a_duplicate_step_invocation_acts_once(runtime, plane, tenant):
    # Given an Express workflow that posts to a receiver, and every Invoke duplicated
    with allowed_server() as receiver:
        definition = {
            "id": "notify",
            "start": "post",
            "steps": {
                "post": {
                    "type": "webhook_out",
                    "url": f"{receiver.url}/hook",
                    "body": {"hello": "{{ trigger.name }}"},
                }
            },
        }
        plane.put_workflow(tenant, "notify", definition)
        runtime.duplicate_invocations = True
        started = plane.start_run(tenant, "notify", {"name": "Ada"})
        run = ended(runtime, plane, tenant, started.run_id)
        # Then the step's function ran twice, the receiver got one request, the run succeeded
        invocations = runtime.invocations_of("relayflow-webhook_out")
        assert len(invocations) == 2 and not any(i.failed for i in invocations)
        assert len(receiver.to("/hook")) == 1
        assert run.status == "succeeded"


def test_start_sync_execution_runs_an_express_machine_to_its_end(runtime):
    # Given an Express machine and a Standard one
    sfn = runtime.sfn_client
    asl = {"StartAt": "p", "States": {"p": {"Type": "Pass", "Result": {"ok": 1}, "End": True}}}
    name = f"sync-{uuid.uuid4().hex[:8]}"
    express = runtime.create_state_machine(name, asl, type="EXPRESS")
    standard = runtime.create_state_machine(f"{name}-std", asl)
    # When started synchronously / Then the answer is the execution's end
    answer = sfn.start_sync_execution(stateMachineArn=express, name="one", input="{}")
    assert answer["status"] == "SUCCEEDED"
    assert json.loads(answer["output"]) == {"ok": 1}
    failing = {"StartAt": "f", "States": {"f": {"Type": "Fail", "Error": "E", "Cause": "c"}}}
    runtime.create_state_machine(name, failing, type="EXPRESS")
    answer = sfn.start_sync_execution(stateMachineArn=express, name="two", input="{}")
    assert (answer["status"], answer["error"], answer["cause"]) == ("FAILED", "E", "c")
    # And a Standard machine is refused as on AWS
    with pytest.raises(ClientError) as refused:
        sfn.start_sync_execution(stateMachineArn=standard, name="three", input="{}")
    assert refused.value.response["Error"]["Code"] == "StateMachineTypeNotSupported"


def test_without_its_log_group_an_express_timeline_shows_what_its_steps_recorded(
    runtime, plane, tenant
):
    # Given an Express run of a native step and an acting step, no log group configured (the
    # machine logs nothing: what an Express timeline was before it read the logs)
    with allowed_server() as receiver, override_settings(state_machine_log_group_arn=None):
        definition = {
            "id": "notify",
            "start": "shape",
            "steps": {
                "shape": {"type": "transform", "mapping": {"n": 1}, "on_success": "post"},
                "post": {"type": "webhook_out", "url": f"{receiver.url}/hook", "body": {}},
            },
        }
        plane.put_workflow(tenant, "notify", definition)
        started = plane.start_run(tenant, "notify", {})
        ended(runtime, plane, tenant, started.run_id)
        # When it is read / Then the timeline has the acting step's recorded result only
        detail = plane.get_run(tenant, started.run_id)
    assert detail.status == "succeeded"
    assert [(s.key, s.type, s.status) for s in detail.steps] == [
        ("post", "webhook_out", "succeeded")
    ]
    assert detail.steps[0].output["status"] == 200
    # And it says where the timeline came from, and what it lacks
    assert detail.timeline_source == "records"
    assert "not configured" in (detail.timeline_note or "")


def test_the_maintenance_function_settles_express_runs_past_their_deadline(runtime, plane, tenant):
    # Given a finished Express run whose deadline (moved back here) has passed
    plane.put_workflow(tenant, "quick", short())
    started = plane.start_run(tenant, "quick", {"name": "Ada"})
    run = ended(runtime, plane, tenant, started.run_id)
    markers = ExpressDeadlines(plane.dal)
    (mine,) = [m for m in markers.due("9999", 10_000) if m.run_id == run.run_id]
    markers.remove(mine)
    markers.add("2000-01-01T00:00:00.000000Z", tenant, run.run_id)
    # When the maintenance function runs its pass
    arn = "arn:aws:lambda:us-east-1:123456789012:function:relayflow-maintenance"
    context = LambdaContext(function_name="relayflow-maintenance", invoked_function_arn=arn)
    answer = load_handler("maintenance").handler({}, context)
    # Then it settled the run (a lifecycle event, the recorded status) and dropped its marker
    assert run.run_id in answer["express"]["settled"]
    assert plane.dal.get_run(tenant, run.run_id).recorded_status == "succeeded"
    assert [m for m in markers.due("9999", 10_000) if m.run_id == run.run_id] == []


def test_cancelling_an_express_run_marks_it_aborted_and_its_machine_does_not_overwrite_it(
    runtime, plane, tenant
):
    # Given a running Express run (a real-time delay keeps it running)
    put_slow(plane, tenant, 1)
    runtime.time_scale = 1.0
    try:
        started = plane.start_run(tenant, "slow", {})
        # When it is cancelled (Step Functions cannot stop an Express execution)
        summary = plane.cancel_run(tenant, started.run_id)
        run = ended(runtime, plane, tenant, started.run_id)
    finally:
        runtime.time_scale = 0.001
    # Then the run is aborted; the execution ran to its end and its record changed nothing
    assert summary.status == "aborted"
    assert (run.status, run.native_status) == ("aborted", None)
    described = runtime.sfn_client.describe_execution(executionArn=run.execution_arn)
    assert described["status"] == "SUCCEEDED"
    # And the sweep settles the abort (its lifecycle event) once the deadline passed
    result = sweep_express_runs(plane, now=datetime.now(UTC) + timedelta(minutes=10))
    assert started.run_id in result["settled"]
    assert plane.dal.get_run(tenant, started.run_id).recorded_status == "aborted"


def test_without_the_fix_moto_cannot_start_sync_executions(runtime):
    # Given the runtime without the start_sync_execution fix
    from relayflow.local import compat

    asl = {"StartAt": "p", "States": {"p": {"Type": "Pass", "End": True}}}
    express = runtime.create_state_machine(f"nofix-{uuid.uuid4().hex[:8]}", asl, type="EXPRESS")
    compat.apply(skip=["start_sync_execution"])
    try:
        # Then StartSyncExecution is not implemented (moto 5.2.5, notes row 14)
        with pytest.raises(ClientError) as refused:
            runtime.sfn_client.start_sync_execution(stateMachineArn=express, input="{}")
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    finally:
        compat.apply()
    answer = runtime.sfn_client.start_sync_execution(stateMachineArn=express, input="{}")
    assert answer["status"] == "SUCCEEDED"


def test_step_through_of_an_express_workflow_runs_on_a_standard_sibling(runtime, plane, tenant):
    # Given an Express workflow of two steps
    definition = two_transforms("two")
    plane.put_workflow(tenant, "two", definition)
    assert machine_type(runtime, plane, tenant, "two") == "EXPRESS"
    # When a step-through run starts and is continued to its end
    started = plane.start_run(tenant, "two", {}, step_through=True)
    run = plane.dal.get_run(tenant, started.run_id)
    assert run.engine == "standard"
    machine = run.execution_arn.split(":")[6]
    assert machine.endswith("_two.step")
    described = runtime.sfn_client.describe_state_machine(
        stateMachineArn=":".join([*run.execution_arn.split(":")[:5], "stateMachine", machine])
    )
    assert described["type"] == "STANDARD"
    deadline = time.monotonic() + 30
    while True:
        try:
            plane.continue_run(tenant, started.run_id, to_end=True)
            break
        except Exception:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    # Then it ends like any run
    runtime.wait(run.execution_arn, timeout=30)
    assert runtime.describe(run.execution_arn).status == "SUCCEEDED"


def test_a_standard_machine_keeps_auto_versions_on_standard_and_says_why(runtime, plane, tenant):
    # Given a short workflow first published with engine: standard
    plane.put_workflow(tenant, "quick", {**short(), "engine": "standard"})
    # When a version with engine: auto (Express-safe) is published
    plane.put_workflow(tenant, "quick", {**short(), "name": "v2"})
    # Then the machine stays Standard, and the version says why
    assert machine_type(runtime, plane, tenant, "quick") == "STANDARD"
    version = plane.get_workflow(tenant, "quick").versions[-1]
    assert version.engine == "standard"
    assert "keeps its type" in (version.engine_reason or "")
    # And engine: express on it is refused (422)
    with pytest.raises(Unprocessable):
        plane.put_workflow(tenant, "quick", {**short(), "engine": "express"})
