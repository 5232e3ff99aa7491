"""An Express run's timeline from its CloudWatch Logs records (relayflow.control.express_logs):
the fold, and the reader over a stub FilterLogEvents. Records are the JSON messages Step
Functions writes with execution data off: string ids, ``event_timestamp`` in epoch
milliseconds as a string, no inputs, outputs or causes."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from relayflow.control.express_logs import ExecutionLogs, log_steps, parse_record
from relayflow.control.step_events import LogRecord
from relayflow.control.timeline import failing_step, history_steps

ARN = "arn:aws:states:eu-west-1:123456789012:execution:relayflow-prod-acme_orders:run-1"
T0 = 1_796_029_200_000
TYPES = {
    "shape": "transform",
    "charge": "webhook_out",
    "boom": "code",
    "each": "for_each",
    "price": "code",
    "fan": "parallel",
    "left": "transform",
    "right": "code",
    "done": "noop",
}
RUNNERS = {"charge": "webhook_out", "boom": "code", "price": "code", "right": "code"}


class Log:
    """One execution's log messages, chaining previous_event_id as Step Functions does."""

    def __init__(self, arn: str = ARN) -> None:
        self.arn = arn
        self.messages: list[str] = []

    def add(self, type_: str, at: int, prev: int | None = None, **details: Any) -> int:
        event_id = len(self.messages) + 1
        record = {
            "id": str(event_id),
            "type": type_,
            "details": details,
            "previous_event_id": str(event_id - 1 if prev is None else prev),
            "event_timestamp": str(T0 + at),
            "execution_arn": self.arn,
            "redrive_count": "0",
        }
        self.messages.append(json.dumps(record))
        return event_id

    def task(self, name: str, start: int, failures: list[str], *, exits: bool = True) -> int:
        """A Task state: ``failures`` failed attempts, then (with ``exits``) its exit."""
        self.add("TaskStateEntered", start, name=name)
        at = start
        for error in failures:
            self.add("TaskScheduled", at + 1, resource="invoke", resourceType="lambda")
            self.add("TaskFailed", at + 5, resource="invoke", resourceType="lambda", error=error)
            at += 10
        if not exits:
            return at
        if len(failures) < 3:  # a last attempt that succeeded
            self.add("TaskScheduled", at + 1, resource="invoke", resourceType="lambda")
            self.add("TaskSucceeded", at + 5, resource="invoke", resourceType="lambda")
        return self.add("TaskStateExited", at + 6, name=name)

    def records(self) -> list[LogRecord]:
        parsed = [parse_record(message) for message in self.messages]
        assert all(parsed)
        return [record for record in parsed if record is not None]


def entries(steps: list[Any]) -> list[tuple[str, str, int, str | None]]:
    return [(s.key, s.status, s.attempts, s.error) for s in steps]


def test_a_retried_task_is_one_entry_with_its_attempts_and_times():
    # Given a native step, then a Task that failed once and succeeded on its retry
    log = Log()
    log.add("ExecutionStarted", 0, prev=0)
    log.add("PassStateEntered", 10, name="shape")
    log.add("PassStateExited", 12, name="shape")
    log.task("charge", 20, ["Relayflow.Transient"])
    log.add("ExecutionSucceeded", 50)
    # When folded
    steps = log_steps(TYPES, RUNNERS, log.records())
    # Then one entry per step, in run order, with attempts, times, and (as on Standard) the
    # error of the attempt that was retried
    assert entries(steps) == [
        ("shape", "succeeded", 1, None),
        ("charge", "succeeded", 2, "Relayflow.Transient"),
    ]
    shape, charge = steps
    assert (shape.runner, charge.runner) == ("native", "webhook_out")
    assert shape.started_at == "2026-11-30T09:00:00.010000+00:00"
    assert (shape.duration_ms, charge.duration_ms) == (2.0, 16.0)
    assert charge.output is None and charge.cause is None  # execution data: not logged


def test_a_caught_failure_is_caught_or_fallback_and_the_run_goes_on():
    # Given a step whose last attempt failed into its on_error fallback, and one whose Catch
    # took another route
    log = Log()
    exited = log.task("charge", 0, ["Relayflow.Transient"] * 3)
    log.add("PassStateEntered", 20, prev=exited, name="charge.fallback")
    log.add("PassStateExited", 21, name="charge.fallback")
    log.add("PassStateEntered", 22, name="charge.fallback.flag")
    log.add("PassStateExited", 23, name="charge.fallback.flag")
    log.task("boom", 30, ["Relayflow.CodeError"] * 3)
    log.add("PassStateEntered", 70, name="done")
    log.add("PassStateExited", 71, name="done")
    log.add("ExecutionSucceeded", 72)
    # When folded
    steps = log_steps(TYPES, RUNNERS, log.records())
    # Then the fallback shows as such, the other as caught, each with its error; the
    # fallback's own states are no steps
    assert entries(steps) == [
        ("charge", "fallback", 3, "Relayflow.Transient"),
        ("boom", "caught", 3, "Relayflow.CodeError"),
        ("done", "succeeded", 1, None),
    ]
    assert failing_step(steps) == "boom"  # what a failed run would name


