"""The recorder: status-change events → run items and lifecycle events on the Relayflow bus.

The bus is routed to an SQS queue by a rule, so the tests read what a subscriber would get.
Events come from events/recorder/*.json (what ``sam local invoke`` feeds the function) and
from real executions of the local runtime.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from event_schemas import validate_event

from relayflow.adapters.aws import client
from relayflow.control.recorder import (
    LifecycleEventNotPublished,
    record_status_change,
    status_change_event,
)
from relayflow.control.service import ControlPlane
from relayflow.dal import create_table
from relayflow.local import LambdaContext, LocalRuntime
from relayflow.settings import get_settings, override_settings

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def load_event(name: str) -> dict[str, Any]:
    return json.loads((ROOT / "events" / "recorder" / f"{name}.json").read_text())


class Bus:
    """The Relayflow bus, with a rule that copies every relayflow event to a queue."""

    def __init__(self, runtime: LocalRuntime) -> None:
        bus = get_settings().event_bus_name
        events, sqs = runtime.events_client, runtime.client("sqs")
        events.create_event_bus(Name=bus)
        self.queue_url = sqs.create_queue(QueueName="lifecycle")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])
        events.put_rule(
            Name="lifecycle", EventBusName=bus, EventPattern=json.dumps({"source": ["relayflow"]})
        )
        events.put_targets(
            Rule="lifecycle",
            EventBusName=bus,
            Targets=[{"Id": "queue", "Arn": arn["Attributes"]["QueueArn"]}],
        )
        self.sqs = sqs
        self.seen: list[dict[str, Any]] = []

    def received(self, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        """(detail-type, detail) of every lifecycle event of ``run_id`` delivered so far."""
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            ).get("Messages", [])
            if not batch:
                break
            for message in batch:
                event = json.loads(message["Body"])
                validate_event(event)  # every event the recorder emits: docs/events/
                self.seen.append(event)
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
        return [
            (e["detail-type"], e["detail"]) for e in self.seen if e["detail"]["run_id"] == run_id
        ]


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with LocalRuntime(time_scale=0.001) as rt:
        create_table(client("dynamodb"))
        yield rt


@pytest.fixture(scope="module")
def bus(runtime) -> Bus:
    return Bus(runtime)


@pytest.fixture
def plane(runtime) -> ControlPlane:
    return ControlPlane()


def sample(name: str, run_id: str | None = None) -> dict[str, Any]:
    """A sample event, for a fresh run id (so tests sharing the table do not meet)."""
    event = load_event(name)
    if run_id is None:
        return event
    old = event["detail"]["name"]
    text = json.dumps(event).replace(old, run_id)
    return json.loads(text)


@pytest.fixture
def dev_stage():
    # The samples are events of the dev stage's state machines.
    with override_settings(stage="dev"):
        yield


GREET = {
    "id": "greet",
    "start": "done",
    "steps": {"done": {"type": "transform", "mapping": {"greeting": "hi"}}},
}
FAILING = {
    "id": "failing",
    "start": "flaky",
    "steps": {"flaky": {"type": "transform", "mapping": "{{ int('x') }}"}},
}


def finished(runtime: LocalRuntime, plane: ControlPlane, tenant: str, run_id: str) -> dict:
    """The status-change event AWS would send when the run's execution ended."""
    run = plane.dal.get_run(tenant, run_id)
    runtime.wait(run.execution_arn, timeout=30)
    return status_change_event(
        runtime.sfn_client.describe_execution(executionArn=run.execution_arn)
    )


# --------------------------------------------------------------------------- samples


def test_the_samples_record_a_run_from_start_to_success_once(runtime, bus, plane, dev_stage):
    run_id = uuid.uuid4().hex
    # When the RUNNING sample arrives for a run no starter recorded
    started = record_status_change(sample("running", run_id), control=plane)
    # Then the run item is created from the execution input, and run.started published
    assert started["recorded"] and started["published"] == "relayflow.run.started"
    run = plane.dal.get_run("acme", run_id)
    assert (run.status, run.workflow_id, run.version) == ("running", "order-triage", 3)
    assert run.trigger_type == "external"
    assert json.loads(run.input) == {"order": {"id": "ord-1", "total": 240.0, "country": "DE"}}
    # When the SUCCEEDED sample arrives, twice
    first = record_status_change(sample("succeeded", run_id), control=plane)
    again = record_status_change(sample("succeeded", run_id), control=plane)
    # Then the run is succeeded with its output and duration, recorded once
    assert first["recorded"] and not again["recorded"]
    run = plane.dal.get_run("acme", run_id)
    assert run.status == "succeeded" and run.duration_ms == 1840.0
    assert json.loads(run.output)["steps"]["check"]["output"] == {"large": True}
    assert run.ended_at == "2026-11-30T09:00:01.960Z"
    # And the bus delivered exactly one started and one succeeded event
    delivered = bus.received(run_id)
    assert [kind for kind, _ in delivered] == ["relayflow.run.started", "relayflow.run.succeeded"]
    assert delivered[1][1] == {
        "tenant": "acme",
        "relayflow_tenant": "acme",
        "workflow_id": "order-triage",
        "run_id": run_id,
        "version": 3,
        "status": "succeeded",
        "error": None,
        "failing_step": None,
        "outcome": "succeeded",
    }


