"""Compensation of a saga run that is cancelled or times out, end to end on the control plane
and the local runtime: the run is stopped, the recorder starts the version's compensation
variant with the run's last ``$.saga``, and the variant's end is recorded on the run item.

A recording HTTP server on 127.0.0.1 plays the remote APIs, so a test sees each step act and
be undone, newest first. One runtime serves the module; every test has its own tenant.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from relayflow_testing import Received, Reply, Server

from relayflow.control.cancel_compensation import EXECUTION_SUFFIX
from relayflow.control.cancel_on import handle_cancel
from relayflow.control.recorder import (
    HistoryNotRead,
    LifecycleEventNotPublished,
    record_status_change,
    status_change_event,
)
from relayflow.control.resume import ResumeRequest
from relayflow.control.service import ControlPlane
from relayflow.dal import RunItem
from relayflow.executions.stepfunctions import Throttled, execution_arn
from relayflow.local import LocalRuntime
from relayflow.runner import run_workflow
from relayflow.settings import get_settings
from relayflow.triggers.sync import TENANT_FIELD
from relayflow.validation import validate_data

pytestmark = pytest.mark.integration


@pytest.fixture
def receiver(remote: Server) -> Server:
    """Answers 200 with ``{"id": <last path segment>}``; ``/fail…`` paths answer 500."""
    return remote.answering(answer)


def answer(received: Received) -> Reply:
    if received.path.startswith("/fail"):
        return 500, {"Content-Type": "application/json"}, b'{"error": "down"}'
    body = {"id": received.path.rsplit("/", 1)[-1]}
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


def saga(url: str, hold: dict[str, Any], **settings: Any) -> dict[str, Any]:
    """reserve → charge (both compensated) → ``hold`` (where the run waits) → ship."""
    return {
        "id": "cancel-saga",
        "start": "reserve",
        "steps": {
            "reserve": {
                "type": "webhook_out",
                "url": f"{url}/reserve/r1",
                "compensate": {
                    "type": "webhook_out",
                    "url": f"{url}/undo/reserve/{{{{ output.body.id }}}}",
                },
                "on_success": "charge",
            },
            "charge": {
                "type": "webhook_out",
                "url": f"{url}/charge/c1",
                "compensate": "refund",
                "on_success": "hold",
            },
            "hold": {**hold, "on_success": "ship"},
            "ship": {
                "type": "webhook_out",
                "url": f"{url}/ship/s1",
                "compensate": {"type": "webhook_out", "url": f"{url}/undo/ship"},
            },
            "refund": {
                "type": "webhook_out",
                "url": f"{url}/undo/charge",
                "body": {"charge": "{{ output.body.id }}"},
            },
        },
        **settings,
    }


LONG_DELAY = {"type": "delay", "seconds": 600_000}


def paths(server: Server) -> list[str]:
    return [r.path.removeprefix(server.url) for r in server.requests]


def start(plane: ControlPlane, tenant: str, definition: dict[str, Any], **trigger: Any) -> RunItem:
    plane.put_workflow(tenant, definition["id"], definition)
    run_id = plane.start_run(tenant, definition["id"], {"order": "o-1", **trigger}).run_id
    run = plane.dal.get_run(tenant, run_id)
    assert run is not None and run.execution_arn
    return run


def entered(runtime: LocalRuntime, arn: str, state: str, timeout: float = 20.0) -> None:
    """Wait until the execution has entered ``state``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = runtime.sfn_client.get_execution_history(executionArn=arn, maxResults=1000)
        names = [
            e.get("stateEnteredEventDetails", {}).get("name") for e in events.get("events", [])
        ]
        if state in names:
            return
        time.sleep(0.05)
    raise AssertionError(f"{arn} never entered {state}")


def record(runtime: LocalRuntime, plane: ControlPlane, arn: str) -> dict[str, Any]:
    """Wait for the execution to end and hand its status change to the recorder."""
    runtime.wait(arn, timeout=60)
    described = runtime.sfn_client.describe_execution(executionArn=arn)
    return record_status_change(status_change_event(described), control=plane)


