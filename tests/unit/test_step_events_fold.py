"""The fold from Step Functions log records to per-step lifecycle events (pure: no table, no
bus). Records are shaped as Step Functions logs them with execution data off."""

from __future__ import annotations

import json
from typing import Any

import pytest

from relayflow.control.step_events import (
    Execution,
    LogRecord,
    Traces,
    decode_subscription,
    encode_subscription,
    fold,
)

ARN = "arn:aws:states:eu-west-1:123456789012:execution:relayflow-prod-acme_orders:run-1_r2"
T0 = 1_796_029_200_000


class Log:
    """Builds one execution's records, chaining previous_event_id like Step Functions."""

    def __init__(self) -> None:
        self.records: list[LogRecord] = []

    def add(self, type_: str, prev: int | None = None, at: int = 0, **details: Any) -> int:
        event_id = len(self.records) + 1
        previous = event_id - 1 if prev is None else prev
        self.records.append(LogRecord(event_id, type_, previous, T0 + at, ARN, details))
        return event_id


def kinds(events: list[Any]) -> list[tuple[str, str, int]]:
    return [(e.kind, e.step, e.attempt) for e in events]


def test_the_execution_arn_names_tenant_workflow_and_run():
    execution = Execution.of(ARN, "prod")
    assert execution is not None
    assert (execution.tenant, execution.workflow_id, execution.run_id, execution.name) == (
        "acme",
        "orders",
        "run-1",
        "run-1_r2",
    )
    # A machine of another stage, or one the control plane did not name, is not a run
    assert Execution.of(ARN, "dev") is None
    assert Execution.of(ARN.replace("relayflow-prod-acme_orders", "billing"), "prod") is None


def test_concurrent_for_each_items_of_one_step_keep_their_own_attempts():
    # Given two items of a for_each running the same Task at once; item 0 is retried
    log = Log()
    log.add("MapStateEntered", name="each")
    m = log.add("MapStateStarted")
    a = log.add("TaskStateEntered", prev=m, name="price")
    b = log.add("TaskStateEntered", prev=m, name="price")
    a_s = log.add("TaskScheduled", prev=a, resource="invoke")
    b_s = log.add("TaskScheduled", prev=b, resource="invoke")
    a_f = log.add("TaskFailed", prev=a_s, at=5, error="Relayflow.Transient")
    b_ok = log.add("TaskSucceeded", prev=b_s, at=6)
    log.add("TaskStateExited", prev=b_ok, at=7, name="price")
    a_s2 = log.add("TaskScheduled", prev=a_f, at=10, resource="invoke")
    a_ok = log.add("TaskSucceeded", prev=a_s2, at=12)
    log.add("TaskStateExited", prev=a_ok, at=13, name="price")
    log.add("MapStateSucceeded", at=14)
    log.add("MapStateExited", at=15, name="each")
    traces = Traces({})
    # When folded
    events = fold(log.records, traces)
    # Then item 1 succeeded on its first attempt and item 0 on its second
    assert kinds(events) == [
        ("started", "each", 1),
        ("started", "price", 1),
        ("started", "price", 1),
        ("succeeded", "price", 1),
        ("retrying", "price", 2),
        ("succeeded", "price", 2),
        ("succeeded", "each", 1),
    ]
    assert events[4].error == "Relayflow.Transient"
    assert events[3].duration_ms == 7 and events[5].duration_ms == 13
    # And nothing is left open
    assert traces.open == {}


def test_a_caught_failure_fails_the_step_and_a_callback_waits():
    log = Log()
    e = log.add("TaskStateEntered", name="ask")
    log.add("TaskScheduled", prev=e, resource="invoke.waitForTaskToken")
    log.add("TaskStarted")
    log.add("TaskTimedOut", at=900, error="States.Timeout")
    log.add("TaskStateExited", at=901, name="ask")
    log.add("PassStateEntered", at=902, name="late")
    log.add("PassStateExited", at=902, name="late")
    events = fold(log.records, Traces({}))
    assert kinds(events) == [
        ("started", "ask", 1),
        ("waiting", "ask", 1),
        ("failed", "ask", 1),
        ("started", "late", 1),
        ("succeeded", "late", 1),
    ]
    assert events[2].error == "States.Timeout" and events[2].duration_ms == 901


