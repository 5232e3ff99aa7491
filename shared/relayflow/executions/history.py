"""A Step Functions execution history, read: one :class:`StateRun` per state entered
(:func:`build_state_runs`, pure), and each event as the record Step Functions writes to
CloudWatch Logs (:func:`log_record`).

Deployed in the layer: the control plane's run timeline (``GET /runs/{id}``), the recorder's
cost counts and the local runtime all read histories with it (relayflow.local.history
re-exports it for the local runtime's callers).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

#: Events that start one attempt of a Task.
ATTEMPT_EVENTS = frozenset(
    {"TaskScheduled", "LambdaFunctionScheduled", "ActivityScheduled"},
)
#: Events that end an attempt (or a Map/Parallel) in failure.
FAILURE_EVENTS = frozenset(
    {
        "TaskFailed",
        "TaskTimedOut",
        "TaskStartFailed",
        "TaskSubmitFailed",
        "LambdaFunctionFailed",
        "LambdaFunctionTimedOut",
        "LambdaFunctionStartFailed",
        "LambdaFunctionScheduleFailed",
        "ActivityFailed",
        "ActivityTimedOut",
        "ActivityScheduleFailed",
        "MapStateFailed",
        "ParallelStateFailed",
        "MapStateAborted",
        "ParallelStateAborted",
    }
)
_SUCCESS_EVENTS = frozenset(
    {
        "TaskSucceeded",
        "LambdaFunctionSucceeded",
        "ActivitySucceeded",
        "MapStateSucceeded",
        "ParallelStateSucceeded",
    }
)
#: Events about a Map/Parallel as a whole; moto chains them after the last child event.
_COMPOSITE_PREFIXES = ("MapState", "ParallelState")
#: A Map's or Parallel's end events after which nothing inside it runs on.
_COMPOSITE_ENDS = frozenset(
    {"MapStateFailed", "MapStateAborted", "ParallelStateFailed", "ParallelStateAborted"}
)
_END_STATUS = {"ABORTED": "aborted", "TIMED_OUT": "timed_out", "RUNNING": "running"}


def parse_time(value: Any) -> datetime.datetime | None:
    if isinstance(value, datetime.datetime):
        return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
    if isinstance(value, str) and value:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def parse_json(value: Any) -> Any:
    """A history payload string as JSON (a string that is not JSON is returned as is)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _details(event: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in event.items():
        if key.endswith("EventDetails") and isinstance(value, dict):
            return value
    return {}


def millis_between(start: datetime.datetime | None, end: datetime.datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return (end - start).total_seconds() * 1000.0


@dataclass
class StateRun:
    """One entry into a state, from its ``…StateEntered`` event to its ``…StateExited``.

    ``status`` is ``succeeded``; ``caught`` (it failed and a Catch took over); ``failed``;
    ``aborted``; ``timed_out`` (the execution timed out while it ran) or ``running``.
    ``attempts`` counts the Task attempts (1 + retries; 0 for states that run no Task).
    ``iteration`` is the Map item index when the state ran inside a Map iteration.
    """

    name: str
    type: str
    status: str = "running"
    attempts: int = 0
    started_at: datetime.datetime | None = None
    ended_at: datetime.datetime | None = None
    input: Any = None
    output: Any = None
    error: str | None = None
    cause: str | None = None
    iteration: int | None = None
    entered_event_id: int = 0
    #: The last successful Task result (a Lambda Task's full answer: ``{"Payload": …}``),
    #: before ``ResultSelector`` picked from it.
    task_result: Any = None
    #: The Task's ``TimeoutSeconds`` as its last attempt was scheduled with
    #: (``timeoutInSeconds``), when it had one.
    timeout_seconds: float | None = None
    _last_failed: bool = field(default=False, repr=False)
    _open: bool = field(default=True, repr=False)

    #: What :meth:`to_dict` shows, in order.
    SHOWN: ClassVar[tuple[str, ...]] = (
        "name",
        "type",
        "status",
        "attempts",
        "started_at",
        "ended_at",
        "duration_ms",
        "input",
        "output",
        "error",
        "cause",
        "iteration",
    )

    @property
    def duration_ms(self) -> float | None:
        return millis_between(self.started_at, self.ended_at)

    def to_dict(self) -> dict[str, Any]:
        """The :data:`SHOWN` attributes, times as ISO text."""
        values = {name: getattr(self, name) for name in self.SHOWN}
        return {
            name: value.isoformat() if isinstance(value, datetime.datetime) else value
            for name, value in values.items()
        }


def build_state_runs(events: Iterable[Mapping[str, Any]], execution_status: str) -> list[StateRun]:
    """Fold history events into state runs, in the order the states were entered.

    Events are attributed to a run by following ``previousEventId`` (moto chains every event
    of a Task attempt, and every event of a Map iteration or Parallel branch, to its source).
    Exits and Map/Parallel outcome events, which moto chains after the last child event, are
    matched by state name/type to the most recent open run instead.
    """
    runs: list[StateRun] = []
    owner: dict[int, StateRun] = {}
    iteration_of: dict[int, int | None] = {}
    execution_error: dict[str, Any] = {}
    #: Entry event ids of the Maps and Parallels that failed.
    stopped: set[int] = set()

    def latest_open(predicate: Any) -> StateRun | None:
        for run in reversed(runs):
            if run._open and predicate(run):
                return run
        return None

    for event in events:
        event_id = int(event.get("id", 0))
        previous = int(event.get("previousEventId", 0) or 0)
        kind = str(event.get("type", ""))
        details = _details(event)
        at = parse_time(event.get("timestamp"))
        iteration_of[event_id] = (
            details.get("index") if kind == "MapIterationStarted" else iteration_of.get(previous)
        )

        if kind.endswith("StateEntered"):
            run = StateRun(
                name=str(details.get("name", "")),
                type=kind[: -len("StateEntered")],
                started_at=at,
                input=parse_json(details.get("input")),
                iteration=iteration_of[event_id],
                entered_event_id=event_id,
            )
            runs.append(run)
            owner[event_id] = run
            continue

        if kind.endswith("StateExited"):
            name = str(details.get("name", ""))
            candidate = owner.get(previous)
            if candidate is None or candidate.name != name or not candidate._open:
                candidate = latest_open(lambda r, n=name: r.name == n)
            if candidate is not None and candidate.entered_event_id in stopped:
                # A failed Map or Parallel that a Catch took: the run goes on without its
                # items or branches. A state inside that failed (and ended its item) failed,
                # one still under way was stopped; neither records an exit of its own. (An
                # uncaught one ends the run: its states end with it, below.)
                for inner in runs:
                    if inner._open and inner.entered_event_id > candidate.entered_event_id:
                        inner._open = False
                        inner.ended_at = at
                        inner.status = "failed" if inner._last_failed else "aborted"
            if candidate is not None:
                candidate._open = False
                candidate.ended_at = at
                candidate.output = parse_json(details.get("output"))
                candidate.status = "caught" if candidate._last_failed else "succeeded"
                owner[event_id] = candidate
                iteration_of[event_id] = candidate.iteration
            continue

        if kind.startswith("Execution"):
            if kind in ("ExecutionFailed", "ExecutionAborted", "ExecutionTimedOut"):
                execution_error = details
            continue

        if kind.startswith(_COMPOSITE_PREFIXES):
            prefix = kind.split("State", 1)[0]
            run = latest_open(lambda r, p=prefix: r.type == p)
            if run is not None:
                iteration_of[event_id] = run.iteration
                if kind in _COMPOSITE_ENDS and not run.name.startswith("_"):
                    # (A machine's own Parallel, such as Express's recording wrapper, catches
                    # what ends the run: its states end with the run.)
                    stopped.add(run.entered_event_id)
        else:
            run = owner.get(previous)
        if run is None:
            continue
        owner[event_id] = run
        if kind in ATTEMPT_EVENTS:
            run.attempts += 1
            run._last_failed = False
            if isinstance(details.get("timeoutInSeconds"), int | float):
                run.timeout_seconds = float(details["timeoutInSeconds"])
        elif kind in FAILURE_EVENTS:
            run._last_failed = True
            run.error = details.get("error", run.error)
            run.cause = details.get("cause", run.cause)
        elif kind in _SUCCESS_EVENTS:
            run._last_failed = False
            if kind == "TaskSucceeded":
                run.task_result = parse_json(details.get("output"))

    end_status = _END_STATUS.get(execution_status, "failed")
    for run in runs:
        if run._open:
            run.status = end_status
            if end_status == "failed" and run.error is None:
                run.error = execution_error.get("error")
                run.cause = execution_error.get("cause")
    return runs


#: Detail fields Step Functions logs with ``includeExecutionData: false``; inputs, outputs,
#: parameters, results and causes are execution data and stay out.
_LOGGED_DETAILS = ("name", "resource", "resourceType", "error", "index", "length")


def epoch_millis(value: Any) -> int:
    """Epoch milliseconds of a history event's time: a datetime (AWS, moto), the ISO text some
    compat fixes give events, or epoch milliseconds already; 0 when there is none."""
    moment = parse_time(value)
    if moment is None:
        return int(value or 0)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def log_record(event: Mapping[str, Any], execution_arn: str) -> dict[str, Any]:
    """The CloudWatch Logs record of one ``GetExecutionHistory`` event."""
    details: Mapping[str, Any] = {}
    for key, value in event.items():
        if key.endswith("EventDetails") and isinstance(value, Mapping):
            details = value
    return aws_log_record(
        event_id=event["id"],
        event_type=str(event["type"]),
        previous_id=event.get("previousEventId"),
        at_ms=epoch_millis(event.get("timestamp")),
        execution_arn=execution_arn,
        details=details,
    )


def aws_log_record(
    *,
    event_id: Any,
    event_type: str,
    previous_id: Any,
    at_ms: int,
    execution_arn: str,
    details: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The record Step Functions writes to CloudWatch Logs for one history event with
    ``includeExecutionData: false``: string ids, the time as epoch milliseconds (a string),
    and only the details that are not execution data."""
    logged = {k: details[k] for k in _LOGGED_DETAILS if details and details.get(k) is not None}
    return {
        "id": str(event_id),
        "type": event_type,
        "details": logged,
        "previous_event_id": str(previous_id or 0),
        "event_timestamp": str(at_ms),
        "execution_arn": execution_arn,
        "redrive_count": "0",
    }