def test_a_failed_run_ends_in_its_step_not_in_the_recording_wrapper():
    # Given an Express run's native recording: the workflow inside _run, a step that fails
    # every attempt, the Catch to _record.failed, then _failed
    log = Log()
    log.add("ExecutionStarted", 0, prev=0)
    log.add("ParallelStateEntered", 1, prev=0, name="_run")
    log.add("ParallelStateStarted", 2)
    log.add("PassStateEntered", 3, name="shape")
    log.add("PassStateExited", 4, name="shape")
    log.task("boom", 10, ["Relayflow.CodeError", "Relayflow.CodeError"], exits=False)
    log.add("ParallelStateFailed", 31)
    log.add("ParallelStateExited", 32, name="_run")
    log.add("TaskStateEntered", 33, name="_record.failed")
    log.add("TaskScheduled", 34, resource="updateItem", resourceType="dynamodb")
    log.add("TaskSucceeded", 38, resource="updateItem", resourceType="dynamodb")
    log.add("TaskStateExited", 39, name="_record.failed")
    log.add("FailStateEntered", 40, name="_failed")
    log.add("ExecutionFailed", 40, error="Relayflow.CodeError")
    # When folded
    steps = log_steps(TYPES, RUNNERS, log.records())
    # Then the step failed with its own error (not the Parallel's), after two attempts, and
    # ended with the run; the wrapper's states are no steps
    assert entries(steps) == [
        ("shape", "succeeded", 1, None),
        ("boom", "failed", 2, "Relayflow.CodeError"),
    ]
    assert steps[1].ended_at == "2026-11-30T09:00:00.040000+00:00"
    assert failing_step(steps) == "boom"


def test_a_timed_out_run_times_out_the_step_it_was_in():
    log = Log()
    log.add("TaskStateEntered", 0, name="boom")
    log.add("TaskScheduled", 1, resource="invoke", resourceType="lambda")
    log.add("ExecutionTimedOut", 300_000)
    (boom,) = log_steps(TYPES, RUNNERS, log.records())
    assert (boom.status, boom.duration_ms) == ("timed_out", 300_000.0)
    assert failing_step([boom]) == "boom"


def test_for_each_items_and_parallel_branches_get_their_own_entries():
    # Given a for_each of two items run side by side (item 1 retried), then a parallel
    log = Log()
    log.add("MapStateEntered", 0, name="each")
    started = log.add("MapStateStarted", 1, length=2)
    first = log.add("MapIterationStarted", 2, prev=started, name="each", index=0)
    second = log.add("MapIterationStarted", 2, prev=started, name="each", index=1)
    a = log.add("TaskStateEntered", 3, prev=first, name="price")
    b = log.add("TaskStateEntered", 4, prev=second, name="price")
    b = log.add("TaskScheduled", 5, prev=b, resource="invoke", resourceType="lambda")
    a = log.add("TaskScheduled", 5, prev=a, resource="invoke", resourceType="lambda")
    b = log.add("TaskFailed", 9, prev=b, error="Relayflow.Transient")
    a = log.add("TaskSucceeded", 10, prev=a)
    a = log.add("TaskStateExited", 11, prev=a, name="price")
    log.add("MapIterationSucceeded", 11, prev=a, name="each", index=0)
    b = log.add("TaskScheduled", 20, prev=b, resource="invoke", resourceType="lambda")
    b = log.add("TaskSucceeded", 30, prev=b)
    b = log.add("TaskStateExited", 31, prev=b, name="price")
    log.add("MapIterationSucceeded", 31, prev=b, name="each", index=1)
    log.add("MapStateSucceeded", 32)
    log.add("MapStateExited", 33, name="each")
    log.add("ParallelStateEntered", 40, name="fan")
    branches = log.add("ParallelStateStarted", 41)
    log.add("PassStateEntered", 42, prev=branches, name="left")
    log.add("PassStateExited", 43, name="left")
    log.task("right", 44, [])
    log.add("ParallelStateSucceeded", 60)
    log.add("ParallelStateExited", 61, name="fan")
    log.add("ExecutionSucceeded", 62)
    # When folded
    steps = log_steps(TYPES, RUNNERS, log.records())
    # Then each item is its own entry with its own attempts and times, and each branch step
    assert entries(steps) == [
        ("each", "succeeded", 1, None),
        ("price[0]", "succeeded", 1, None),
        ("price[1]", "succeeded", 2, "Relayflow.Transient"),
        ("fan", "succeeded", 1, None),
        ("left", "succeeded", 1, None),
        ("right", "succeeded", 1, None),
    ]
    by_key = {s.key: s for s in steps}
    assert (by_key["price[0]"].duration_ms, by_key["price[1]"].duration_ms) == (8.0, 27.0)
    assert by_key["each"].duration_ms == 33.0


