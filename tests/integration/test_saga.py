"""Saga compensation end to end on the local runtime: a recording HTTP server on 127.0.0.1
sees the steps act and then be undone, newest first, through the compiled ASL."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from relayflow_testing import Received, Reply, Server, platform_runtime

from relayflow.control.dlq import DlqNotRetryable
from relayflow.control.recorder import record_status_change, status_change_event
from relayflow.control.service import ControlPlane
from relayflow.local import LocalRuntime
from relayflow.runner import RunResult, run_workflow
from relayflow.settings import override_settings
from relayflow.validation import load_workflow_text

pytestmark = pytest.mark.integration


class Receiver(Server):
    """Answers 200 with ``{"id": <path>}``, or the status set for a path in ``fail``."""

    def __init__(self) -> None:
        super().__init__()
        self.fail: dict[str, int] = {}
        self.reply = self.answer

    def answer(self, received: Received) -> Reply:
        status = self.fail.get(received.path, 200)
        body = {"id": received.path.rsplit("/", 1)[-1]} if status == 200 else {"error": "no"}
        return status, {"Content-Type": "application/json"}, json.dumps(body).encode()

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with override_settings(ssrf_allow=["127.0.0.1"]), platform_runtime() as rt:
        yield rt


def run(runtime: LocalRuntime, definition: str, receiver: Receiver, **trigger: Any) -> RunResult:
    workflow = load_workflow_text(definition, "saga.yaml")
    with override_settings(ssrf_allow=["127.0.0.1"]):
        return run_workflow(workflow, {"url": receiver.url, **trigger}, runtime=runtime)


def compensated(*steps: str) -> dict[str, Any]:
    """A run's compensation record when ``steps`` were all undone, in that order."""
    return {"status": "compensated", "steps": list(steps), "errors": []}


SAGA = """
id: order-saga
start: reserve
steps:
  reserve:
    type: webhook_out
    url: "{{ trigger.url }}/reserve/r1"
    compensate:
      type: webhook_out
      url: "{{ trigger.url }}/undo/reserve/{{ output.body.id }}"
    on_success: charge
  charge:
    type: webhook_out
    url: "{{ trigger.url }}/charge/c1"
    compensate: refund
    on_success: ship
  ship:
    type: tool
    tool: http.shop
    args: {method: POST, path: /ship/s1}
    breaker: null
    compensate:
      type: webhook_out
      url: "{{ trigger.url }}/undo/ship/{{ steps.ship.output.body.id }}"
    on_success: notify
  notify:
    type: webhook_out
    url: "{{ trigger.url }}/notify"
  refund:
    type: webhook_out
    url: "{{ trigger.url }}/undo/charge"
    body: {charge: "{{ output.body.id }}"}
http_tools:
  shop:
    base_url: "{url}"
"""


def saga(receiver: Receiver) -> str:
    return SAGA.replace("{url}", receiver.url)


def test_a_failure_at_step_four_compensates_three_two_one_in_that_order(runtime, receiver):
    # Given a three-step saga whose fourth step fails
    receiver.fail["/notify"] = 400
    # When it runs
    result = run(runtime, saga(receiver), receiver)
    # Then the steps acted, the fourth failed, and the three were undone newest first
    assert receiver.paths() == [
        "/reserve/r1",
        "/charge/c1",
        "/ship/s1",
        "/notify",
        "/undo/ship/s1",
        "/undo/charge",
        "/undo/reserve/r1",
    ]
    # And each compensation read its step's output
    (refund,) = receiver.to("/undo/charge")
    assert json.loads(refund.body) == {"charge": "c1"}
    assert refund.headers["x-relayflow-step"] == "charge.compensate"
    # And the run failed with the original error, compensated
    assert result.status == "failed"
    assert result.error == "Relayflow.HttpError"
    assert result.cause is not None and "400" in result.cause
    assert result.compensation == compensated("ship", "charge", "reserve")


def test_a_failing_compensation_is_recorded_and_the_others_still_run(runtime, receiver):
    # Given the saga, failing at step four, where undoing the charge fails too
    receiver.fail["/notify"] = 400
    receiver.fail["/undo/charge"] = 422
    # When it runs
    result = run(runtime, saga(receiver), receiver)
    # Then every compensation ran once, in order, the failed one not retried nor compensated
    assert receiver.paths()[4:] == ["/undo/ship/s1", "/undo/charge", "/undo/reserve/r1"]
    # And the run is partially compensated, naming the compensation that failed
    assert result.error == "Relayflow.HttpError"
    compensation = result.compensation
    assert compensation is not None
    assert compensation["status"] == "partially_compensated"
    assert compensation["steps"] == ["ship", "charge", "reserve"]
    (error,) = compensation["errors"]
    assert error["step"] == "charge"
    assert error["error"] == "Relayflow.HttpError"
    assert "422" in error["cause"]