@pytest.mark.parametrize(
    ("name", "status", "error"),
    [
        ("failed", "failed", "Relayflow.Transient"),
        ("timed_out", "timed_out", "States.Timeout"),
        ("aborted", "aborted", "Relayflow.Cancelled"),
    ],
)
def test_each_end_sample_is_recorded_and_published(
    runtime, bus, plane, dev_stage, name, status, error
):
    run_id = uuid.uuid4().hex
    result = record_status_change(sample(name, run_id), control=plane)
    assert result["published"] == f"relayflow.run.{status}"
    run = plane.dal.get_run("acme", run_id)
    assert (run.status, run.error) == (status, error)
    assert run.output is None and run.cause
    ((kind, detail),) = bus.received(run_id)
    assert kind == f"relayflow.run.{status}"
    assert (detail["status"], detail["error"]) == (status, error)


def test_a_start_that_arrives_after_the_end_does_not_reopen_the_run(runtime, bus, plane, dev_stage):
    run_id = uuid.uuid4().hex
    record_status_change(sample("succeeded", run_id), control=plane)
    record_status_change(sample("running", run_id), control=plane)
    record_status_change(sample("running", run_id), control=plane)
    assert plane.dal.get_run("acme", run_id).status == "succeeded"
    kinds = sorted(kind for kind, _ in bus.received(run_id))
    assert kinds == ["relayflow.run.started", "relayflow.run.succeeded"]


def test_events_that_are_not_relayflow_runs_are_ignored(runtime, bus, plane, dev_stage):
    # A state machine of another tenant than the run's input claims
    spoofed = sample("running", uuid.uuid4().hex)
    spoofed["detail"]["stateMachineArn"] = spoofed["detail"]["stateMachineArn"].replace(
        "acme_", "other_"
    )
    # An execution whose input is not a Relayflow document
    foreign = sample("running", uuid.uuid4().hex)
    foreign["detail"]["input"] = '{"hello": "world"}'
    # Another event type
    other = copy.deepcopy(foreign)
    other["detail-type"] = "EC2 Instance State-change Notification"
    for event in (spoofed, foreign, other, {"detail": {}}):
        result = record_status_change(event, control=plane)
        assert result["recorded"] is False and result["reason"]
    assert plane.dal.get_run("acme", spoofed["detail"]["name"]) is None


def test_child_executions_of_a_distributed_for_each_are_not_runs(runtime, bus, plane, dev_stage):
    # Given the end of a Map Run's child execution: its input holds the parent run's $.run
    child = sample("failed", uuid.uuid4().hex)
    machine = child["detail"]["stateMachineArn"].rsplit(":", 1)[-1]
    for field in ("stateMachineArn", "executionArn"):
        child["detail"][field] = child["detail"][field].replace(machine, f"{machine}/map-run-1")
    # When it is delivered, nothing is recorded for the run
    result = record_status_change(child, control=plane)
    assert result == {**result, "recorded": False}
    assert "distributed for_each" in result["reason"]
    assert plane.dal.get_run("acme", child["detail"]["name"]) is None