def test_a_step_still_running_has_no_end():
    log = Log()
    log.add("WaitStateEntered", 0, name="shape")
    (shape,) = log_steps(TYPES, RUNNERS, log.records())
    assert (shape.status, shape.ended_at, shape.duration_ms) == ("running", None, None)
    assert failing_step([shape]) == "shape"


def test_a_record_with_an_iso_time_parses_and_other_messages_do_not():
    # moto's writer, and some tools, give the time as ISO-8601 text
    record = parse_record(
        json.dumps(
            {
                "id": "3",
                "type": "PassStateEntered",
                "details": {"name": "shape"},
                "previous_event_id": "2",
                "event_timestamp": "2026-11-30T09:00:00.010+00:00",
                "execution_arn": ARN,
            }
        )
    )
    assert record is not None and record.at_ms == T0 + 10 and record.name == "shape"
    assert parse_record("START RequestId: 1") is None
    assert parse_record(json.dumps({"id": "x"})) is None


class Pages:
    """A stub ``logs`` client: FilterLogEvents answers with the given pages in turn."""

    def __init__(self, pages: list[list[str]], error: str | None = None) -> None:
        self.pages = pages
        self.error = error
        self.calls: list[dict[str, Any]] = []

    def filter_log_events(self, **params: Any) -> dict[str, Any]:
        self.calls.append(params)
        if self.error:
            raise ClientError({"Error": {"Code": self.error, "Message": "no"}}, "FilterLogEvents")
        index = int(params.get("nextToken") or 0)
        events = [{"message": message} for message in self.pages[index]]
        more = index + 1 < len(self.pages)
        return {"events": events, **({"nextToken": str(index + 1)} if more else {})}


GROUP = "arn:aws:logs:eu-west-1:123456789012:log-group:/aws/vendedlogs/states/relayflow-prod:*"


def test_the_reader_filters_one_execution_in_a_window_and_follows_pages():
    # Given the run's records over two pages, with a DLQ retry's records the quoted term also
    # matches (its ARN extends the run's)
    log, retry = Log(), Log(ARN + "_r2")
    log.add("ExecutionStarted", 0, prev=0)
    retry.add("ExecutionStarted", 0, prev=0)
    log.add("ExecutionSucceeded", 5)
    client = Pages([[log.messages[0], retry.messages[0]], [log.messages[1], "not a record"]])
    # When read
    read = ExecutionLogs(client).read(GROUP, ARN, T0 - 60_000, T0 + 60_000)
    # Then only this execution's records, oldest first, all pages, and it says it ended
    assert [(r.id, r.type) for r in read.records] == [
        (1, "ExecutionStarted"),
        (2, "ExecutionSucceeded"),
    ]
    assert (read.complete, read.problem, read.ended) == (True, None, True)
    first = client.calls[0]
    assert first["logGroupName"] == "/aws/vendedlogs/states/relayflow-prod"
    assert first["filterPattern"] == f'"{ARN}"'
    assert (first["startTime"], first["endTime"]) == (T0 - 60_000, T0 + 60_000)
    assert client.calls[1]["nextToken"] == "1"


def test_the_reader_stops_after_its_page_limit_and_says_so():
    log = Log()
    for at in range(5):
        log.add("PassStateEntered", at, name="shape")
    client = Pages([[message] for message in log.messages])
    read = ExecutionLogs(client, max_pages=3).read(GROUP, ARN, T0, T0 + 1)
    assert len(client.calls) == 3 and len(read.records) == 3
    assert not read.complete and "3 pages" in (read.problem or "")


def test_a_refused_read_says_why_and_never_raises():
    for code in ("AccessDeniedException", "ThrottlingException", "ResourceNotFoundException"):
        read = ExecutionLogs(Pages([], error=code)).read(GROUP, ARN, T0, T0 + 1)
        assert read.records == [] and not read.complete
        # The code, never the message (a refusal's names the account and the role)
        assert read.problem == f"FilterLogEvents: {code}"


# ------------------------------------------------ the same fold as a Standard run's history


def history_of(log: Log) -> list[dict[str, Any]]:
    """The GetExecutionHistory events ``log`` records (what a Standard run's history holds)."""
    from datetime import UTC, datetime

    events = []
    for message in log.messages:
        raw = json.loads(message)
        events.append(
            {
                "id": int(raw["id"]),
                "type": raw["type"],
                "previousEventId": int(raw["previous_event_id"]),
                "timestamp": datetime.fromtimestamp(int(raw["event_timestamp"]) / 1000, tz=UTC),
                "stateEventDetails": raw["details"],
            }
        )
    return events