def test_an_execution_that_fails_in_a_step_fails_that_step():
    log = Log()
    log.add("WaitStateEntered", name="pause")
    log.add("WaitStateExited", at=50, name="pause")
    e = log.add("TaskStateEntered", at=51, name="charge")
    log.add("TaskScheduled", prev=e, resource="invoke")
    log.add("TaskFailed", at=60, error="Relayflow.Permanent")
    log.add("ExecutionFailed", at=61, error="Relayflow.Permanent")
    traces = Traces({})
    events = fold(log.records, traces)
    assert kinds(events) == [
        ("started", "pause", 1),
        ("waiting", "pause", 1),
        ("succeeded", "pause", 1),
        ("started", "charge", 1),
        ("failed", "charge", 1),
    ]
    assert events[-1].error == "Relayflow.Permanent" and events[-1].duration_ms == 10
    assert traces.open == {} and not traces.closed  # never stored: nothing to delete


def test_a_parked_step_and_auxiliary_states_emit_only_for_the_step():
    log = Log()
    e = log.add("TaskStateEntered", name="charge")
    log.add("TaskScheduled", prev=e, resource="invoke")
    log.add("TaskFailed", error="Relayflow.Permanent")
    log.add("TaskStateExited", name="charge")
    log.add("TaskStateEntered", name="charge.park")
    events = fold(log.records, Traces({}))
    assert kinds(events) == [
        ("started", "charge", 1),
        ("failed", "charge", 1),
        ("parked", "charge", 1),
    ]


def test_a_linear_retry_loop_counts_on_across_its_wait():
    # Given a step with linear backoff: a Catch into <key>.retry… and back into the step
    log = Log()
    e = log.add("TaskStateEntered", name="sync")
    log.add("TaskScheduled", prev=e, resource="invoke")
    log.add("TaskFailed", error="Relayflow.Transient")
    log.add("TaskStateExited", name="sync")
    log.add("ChoiceStateEntered", name="sync.retry")
    log.add("ChoiceStateExited", name="sync.retry")
    log.add("WaitStateEntered", name="sync.retry_wait")
    log.add("WaitStateExited", name="sync.retry_wait")
    e2 = log.add("TaskStateEntered", name="sync")
    log.add("TaskScheduled", prev=e2, resource="invoke")
    log.add("TaskSucceeded")
    log.add("TaskStateExited", name="sync")
    events = fold(log.records, Traces({}))
    # Then the second entry is attempt 2, announced as retrying (not a new start)
    assert kinds(events) == [
        ("started", "sync", 1),
        ("failed", "sync", 1),
        ("retrying", "sync", 2),
        ("succeeded", "sync", 2),
    ]


def test_a_cycle_that_enters_a_step_again_starts_it_again():
    log = Log()
    for _ in range(2):
        log.add("PassStateEntered", name="tick")
        log.add("PassStateExited", name="tick")
    assert kinds(fold(log.records, Traces({}))) == [
        ("started", "tick", 1),
        ("succeeded", "tick", 1),
        ("started", "tick", 1),
        ("succeeded", "tick", 1),
    ]


def test_a_step_split_across_batches_resumes_from_its_trace():
    # Given the entry and first attempt in one batch, the rest in the next
    log = Log()
    e = log.add("TaskStateEntered", name="price")
    log.add("TaskScheduled", prev=e, resource="invoke")
    log.add("TaskStarted")
    first, rest = log.records[:3], []
    log.add("TaskFailed", at=3, error="Relayflow.Transient")
    log.add("TaskScheduled", at=4, resource="invoke")
    log.add("TaskSucceeded", at=9)
    log.add("TaskStateExited", at=10, name="price")
    rest = log.records[3:]
    traces = Traces({})
    assert kinds(fold(first, traces)) == [("started", "price", 1)]
    # When the next batch folds over what the first one stored (as the table returns it)
    stored = Traces({sk: json.loads(json.dumps(t)) for sk, t in traces.open.items()})
    events = fold(rest, stored)
    # Then the step goes on where it stood
    assert kinds(events) == [("retrying", "price", 2), ("succeeded", "price", 2)]
    assert events[-1].duration_ms == 10