def compensation_arn(plane: ControlPlane, run: RunItem) -> str:
    assert run.version is not None and run.execution_arn
    version = plane.dal.get_version(run.tenant, run.workflow_id, run.version)
    assert version is not None and version.compensation_version_arn
    name = run.execution_arn.rsplit(":", 1)[-1] + EXECUTION_SUFFIX
    return execution_arn(version.compensation_version_arn, name)


def settle_compensation(runtime: LocalRuntime, plane: ControlPlane, run: RunItem) -> RunItem:
    """Record the stopped run's end, then its compensation's end; the run item after."""
    assert run.execution_arn
    record(runtime, plane, run.execution_arn)
    record(runtime, plane, compensation_arn(plane, run))
    stored = plane.dal.get_run(run.tenant, run.run_id)
    assert stored is not None
    return stored


UNDONE = {"status": "compensated", "steps": ["charge", "reserve"], "errors": []}


def test_a_cancelled_saga_run_compensates_its_steps_newest_first(runtime, plane, tenant, receiver):
    # Given a saga run waiting at its third step after two compensated steps succeeded
    run = start(plane, tenant, saga(receiver.url, LONG_DELAY))
    entered(runtime, run.execution_arn or "", "hold")
    # When it is cancelled through the control plane
    plane.cancel_run(tenant, run.run_id)
    stored = settle_compensation(runtime, plane, run)
    # Then the two steps are undone newest first, each reading its own output, and the
    # waiting step (which never acted) is not
    assert paths(receiver) == ["/reserve/r1", "/charge/c1", "/undo/charge", "/undo/reserve/r1"]
    (refund,) = receiver.to("/undo/charge")
    assert json.loads(refund.body) == {"charge": "c1"}
    assert refund.headers["x-relayflow-step"] == "charge.compensate"
    # And the run stays aborted as a cancel, with the compensation and its verdict
    assert (stored.status, stored.error) == ("aborted", "Relayflow.Cancelled")
    assert stored.compensation == UNDONE
    assert stored.outcome == "compensated"
    detail = plane.get_run(tenant, run.run_id)
    assert detail.compensation is not None and detail.compensation.steps == ["charge", "reserve"]
    assert detail.outcome == "compensated"


class Events:
    """The Relayflow bus for the recorder: refuses the first ``fail`` puts, then takes them."""

    def __init__(self, fail: int = 0) -> None:
        self.fail = fail
        self.types: list[str] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        if self.fail:
            self.fail -= 1
            return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InternalFailure"}]}
        self.types += [e["DetailType"] for e in Entries]
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e"}]}


def cancelled_saga(
    runtime: LocalRuntime, plane: ControlPlane, tenant: str, receiver: Server
) -> tuple[RunItem, dict[str, Any]]:
    """A saga run cancelled while it holds, and the status-change event of its end."""
    run = start(plane, tenant, saga(receiver.url, LONG_DELAY))
    arn = run.execution_arn or ""
    entered(runtime, arn, "hold")
    plane.cancel_run(tenant, run.run_id)
    runtime.wait(arn, timeout=60)
    return run, status_change_event(runtime.sfn_client.describe_execution(executionArn=arn))


def test_a_repeated_recorder_delivery_starts_one_compensation(runtime, plane, tenant, receiver):
    # Given a cancelled saga run
    run, event = cancelled_saga(runtime, plane, tenant, receiver)
    # When the recorder's first delivery starts the compensation but fails to publish (so
    # EventBridge delivers it again), and the retry succeeds, and a duplicate arrives later
    with pytest.raises(LifecycleEventNotPublished):
        record_status_change(event, control=plane, events=Events(fail=1))
    events = Events()
    assert record_status_change(event, control=plane, events=events)["recorded"] is True
    assert record_status_change(event, control=plane, events=events)["recorded"] is False
    assert events.types == ["relayflow.run.aborted"]
    # Then one compensation execution ran, and each compensation acted once
    compensation = compensation_arn(plane, run)
    record(runtime, plane, compensation)
    machine = compensation.rsplit(":", 1)[0].replace(":execution:", ":stateMachine:")
    names = [
        e["name"] for e in runtime.sfn_client.list_executions(stateMachineArn=machine)["executions"]
    ]
    assert names.count(f"{run.run_id}{EXECUTION_SUFFIX}") == 1
    assert paths(receiver) == ["/reserve/r1", "/charge/c1", "/undo/charge", "/undo/reserve/r1"]
    # And the compensation's end, delivered twice, is recorded once
    assert record(runtime, plane, compensation)["recorded"] is False
    stored = plane.dal.get_run(tenant, run.run_id)
    assert stored is not None
    assert (stored.outcome, stored.compensation) == ("compensated", UNDONE)