def test_the_function_handler_records_a_sample(runtime, bus, dev_stage):
    spec = importlib.util.spec_from_file_location(
        "recorder_app", ROOT / "functions/recorder/app.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run_id = uuid.uuid4().hex
    context = LambdaContext(
        function_name="relayflow-dev-recorder",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:relayflow-dev-recorder",
    )
    result = module.handler(sample("failed", run_id), context)
    assert result["published"] == "relayflow.run.failed"
    assert [kind for kind, _ in bus.received(run_id)] == ["relayflow.run.failed"]


# --------------------------------------------------------------------------- real executions


def test_a_real_run_is_recorded_with_its_output_and_published_once(runtime, bus, plane, tenant):
    plane.put_workflow(tenant, "greet", GREET)
    run = plane.start_run(tenant, "greet", {"n": 1})
    execution_arn = plane.dal.get_run(tenant, run.run_id).execution_arn
    running = status_change_event(runtime.sfn_client.describe_execution(executionArn=execution_arn))
    running["detail"].update(status="RUNNING", stopDate=None, output=None)
    ended = finished(runtime, plane, tenant, run.run_id)
    # When the start and the end are each delivered twice
    for event in (running, running, ended, ended):
        record_status_change(event, control=plane)
    # Then the run is recorded as the execution ended, and each event was published once
    detail = plane.get_run(tenant, run.run_id)
    assert detail.status == "succeeded"
    assert detail.output["steps"]["done"]["output"] == {"greeting": "hi"}
    assert [kind for kind, _ in bus.received(run.run_id)] == [
        "relayflow.run.started",
        "relayflow.run.succeeded",
    ]


def test_a_failed_run_names_its_failing_step(runtime, bus, plane, tenant):
    plane.put_workflow(tenant, "failing", FAILING)
    run = plane.start_run(tenant, "failing", {})
    record_status_change(finished(runtime, plane, tenant, run.run_id), control=plane)
    stored = plane.dal.get_run(tenant, run.run_id)
    assert (stored.status, stored.error, stored.failing_step) == (
        "failed",
        "Relayflow.ExpressionError",
        "flaky",
    )
    ((kind, detail),) = bus.received(run.run_id)
    assert kind == "relayflow.run.failed"
    assert (detail["failing_step"], detail["tenant"]) == ("flaky", tenant)


def test_a_cancelled_run_is_published_as_aborted_once(runtime, bus, plane, tenant):
    slow = {
        "id": "slow",
        "start": "pause",
        "steps": {"pause": {"type": "delay", "seconds": 30_000}},
    }
    plane.put_workflow(tenant, "slow", slow)
    run = plane.start_run(tenant, "slow", {})
    plane.cancel_run(tenant, run.run_id)
    # When the ABORTED status change arrives after the cancel marked the run aborted
    event = finished(runtime, plane, tenant, run.run_id)
    assert event["detail"]["status"] == "ABORTED"
    results = [record_status_change(event, control=plane) for _ in range(2)]
    # Then relayflow.run.aborted is published once, and the run stays aborted
    assert [r["recorded"] for r in results] == [True, False]
    assert plane.dal.get_run(tenant, run.run_id).status == "aborted"
    ((kind, detail),) = bus.received(run.run_id)
    assert (kind, detail["error"]) == ("relayflow.run.aborted", "Relayflow.Cancelled")


class BrokenBus:
    def put_events(self, **kwargs: Any) -> dict[str, Any]:
        return {
            "FailedEntryCount": 1,
            "Entries": [{"ErrorCode": "InternalFailure", "ErrorMessage": "try again"}],
        }


def test_a_publish_that_fails_is_retried_by_the_next_delivery(runtime, bus, plane, tenant):
    plane.put_workflow(tenant, "greet", GREET)
    run = plane.start_run(tenant, "greet", {})
    event = finished(runtime, plane, tenant, run.run_id)
    # When the bus refuses the lifecycle event
    with pytest.raises(LifecycleEventNotPublished):
        record_status_change(event, control=plane, events=BrokenBus())
    assert bus.received(run.run_id) == []
    # Then EventBridge's retry of the same event publishes it
    assert record_status_change(event, control=plane)["recorded"]
    assert [kind for kind, _ in bus.received(run.run_id)] == ["relayflow.run.succeeded"]


def test_a_run_end_is_one_log_line_the_dashboard_lists_failed_runs_from(
    runtime, bus, plane, tenant, monkeypatch
):
    # Given the recorder's logger, watched
    from relayflow.control import recorder

    lines: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(
        recorder.logger, "info", lambda message, extra=None, **_: lines.append((message, extra))
    )
    plane.put_workflow(tenant, "failing", FAILING)
    run = plane.start_run(tenant, "failing", {})
    # When its failed end is recorded
    record_status_change(finished(runtime, plane, tenant, run.run_id), control=plane)
    # Then one "run ended" line names the run, its workflow, tenant, failing step and error
    # (template.yaml: the dashboard's Latest failed runs table, the saved tenant query)
    ((fields,),) = [[extra] for message, extra in lines if message == "run ended"]
    stored = plane.dal.get_run(tenant, run.run_id)
    assert fields == {
        "run_id": run.run_id,
        "workflow_id": "failing",
        "tenant": tenant,
        "status": "failed",
        "failing_step": "flaky",
        "error": "Relayflow.ExpressionError",
        "execution_arn": stored.execution_arn,
    }