def test_only_the_steps_that_succeeded_are_compensated(runtime, receiver):
    # Given the saga failing at its second step
    receiver.fail["/charge/c1"] = 400
    result = run(runtime, saga(receiver), receiver)
    # Then only the first step is undone
    assert receiver.paths() == ["/reserve/r1", "/charge/c1", "/undo/reserve/r1"]
    assert result.compensation == compensated("reserve")


def test_a_run_that_fails_before_any_compensated_step_keeps_its_plain_failure(runtime, receiver):
    receiver.fail["/reserve/r1"] = 400
    result = run(runtime, saga(receiver), receiver)
    assert receiver.paths() == ["/reserve/r1"]
    assert (result.status, result.error, result.compensation) == (
        "failed",
        "Relayflow.HttpError",
        None,
    )
    assert result.cause is not None and "400" in result.cause


def test_a_successful_saga_compensates_nothing(runtime, receiver):
    result = run(runtime, saga(receiver), receiver)
    assert result.succeeded, (result.error, result.cause)
    assert not any(p.startswith("/undo") for p in receiver.paths())
    assert result.compensation is None


FOR_EACH = """
id: booking-saga
start: book
steps:
  book:
    type: for_each
    items: "{{ trigger.seats }}"
    step: hold
    max_concurrency: 1
    on_success: pay
  hold:
    type: webhook_out
    url: "{{ trigger.url }}/hold/{{ item }}"
    compensate:
      type: webhook_out
      url: "{{ trigger.url }}/release/{{ output.body.id }}"
      body: {index: "{{ index }}"}
  pay:
    type: webhook_out
    url: "{{ trigger.url }}/pay"
"""


def test_a_for_each_saga_compensates_per_item(runtime, receiver):
    # Given a for_each holding three seats, then a payment that fails
    receiver.fail["/pay"] = 402
    result = run(runtime, FOR_EACH, receiver, seats=["a1", "a2", "a3"])
    # Then each held seat is released, with its own output and index
    releases = sorted(p for p in receiver.paths() if p.startswith("/release"))
    assert releases == ["/release/a1", "/release/a2", "/release/a3"]
    assert sorted(
        json.loads(r.body)["index"] for r in receiver.requests if r.body and b"index" in r.body
    ) == [0, 1, 2]
    # And after the failed payment
    assert receiver.paths().index("/pay") < receiver.paths().index("/release/a1")
    assert result.error == "Relayflow.HttpError"
    assert result.compensation == compensated("book[0]", "book[1]", "book[2]")


def test_the_recorder_stores_the_compensation_on_the_run_item(runtime, receiver):
    # Given the saga deployed for a tenant, failing at step four with one failing compensation
    import yaml

    # (a 503: transient, which the DLQ would otherwise retry automatically)
    receiver.fail["/notify"] = 503
    receiver.fail["/undo/reserve/r1"] = 500
    plane, tenant = ControlPlane(), f"t-{uuid.uuid4().hex[:10]}"
    plane.put_workflow(tenant, "order-saga", yaml.safe_load(saga(receiver)))
    # When a run ends and the recorder gets its status change
    with override_settings(ssrf_allow=["127.0.0.1"]):
        started = plane.start_run(tenant, "order-saga", {"url": receiver.url})
        run = plane.dal.get_run(tenant, started.run_id)
        runtime.wait(run.execution_arn, timeout=60)
        execution = runtime.sfn_client.describe_execution(executionArn=run.execution_arn)
        record_status_change(status_change_event(execution), control=plane)
    # Then the run item keeps the original error and cause, the step that failed, and what
    # was compensated
    stored = plane.dal.get_run(tenant, started.run_id)
    assert (stored.status, stored.error, stored.failing_step) == (
        "failed",
        "Relayflow.Transient",
        "notify",
    )
    assert stored.cause is not None and "503" in stored.cause and "compensation" not in stored.cause
    assert stored.compensation is not None
    assert stored.compensation["status"] == "partially_compensated"
    assert stored.compensation["steps"] == ["ship", "charge", "reserve"]
    assert [e["step"] for e in stored.compensation["errors"]] == ["reserve"]
    # And GET /runs/{id} shows it
    detail = plane.get_run(tenant, started.run_id)
    assert detail.compensation is not None
    assert detail.compensation.status == "partially_compensated"
    assert detail.compensation.errors[0].error == "Relayflow.HttpError"
    # And its DLQ entry is not retried, automatically or by hand: a retry would replay the
    # steps the compensations undid
    entry = plane.dlq.get_entry(tenant, started.run_id)
    assert entry.transient is False and entry.next_retry_at is None
    with pytest.raises(DlqNotRetryable, match="compensated"):
        plane.dlq.retry(tenant, started.run_id)