def test_a_throttled_history_read_defers_a_stopped_saga_runs_record(
    runtime, plane, tenant, receiver, monkeypatch
):
    # Given a cancelled saga run, and Step Functions throttling its history read once
    run, event = cancelled_saga(runtime, plane, tenant, receiver)
    history = plane.machines.history
    throttled = [1]

    def flaky_history(execution: str) -> list[dict[str, Any]]:
        if throttled:
            throttled.pop()
            raise Throttled("Rate exceeded")
        return history(execution)

    monkeypatch.setattr(plane.machines, "history", flaky_history)
    # When the recorder's first delivery cannot read the history
    with pytest.raises(HistoryNotRead):
        record_status_change(event, control=plane)
    # Then nothing is recorded yet (the delivery is retried) and nothing was undone
    first = plane.dal.get_run(tenant, run.run_id)
    assert first is not None and first.recorded_status is None and first.compensation is None
    assert paths(receiver) == ["/reserve/r1", "/charge/c1"]
    # And the retried delivery records the stop and compensates, as without the throttle
    assert record_status_change(event, control=plane)["recorded"] is True
    record(runtime, plane, compensation_arn(plane, run))
    stored = plane.dal.get_run(tenant, run.run_id)
    assert stored is not None
    assert (stored.outcome, stored.compensation) == ("compensated", UNDONE)
    assert paths(receiver) == ["/reserve/r1", "/charge/c1", "/undo/charge", "/undo/reserve/r1"]


def test_a_throttled_history_read_does_not_hold_up_a_run_without_a_saga(
    runtime, plane, tenant, receiver, monkeypatch
):
    # Given a cancelled run whose workflow compensates nothing
    definition = {
        "id": "plain",
        "start": "hold",
        "steps": {"hold": {"type": "delay", "seconds": 600_000}},
        "engine": "standard",
    }
    run = start(plane, tenant, definition)
    arn = run.execution_arn or ""
    entered(runtime, arn, "hold")
    plane.cancel_run(tenant, run.run_id)
    runtime.wait(arn, timeout=60)
    event = status_change_event(runtime.sfn_client.describe_execution(executionArn=arn))

    def throttled(execution: str) -> list[dict[str, Any]]:
        raise Throttled("Rate exceeded")

    monkeypatch.setattr(plane.machines, "history", throttled)
    # When its history cannot be read / Then the stop is recorded anyway (without counts)
    assert record_status_change(event, control=plane)["recorded"] is True
    stored = plane.dal.get_run(tenant, run.run_id)
    assert stored is not None and stored.status == "aborted" and stored.transitions is None


