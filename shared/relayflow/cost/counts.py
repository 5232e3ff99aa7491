"""What an execution consumed, counted from its Step Functions history.

The recorder stores these counts on the run item (Standard executions have a history; the
local runtime's executions too), and the cost bench prices them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: The events that end one attempt of a Task.
_TASK_ENDS = frozenset({"TaskSucceeded", "TaskFailed", "TaskTimedOut"})


@dataclass(frozen=True)
class ExecutionCounts:
    """``transitions``: states entered (every state of every Map iteration and Parallel branch
    included) plus one per Task retry, as Standard bills them. ``lambda_invocations``: Lambda
    Tasks scheduled (retries included). ``lambda_ms``: the sum of each invocation's time from
    ``TaskStarted`` to its end, each rounded up to 1 ms as Lambda bills (an upper bound of the
    billed duration: it includes the invoke's round trip)."""

    transitions: int
    lambda_invocations: int
    lambda_ms: float


def count_history(events: Iterable[Mapping[str, Any]]) -> ExecutionCounts:
    """Count one execution's history events (oldest first, all pages)."""
    from relayflow.local.history import build_state_runs, parse_time

    events = list(events)
    retries = sum(max(0, run.attempts - 1) for run in build_state_runs(events, "SUCCEEDED"))
    entered = sum(1 for e in events if str(e.get("type", "")).endswith("StateEntered"))
    by_id = {int(e.get("id", 0)): e for e in events}
    invocations = 0
    lambda_ms = 0.0
    for event in events:
        kind = str(event.get("type", ""))
        if kind == "LambdaFunctionScheduled" or (
            kind == "TaskScheduled" and _resource_type(event) == "lambda"
        ):
            invocations += 1
        elif kind in _TASK_ENDS and _resource_type(event) == "lambda":
            started = by_id.get(int(event.get("previousEventId", 0) or 0))
            start_at = parse_time(started.get("timestamp")) if started else None
            end_at = parse_time(event.get("timestamp"))
            if start_at is not None and end_at is not None:
                lambda_ms += math.ceil(max(0.0, (end_at - start_at).total_seconds() * 1000))
    return ExecutionCounts(entered + retries, invocations, lambda_ms)


def _resource_type(event: Mapping[str, Any]) -> str | None:
    for key, value in event.items():
        if key.endswith("EventDetails") and isinstance(value, dict):
            found = value.get("resourceType")
            return str(found) if found is not None else None
    return None


def unscaled_duration_ms(events: Iterable[Mapping[str, Any]], time_scale: float) -> float:
    """An execution's duration with the local runtime's scaled sleeps restored: its time from
    start to end, where every ``Wait`` state and every retry interval (the gap between a failed
    attempt and the next one) counts ``1 / time_scale`` times what it took locally. Every other
    moment (Lambda round trips, the interpreter) counts as measured."""
    from relayflow.local.history import parse_time

    events = list(events)
    if not events:
        return 0.0
    by_id = {int(e.get("id", 0)): e for e in events}
    times = [t for t in (parse_time(e.get("timestamp")) for e in events) if t is not None]
    total = (max(times) - min(times)).total_seconds() * 1000 if times else 0.0
    slept = 0.0
    waits: dict[int, Any] = {}
    for event in events:
        kind = str(event.get("type", ""))
        at = parse_time(event.get("timestamp"))
        previous = by_id.get(int(event.get("previousEventId", 0) or 0))
        if kind == "WaitStateEntered":
            waits[int(event.get("id", 0))] = at
        elif kind == "WaitStateExited" and previous is not None:
            entered = waits.pop(int(event.get("previousEventId", 0) or 0), None)
            if entered is not None and at is not None:
                slept += (at - entered).total_seconds() * 1000
        elif (
            kind == "TaskScheduled"
            and previous is not None
            and str(previous.get("type")) in _TASK_ENDS - {"TaskSucceeded"}
        ):
            failed_at = parse_time(previous.get("timestamp"))
            if failed_at is not None and at is not None:
                slept += (at - failed_at).total_seconds() * 1000
    if time_scale <= 0 or time_scale >= 1:
        return total
    return total + slept * (1 / time_scale - 1)
