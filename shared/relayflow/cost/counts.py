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
    from relayflow.executions.history import build_state_runs, parse_time

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
    found = _details(event).get("resourceType")
    return str(found) if found is not None else None


def real_duration_ms(
    events: Iterable[Mapping[str, Any]], asl: Mapping[str, Any], time_scale: float
) -> float:
    """A local execution's duration as it would run on AWS: its measured time from start to
    end, with each sleep the local runtime scaled by ``time_scale`` replaced by its configured
    length: a ``Wait`` state's ``Seconds``, and a retry's interval (``IntervalSeconds`` times
    ``BackoffRate`` to the retry's power, capped by ``MaxDelaySeconds``; half of it under
    ``JitterStrategy: FULL``, its expected value). A Wait without ``Seconds`` counts its
    measured time divided by ``time_scale``. Every other moment (Lambda round trips, the
    interpreter) counts as measured."""
    from relayflow.executions.history import parse_time

    events = list(events)
    if not events:
        return 0.0
    states = _all_states(asl)
    by_id = {int(e.get("id", 0)): e for e in events}
    times = [t for t in (parse_time(e.get("timestamp")) for e in events) if t is not None]
    total = (max(times) - min(times)).total_seconds() * 1000
    state_of: dict[int, str] = {}
    retries_of: dict[int, int] = {}  # the entered event of a state run → its retries so far
    entered_of: dict[int, int] = {}
    measured_sleep = configured_sleep = 0.0
    for event in events:
        event_id = int(event.get("id", 0))
        previous_id = int(event.get("previousEventId", 0) or 0)
        kind = str(event.get("type", ""))
        at = parse_time(event.get("timestamp"))
        details = _details(event)
        if kind.endswith("StateEntered"):
            state_of[event_id], entered_of[event_id] = str(details.get("name", "")), event_id
        else:
            state_of[event_id] = state_of.get(previous_id, "")
            entered_of[event_id] = entered_of.get(previous_id, 0)
        previous = by_id.get(previous_id)
        before = parse_time(previous.get("timestamp")) if previous else None
        if at is None or before is None:
            continue
        slept = (at - before).total_seconds() * 1000
        state = states.get(state_of[event_id], {})
        if kind == "WaitStateExited" and str(previous.get("type")) == "WaitStateEntered":
            measured_sleep += slept
            seconds = state.get("Seconds")
            configured_sleep += (
                float(seconds) * 1000 if isinstance(seconds, int | float) else slept / time_scale
            )
        elif kind == "TaskScheduled" and str(previous.get("type")) in _TASK_ENDS - {
            "TaskSucceeded"
        }:
            attempt = retries_of.get(entered_of[event_id], 0)
            retries_of[entered_of[event_id]] = attempt + 1
            error = str(_details(previous).get("error", ""))
            measured_sleep += slept
            configured_sleep += _retry_interval_ms(state.get("Retry") or [], error, attempt)
    if time_scale >= 1:
        return total
    return total - measured_sleep + configured_sleep


def _retry_interval_ms(retriers: list[Mapping[str, Any]], error: str, attempt: int) -> float:
    """The configured wait before retry number ``attempt + 1`` of ``error``."""
    for retrier in retriers:
        names = [str(n) for n in retrier.get("ErrorEquals") or []]
        if error in names or "States.ALL" in names or "States.TaskFailed" in names:
            delay = (
                float(retrier.get("IntervalSeconds", 1))
                * float(retrier.get("BackoffRate", 2.0)) ** attempt
            )
            cap = retrier.get("MaxDelaySeconds")
            if cap is not None:
                delay = min(delay, float(cap))
            if retrier.get("JitterStrategy") == "FULL":
                delay /= 2
            return delay * 1000
    return 0.0


def _all_states(machine: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Every state by name, those of Map iterations and Parallel branches included."""
    found: dict[str, Mapping[str, Any]] = {}
    for name, state in (machine.get("States") or {}).items():
        found[name] = state
        for branch in state.get("Branches") or []:
            found.update(_all_states(branch))
        inner = state.get("ItemProcessor") or state.get("Iterator")
        if inner:
            found.update(_all_states(inner))
    return found


def _details(event: Mapping[str, Any]) -> Mapping[str, Any]:
    for key, value in event.items():
        if key.endswith("EventDetails") and isinstance(value, dict):
            return value
    return {}