def test_a_cancel_on_event_compensates_the_run_it_cancels(runtime, plane, tenant, receiver):
    # Given a saga workflow cancelled by order.cancelled for its order, waiting at step three
    definition = saga(
        receiver.url,
        LONG_DELAY,
        cancel_on=[{"event": "order.cancelled", "match": "event.detail.order == trigger.order"}],
    )
    run = start(plane, tenant, definition)
    entered(runtime, run.execution_arn or "", "hold")
    # When the matching event arrives
    event = {
        "id": "e-1",
        "source": "shop",
        "detail-type": "order.cancelled",
        "time": "2026-12-01T00:00:00Z",
        "detail": {"order": "o-1", TENANT_FIELD: tenant},
    }
    delivery = {"kind": "cancel", "tenant": tenant, "workflow_id": "cancel-saga", "index": 0}
    answer = handle_cancel({**delivery, "event": event}, control=plane)
    assert answer["run_ids"] == [run.run_id]
    stored = settle_compensation(runtime, plane, run)
    # Then the run is cancelled and compensated like a cancel through the API
    assert paths(receiver)[2:] == ["/undo/charge", "/undo/reserve/r1"]
    assert (stored.status, stored.outcome, stored.compensation) == (
        "aborted",
        "compensated",
        UNDONE,
    )


def test_a_saga_run_that_times_out_compensates(runtime, plane, tenant, receiver):
    # Given a saga run whose run timeout (real seconds) falls while it waits at step three
    run = start(plane, tenant, saga(receiver.url, LONG_DELAY, run_timeout_seconds=2))
    # When the timeout stops it
    stored = settle_compensation(runtime, plane, run)
    # Then both steps are undone, newest first, and the run stays timed out
    assert paths(receiver) == ["/reserve/r1", "/charge/c1", "/undo/charge", "/undo/reserve/r1"]
    assert (stored.status, stored.error, stored.outcome) == (
        "timed_out",
        "States.Timeout",
        "compensated",
    )
    assert stored.compensation == UNDONE


def test_a_failing_compensation_makes_the_cancel_partially_compensated(
    runtime, plane, tenant, receiver
):
    # Given a saga whose charge compensation fails
    definition = saga(receiver.url, LONG_DELAY)
    definition["steps"]["refund"]["url"] = f"{receiver.url}/fail/refund"
    definition["steps"]["refund"]["retry"] = "none"
    run = start(plane, tenant, definition)
    entered(runtime, run.execution_arn or "", "hold")
    plane.cancel_run(tenant, run.run_id)
    stored = settle_compensation(runtime, plane, run)
    # Then the walk went on to the first step, and the verdict names the failed compensation
    assert paths(receiver)[2:] == ["/fail/refund", "/undo/reserve/r1"]
    assert stored.outcome == "partially_compensated"
    assert stored.compensation is not None
    assert stored.compensation["steps"] == ["charge", "reserve"]
    assert [e["step"] for e in stored.compensation["errors"]] == ["charge"]


def test_a_run_cancelled_before_any_compensated_step_succeeded_stays_cancelled(
    runtime, plane, tenant, receiver
):
    # Given a saga run waiting before its first step
    definition = saga(receiver.url, LONG_DELAY)
    definition["steps"]["wait_first"] = {**LONG_DELAY, "on_success": "reserve"}
    definition["start"] = "wait_first"
    run = start(plane, tenant, definition)
    entered(runtime, run.execution_arn or "", "wait_first")
    # When it is cancelled
    plane.cancel_run(tenant, run.run_id)
    result = record(runtime, plane, run.execution_arn or "")
    # Then nothing is compensated, and no compensation execution was started
    assert result["status"] == "aborted"
    stored = plane.dal.get_run(tenant, run.run_id)
    assert stored is not None
    assert (stored.outcome, stored.compensation) == ("cancelled", None)
    assert paths(receiver) == []
    with pytest.raises(runtime.sfn_client.exceptions.ExecutionDoesNotExist):
        runtime.sfn_client.describe_execution(executionArn=compensation_arn(plane, run))


# --------------------------------------------------------------------------- park


def parked_saga(url: str, **on_error: Any) -> dict[str, Any]:
    """The saga whose third step fails and parks the run."""
    hold = {
        "type": "webhook_out",
        "url": f"{url}/fail/pack",
        "retry": "none",
        "on_error": {"action": "park", **on_error},
    }
    return saga(url, hold)