def test_the_subscription_payload_round_trips_and_bad_messages_are_refused():
    record = {
        "id": "1",
        "type": "PassStateEntered",
        "details": {"name": "a"},
        "previous_event_id": "0",
        "event_timestamp": str(T0),
        "execution_arn": ARN,
    }
    event = encode_subscription([record], log_group="/g", log_stream="s")
    payload = decode_subscription(event)
    assert [json.loads(e["message"]) for e in payload["logEvents"]] == [record]
    assert LogRecord.parse("not json") is None
    assert LogRecord.parse(json.dumps({"id": "x"})) is None
    with pytest.raises(ValueError, match=r"no awslogs\.data"):
        decode_subscription({"Records": []})


def test_a_redelivered_batch_moves_no_open_step_on():
    # Given a batch that left a step open on its second attempt, and its traces as stored
    log = Log()
    e = log.add("TaskStateEntered", name="price")
    log.add("TaskScheduled", prev=e, resource="invoke")
    log.add("TaskFailed", error="Relayflow.Transient")
    log.add("TaskScheduled", resource="invoke")
    traces = Traces({})
    assert kinds(fold(log.records, traces)) == [("started", "price", 1), ("retrying", "price", 2)]
    stored = Traces({sk: json.loads(json.dumps(t)) for sk, t in traces.open.items()})
    # When CloudWatch Logs delivers the same batch again
    again = fold(log.records, stored)
    # Then nothing is published again and the attempt count stays
    assert again == []
    (trace,) = stored.open.values()
    assert trace["attempt"] == 2
    # And the step's exit, in the next batch, ends attempt 2
    log.add("TaskSucceeded")
    log.add("TaskStateExited", name="price")
    assert kinds(fold(log.records[4:], stored)) == [("succeeded", "price", 2)]


def test_a_for_each_that_failed_into_its_route_fails_with_its_items_error():
    # Given a for_each whose item 1 failed; the Map's failure is chained after the item's
    # events (not the Map's own), and its Catch routes on to 'report'
    log = Log()
    log.add("MapStateEntered", name="each")
    started = log.add("MapStateStarted")
    first = log.add("MapIterationStarted", prev=started, name="each", index=0)
    second = log.add("MapIterationStarted", prev=started, name="each", index=1)
    a = log.add("TaskStateEntered", prev=first, name="price")
    b = log.add("TaskStateEntered", prev=second, name="price")
    log.add("TaskScheduled", prev=a, resource="invoke")
    b = log.add("TaskScheduled", prev=b, resource="invoke")
    b = log.add("TaskFailed", prev=b, at=5, error="Relayflow.CodeError")
    b = log.add("MapIterationFailed", prev=b, at=6, name="each", index=1)
    failed = log.add("MapStateFailed", prev=b, at=7)
    log.add("MapStateExited", prev=failed, at=8, name="each")
    log.add("PassStateEntered", at=9, name="report")
    log.add("PassStateExited", at=9, name="report")
    # When folded
    events = fold(log.records, Traces({}))
    # Then the for_each failed (it did not succeed) with the error its item failed with
    each = [e for e in events if e.step == "each"]
    assert [(e.kind, e.error) for e in each] == [
        ("started", None),
        ("failed", "Relayflow.CodeError"),
    ]


def test_flow_control_refusals_are_no_retries_and_are_counted_apart():
    # Given a step refused twice for want of a slot, whose call then failed once and succeeded
    log = Log()
    entry = log.add("TaskStateEntered", name="charge")
    prev = entry
    for at, error in (
        (1, "Relayflow.Throttled"),
        (3, "Relayflow.Throttled"),
        (5, "Relayflow.Transient"),
    ):
        prev = log.add("TaskScheduled", prev=prev, at=at, resource="invoke")
        prev = log.add("TaskFailed", prev=prev, at=at + 1, error=error)
    prev = log.add("TaskScheduled", prev=prev, at=8, resource="invoke")
    prev = log.add("TaskSucceeded", prev=prev, at=9)
    log.add("TaskStateExited", prev=prev, at=10, name="charge")
    # When folded
    events = fold(log.records, Traces({}))
    # Then only the real retry is one, and the step succeeded after two calls and two refusals
    assert [(e.kind, e.attempt, e.refusals, e.error) for e in events] == [
        ("started", 1, 0, None),
        ("retrying", 2, 2, "Relayflow.Transient"),
        ("succeeded", 2, 2, None),
    ]