def both_engines(log: Log) -> tuple[list[Any], list[Any]]:
    """``log`` folded as an Express run's logs and as a Standard run's history."""
    return log_steps(TYPES, RUNNERS, log.records()), history_steps(TYPES, RUNNERS, history_of(log))


def test_flow_control_refusals_are_counted_apart_from_the_attempts_on_both_engines():
    # Given a flow-controlled step refused ten times (Relayflow.Throttled: no slot yet) and
    # once by its open breaker, whose call then failed once and succeeded on its retry
    log = Log()
    log.add("TaskStateEntered", 0, name="charge")
    refused = ["Relayflow.Throttled"] * 10 + ["Relayflow.CircuitOpen"]
    for i, error in enumerate([*refused, "Relayflow.Transient"]):
        log.add("TaskScheduled", 10 * i + 1, resource="invoke", resourceType="lambda")
        log.add("TaskFailed", 10 * i + 2, resource="invoke", resourceType="lambda", error=error)
    log.add("TaskScheduled", 200, resource="invoke", resourceType="lambda")
    log.add("TaskSucceeded", 210, resource="invoke", resourceType="lambda")
    log.add("TaskStateExited", 211, name="charge")
    log.add("ExecutionSucceeded", 500)
    # When folded, from its logs and from its history
    for steps in both_engines(log):
        # Then it made two calls, and eleven attempts were refused without one
        (charge,) = steps
        assert (charge.status, charge.attempts, charge.refusals) == ("succeeded", 2, 11)
        assert charge.error == "Relayflow.Transient"  # the failed call's, not a refusal's


def test_a_failed_for_each_is_failed_with_its_items_as_standard_shows_them():
    # Given a for_each whose second item failed while the first had succeeded and the third
    # was still running: the Map fails, and the run with it
    log = Log()
    log.add("ParallelStateEntered", 0, prev=0, name="_run")
    log.add("ParallelStateStarted", 1)
    log.add("MapStateEntered", 2, name="each")
    started = log.add("MapStateStarted", 3, length=3)
    firsts = [
        log.add("MapIterationStarted", 4, prev=started, name="each", index=i) for i in range(3)
    ]
    a = log.add("TaskStateEntered", 5, prev=firsts[0], name="price")
    b = log.add("TaskStateEntered", 5, prev=firsts[1], name="price")
    c = log.add("TaskStateEntered", 5, prev=firsts[2], name="price")
    a = log.add("TaskScheduled", 6, prev=a, resource="invoke")
    b = log.add("TaskScheduled", 6, prev=b, resource="invoke")
    log.add("TaskScheduled", 6, prev=c, resource="invoke")
    a = log.add("TaskSucceeded", 8, prev=a)
    a = log.add("TaskStateExited", 9, prev=a, name="price")
    log.add("MapIterationSucceeded", 9, prev=a, name="each", index=0)
    b = log.add("TaskFailed", 10, prev=b, error="Relayflow.CodeError")
    log.add("MapIterationFailed", 11, prev=b, name="each", index=1)
    failed = log.add("MapStateFailed", 12)
    log.add("ParallelStateFailed", 13, prev=failed)
    log.add("ExecutionFailed", 20, error="Relayflow.CodeError")
    # When folded, from its logs and from its history
    express, standard = both_engines(log)
    # Then both show the for_each failed, the first item succeeded, the others not
    assert entries(express) == entries(standard)
    assert entries(express) == [
        ("each", "failed", 1, "Relayflow.CodeError"),
        ("price[0]", "succeeded", 1, None),
        ("price[1]", "failed", 1, "Relayflow.CodeError"),
        ("price[2]", "failed", 1, "Relayflow.CodeError"),
    ]
    # And the run failed in the for_each
    assert failing_step(express) == failing_step(standard) == "each"


def test_a_failed_parallel_is_the_failing_step_not_its_last_open_branch():
    # Given a parallel whose branch 'right' failed while branch 'left' was still running
    log = Log()
    log.add("ParallelStateEntered", 0, name="fan")
    branches = log.add("ParallelStateStarted", 1)
    log.add("WaitStateEntered", 2, prev=branches, name="left")
    right = log.add("TaskStateEntered", 3, prev=branches, name="right")
    right = log.add("TaskScheduled", 4, prev=right, resource="invoke")
    log.add("TaskFailed", 5, prev=right, error="Relayflow.CodeError")
    log.add("ParallelStateFailed", 6)
    log.add("ExecutionFailed", 7, error="Relayflow.CodeError")
    # When folded / Then the run failed in 'fan', on both engines
    for steps in both_engines(log):
        assert [s.key for s in steps] == ["fan", "left", "right"]
        assert failing_step(steps) == "fan"