def wait_parked(plane: ControlPlane, tenant: str, run_id: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        run = plane.dal.get_run(tenant, run_id)
        if run is not None and run.status == "parked":
            return
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not park")


def assert_compensated(plane: ControlPlane, tenant: str, run_id: str, error: str) -> None:
    """The run is stored failed with ``error``, and its two steps were undone."""
    stored = plane.dal.get_run(tenant, run_id)
    assert stored is not None
    assert (stored.status, stored.error, stored.outcome) == ("failed", error, "compensated")
    assert stored.compensation == UNDONE


def test_a_parked_step_resumed_with_fail_runs_the_compensations(runtime, plane, tenant, receiver):
    # Given a saga run parked at its third step
    run = start(plane, tenant, parked_saga(receiver.url))
    wait_parked(plane, tenant, run.run_id)
    # When it is resumed with fail
    plane.resume_run(tenant, run.run_id, ResumeRequest(action="fail"))
    record(runtime, plane, run.execution_arn or "")
    # Then its own walk undoes the two steps, newest first, and the run fails compensated
    assert paths(receiver) == [
        "/reserve/r1",
        "/charge/c1",
        "/fail/pack",
        "/undo/charge",
        "/undo/reserve/r1",
    ]
    assert_compensated(plane, tenant, run.run_id, "Relayflow.HttpError")


def test_a_park_that_times_out_runs_the_compensations(runtime, plane, tenant, receiver):
    # Given a saga run parked at its third step with a park timeout of one (scaled) hour
    run = start(plane, tenant, parked_saga(receiver.url, park_timeout="1h"))
    # When nobody resumes it in time
    record(runtime, plane, run.execution_arn or "")
    # Then the run fails with ParkTimeout and the two steps are undone, newest first
    assert paths(receiver)[3:] == ["/undo/charge", "/undo/reserve/r1"]
    assert_compensated(plane, tenant, run.run_id, "Relayflow.ParkTimeout")


# --------------------------------------------------------------------------- relayflow run


def test_relayflow_run_compensates_a_run_that_times_out(runtime, receiver):
    # Given the saga with a run timeout (real seconds) that falls while it waits at step three
    workflow, problems = validate_data(saga(receiver.url, LONG_DELAY, run_timeout_seconds=2))
    assert workflow is not None, problems
    # When it runs with the local runner (relayflow run FILE)
    result = run_workflow(workflow, {"order": "o-1"}, runtime=runtime)
    # Then it times out, and the two steps are undone newest first by the compensation variant
    assert paths(receiver) == ["/reserve/r1", "/charge/c1", "/undo/charge", "/undo/reserve/r1"]
    assert (result.status, result.error) == ("timed_out", "States.Timeout")
    assert result.compensation == UNDONE
    assert result.outcome == "compensated"


def test_each_saga_version_has_its_variant_on_the_one_sibling_machine(
    runtime, plane, tenant, receiver
):
    # Given a saga workflow published three times: the walk unchanged, then changed
    first = saga(receiver.url, LONG_DELAY)
    second = saga(receiver.url, {**LONG_DELAY, "seconds": 500_000})
    third = saga(receiver.url, LONG_DELAY)
    third["steps"]["refund"]["url"] = f"{receiver.url}/undo/charge/v3"
    for definition in (first, second, third):
        plane.put_workflow(tenant, definition["id"], definition)
    arns = []
    for number in (1, 2, 3):
        version = plane.dal.get_version(tenant, "cancel-saga", number)
        assert version is not None and version.compensation_version_arn
        arns.append(version.compensation_version_arn)
    # Then an unchanged walk shares its variant's version, a changed one gets its own
    assert arns[0] == arns[1] != arns[2]
    # And all are versions of the workflow's one .saga machine
    name = f"relayflow-{get_settings().stage}-{tenant}_cancel-saga.saga"
    assert {arn.rsplit(":", 1)[0].rsplit(":", 1)[1] for arn in arns} == {name}
    # And a workflow without compensation has none
    plane.put_workflow(tenant, "plain", {"id": "plain", "start": "a", "steps": {"a": LONG_DELAY}})
    plain = plane.dal.get_version(tenant, "plain", 1)
    assert plain is not None and plain.compensation_version_arn is None
