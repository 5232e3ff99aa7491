"""An Express run's timeline and failing step from its state machine's CloudWatch Logs, on the
local runtime: its machine logs level ALL to the state-machine log group (as on AWS), and
``GET /runs/{id}`` and the maintenance sweep fold the execution's records
(``relayflow.control.express_logs``) with what the steps recorded."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from relayflow_testing import allowed_server
from workflow_shapes import soft_failure

from relayflow.control.dlq import Dlq
from relayflow.control.express_logs import ExecutionLogs
from relayflow.control.express_sweep import sweep_express_runs
from relayflow.control.express_timeline import express_timeline
from relayflow.control.service import ControlPlane
from relayflow.dal.dlq import DlqDal
from relayflow.local import LocalRuntime
from relayflow.settings import get_settings

pytestmark = pytest.mark.integration


def failing(workflow_id: str = "failing") -> dict[str, Any]:
    """A native transform, then a code step that raises, tried twice."""
    return {
        "id": workflow_id,
        "start": "shape",
        "steps": {
            "shape": {"type": "transform", "mapping": {"n": 1}, "on_success": "boom"},
            "boom": {
                "type": "code",
                "code": "raise ValueError('no stock')",
                "timeout_seconds": 10,
                "retry": {
                    "max_attempts": 2,
                    "backoff": "fixed",
                    "base_seconds": 1,
                    "retry_on": ["Relayflow.CodeError"],
                },
            },
        },
    }


def run_to_end(
    runtime: LocalRuntime,
    plane: ControlPlane,
    tenant: str,
    definition: dict[str, Any],
    trigger: Any,
) -> str:
    plane.put_workflow(tenant, definition["id"], definition)
    started = plane.start_run(tenant, definition["id"], trigger)
    assert started.engine == "express"
    run = plane.dal.get_run(tenant, started.run_id)
    runtime.wait(run.execution_arn, timeout=30)
    return started.run_id


def test_a_failed_express_run_shows_its_failed_step_attempts_and_error(runtime, plane, tenant):
    # Given an Express run that failed in its second step after two attempts
    run_id = run_to_end(runtime, plane, tenant, failing(), {})
    # When it is read (before the sweep settled it)
    detail = plane.get_run(tenant, run_id)
    # Then the timeline, from the logs, has both steps in run order with their times
    assert (detail.status, detail.timeline_source) == ("failed", "records+logs")
    assert [(s.key, s.status, s.attempts) for s in detail.steps] == [
        ("shape", "succeeded", 1),
        ("boom", "failed", 2),
    ]
    boom = detail.steps[1]
    assert boom.error == "Relayflow.CodeError"
    assert boom.cause is None  # execution data: not in the logs
    for step in detail.steps:
        assert step.started_at and step.ended_at and step.duration_ms is not None
    assert detail.steps[0].ended_at <= boom.started_at
    # And the failing step, though nothing recorded it on the run item yet
    assert detail.failing_step == "boom"
    assert plane.dal.get_run(tenant, run_id).failing_step is None


def test_a_succeeded_express_run_shows_native_steps_with_times_and_outputs(runtime, plane, tenant):
    # Given an Express run of a native step, a for_each of a code step, and a webhook_out
    with allowed_server() as receiver:
        definition = {
            "id": "fan",
            "start": "shape",
            "outputs": ["shape"],  # kept in the final document
            "steps": {
                "shape": {"type": "transform", "mapping": {"n": 1}, "on_success": "each"},
                "each": {
                    "type": "for_each",
                    "items": "{{ trigger.items }}",
                    "step": "double",
                    "max_items": 3,
                    "on_success": "post",
                },
                "double": {"type": "code", "code": "return 2", "timeout_seconds": 10},
                "post": {
                    "type": "webhook_out",
                    "url": f"{receiver.url}/hook",
                    "body": {},
                    "timeout_seconds": 10,
                },
            },
        }
        run_id = run_to_end(runtime, plane, tenant, definition, {"items": [1, 2, 3]})
    # When it is read
    detail = plane.get_run(tenant, run_id)
    # Then every step has an entry with times, each for_each item its own
    assert (detail.status, detail.timeline_source, detail.timeline_note) == (
        "succeeded",
        "records+logs",
        None,
    )
    keys = [s.key for s in detail.steps]
    assert keys[:2] == ["shape", "each"] and keys[-1] == "post"
    assert sorted(keys[2:-1]) == ["double[0]", "double[1]", "double[2]"]
    assert all(s.status == "succeeded" and s.started_at and s.ended_at for s in detail.steps)
    # And outputs from the step records and the final document
    by_key = {s.key: s for s in detail.steps}
    assert by_key["shape"].output == {"n": 1} and by_key["shape"].runner == "native"
    assert [by_key[f"double[{i}]"].output for i in range(3)] == [2, 2, 2]
    assert by_key["post"].output["status"] == 200
    assert detail.failing_step is None


def test_a_step_whose_error_went_to_its_fallback_shows_it(runtime, plane, tenant):
    # Given a step with on_error: continue that fails
    definition = soft_failure({"type": "noop"}, outputs=["boom"])  # boom kept in the document
    run_id = run_to_end(runtime, plane, tenant, definition, {})
    # When the run is read / Then the step shows its fallback, its error and its output
    detail = plane.get_run(tenant, run_id)
    assert detail.status == "succeeded"
    boom, done = detail.steps
    assert (boom.key, boom.status, boom.error, boom.output) == (
        "boom",
        "fallback",
        "Relayflow.CodeError",
        {"price": 0},
    )
    assert (done.key, done.status) == ("done", "succeeded")


def test_the_sweep_puts_the_failing_step_on_the_run_and_its_dlq_entry(runtime, plane, tenant):
    # Given a failed Express run its machine recorded
    run_id = run_to_end(runtime, plane, tenant, failing(), {})
    # When the sweep settles it after its deadline
    later = datetime.now(UTC) + timedelta(minutes=10)
    assert run_id in sweep_express_runs(plane, now=later)["settled"]
    # Then the run item and its DLQ entry name the step it failed in
    run = plane.dal.get_run(tenant, run_id)
    assert (run.recorded_status, run.failing_step) == ("failed", "boom")
    entry = DlqDal().get(tenant, run_id)
    assert entry is not None and entry.failing_step == "boom"
    # And no output is archived for the native step that succeeded: the logs do not hold it
    # (a failed run has no final document), so it is unknown rather than null
    assert entry.outputs is None


def test_a_dlq_retry_of_an_express_run_is_settled_by_the_sweep_again(runtime, plane, tenant):
    # Given a failed Express run, settled into the DLQ
    run_id = run_to_end(runtime, plane, tenant, failing(), {})
    later = datetime.now(UTC) + timedelta(minutes=10)
    sweep_express_runs(plane, now=later)
    # When it is retried from the DLQ and fails again
    result = Dlq(plane.ports).retry(tenant, run_id)
    assert result.attempt == 2
    run = plane.dal.get_run(tenant, run_id)
    assert run.execution_arn.endswith(f"{run_id}_r2")
    runtime.wait(run.execution_arn, timeout=30)
    # Then the sweep settles the retry's end too (its own deadline, not the first one's)
    settled = sweep_express_runs(plane, now=later + timedelta(minutes=10))
    assert run_id in settled["settled"]
    run = plane.dal.get_run(tenant, run_id)
    assert (run.status, run.recorded_status, run.failing_step) == ("failed", "failed", "boom")
    entry = DlqDal().get(tenant, run_id)
    assert (entry.status, entry.failing_step) == ("pending", "boom")
    # And the timeline is the retry's execution's alone (its ARN extends the first one's)
    detail = plane.get_run(tenant, run_id)
    assert [(s.key, s.status) for s in detail.steps] == [("shape", "succeeded"), ("boom", "failed")]


class _Refusing:
    """A logs client that refuses every call as IAM or CloudWatch Logs would."""

    def __init__(self, code: str) -> None:
        self.code = code

    def filter_log_events(self, **_: Any) -> dict[str, Any]:
        raise ClientError({"Error": {"Code": self.code, "Message": "no"}}, "FilterLogEvents")


@pytest.mark.parametrize("code", ["AccessDeniedException", "ThrottlingException"])
def test_logs_that_cannot_be_read_leave_the_recorded_timeline_and_say_why(
    runtime, plane, tenant, code
):
    # Given a failed Express run
    run_id = run_to_end(runtime, plane, tenant, failing(), {})
    run = plane.dal.get_run(tenant, run_id)
    version = plane.dal.get_version(tenant, "failing", run.version)
    # When its logs cannot be read
    timeline = express_timeline(plane.dal, run, version, ExecutionLogs(_Refusing(code)))
    # Then the timeline is what the steps recorded (nothing: the acting step failed), and says why
    assert (timeline.steps, timeline.source) == ([], "records")
    assert code in (timeline.note or "")


def test_the_machine_logs_to_the_stacks_log_group_as_on_aws(runtime, plane, tenant):
    # Given an Express workflow and a Standard one
    plane.put_workflow(tenant, "failing", failing())
    plane.put_workflow(tenant, "slow", {**failing("slow"), "engine": "standard"})
    group = get_settings().state_machine_log_group_arn
    assert group and group.endswith(":log-group:/aws/vendedlogs/states/relayflow-local:*")
    # Then Express logs every event and Standard errors only, without execution data
    for workflow_id, level in (("failing", "ALL"), ("slow", "ERROR")):
        head = plane.dal.get_workflow(tenant, workflow_id)
        described = runtime.sfn_client.describe_state_machine(
            stateMachineArn=head.state_machine_arn
        )
        logging = described["loggingConfiguration"]
        assert (logging["level"], logging["includeExecutionData"]) == (level, False)
        assert logging["destinations"][0]["cloudWatchLogsLogGroup"]["logGroupArn"] == group


def test_a_workflow_with_step_events_is_read_from_the_step_events_log_group(runtime, plane, tenant):
    # Given an Express workflow with events.steps: its machine logs to the step-events group
    definition = {**failing("evented"), "events": {"steps": True}}
    run_id = run_to_end(runtime, plane, tenant, definition, {})
    head = plane.dal.get_workflow(tenant, "evented")
    described = runtime.sfn_client.describe_state_machine(stateMachineArn=head.state_machine_arn)
    destination = described["loggingConfiguration"]["destinations"][0]
    assert (
        destination["cloudWatchLogsLogGroup"]["logGroupArn"]
        == get_settings().step_events_log_group_arn
    )
    # When the run is read / Then its timeline comes from that group's records
    detail = plane.get_run(tenant, run_id)
    assert detail.timeline_source == "records+logs"
    assert [(s.key, s.status) for s in detail.steps] == [("shape", "succeeded"), ("boom", "failed")]
    assert detail.failing_step == "boom"


class _Cut:
    """A logs client that has delivered an execution's records only up to a given record."""

    def __init__(self, client: Any, last_id: int) -> None:
        self.client, self.last_id = client, last_id

    def filter_log_events(self, **params: Any) -> dict[str, Any]:
        answer = self.client.filter_log_events(**params)
        events = [
            e for e in answer["events"] if int(json.loads(e["message"])["id"]) <= self.last_id
        ]
        return {**answer, "events": events}


def test_logs_without_the_runs_end_say_which_steps_are_not_known_to_have_ended(
    runtime, plane, tenant
):
    # Given a failed Express run whose logs are delivered up to its failing step's start only
    run_id = run_to_end(runtime, plane, tenant, failing(), {})
    run = plane.dal.get_run(tenant, run_id)
    version = plane.dal.get_version(tenant, "failing", run.version)
    records = (
        ExecutionLogs()
        .read(get_settings().state_machine_log_group_arn, run.execution_arn, 0, 2**45)
        .records
    )
    entered = next(r.id for r in records if r.type == "TaskStateEntered" and r.name == "boom")
    logs = ExecutionLogs(_Cut(runtime.client("logs"), entered))
    # When the run is read
    timeline = express_timeline(plane.dal, run, version, logs)
    # Then the step whose end was not delivered shows running, and the note says so
    assert [(s.key, s.status) for s in timeline.steps] == [
        ("shape", "succeeded"),
        ("boom", "running"),
    ]
    assert "does not hold the run's end yet" in (timeline.note or "")
    assert "not known yet how boom ended" in (timeline.note or "")
