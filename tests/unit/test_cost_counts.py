"""Counting an execution's history: transitions, Lambda invocations and their time, and the
duration with the local runtime's scaled sleeps restored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from relayflow.cost.counts import ExecutionCounts, count_history, unscaled_duration_ms
from relayflow.cost.runs import run_cost_usd

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def history(*rows: tuple[int, str, float, dict[str, Any]]) -> list[dict[str, Any]]:
    """Events from (previous id, type, milliseconds after T0, details); ids count from 1."""
    events = []
    for event_id, (previous, kind, ms, details) in enumerate(rows, start=1):
        event: dict[str, Any] = {
            "id": event_id,
            "previousEventId": previous,
            "type": kind,
            "timestamp": T0 + timedelta(milliseconds=ms),
        }
        if kind.endswith(("StateEntered", "StateExited")):
            event[
                "stateEnteredEventDetails" if "Entered" in kind else "stateExitedEventDetails"
            ] = {"name": details.get("name", "")}
        elif kind.startswith("Task"):
            event[f"{kind[0].lower()}{kind[1:]}EventDetails"] = {"resourceType": "lambda"}
        events.append(event)
    return events


#: A Lambda Task that fails once (20.4 ms), waits 2 ms (scaled) and succeeds (10 ms), then a
#: Wait state that slept 5 ms (scaled) and a Pass.
RETRIED = history(
    (0, "ExecutionStarted", 0, {}),
    (1, "TaskStateEntered", 1, {"name": "charge"}),
    (2, "TaskScheduled", 1, {}),
    (3, "TaskStarted", 2, {}),
    (4, "TaskFailed", 22.4, {}),
    (5, "TaskScheduled", 24.4, {}),
    (6, "TaskStarted", 25, {}),
    (7, "TaskSucceeded", 35, {}),
    (8, "TaskStateExited", 36, {"name": "charge"}),
    (9, "WaitStateEntered", 36, {"name": "nap"}),
    (10, "WaitStateExited", 41, {"name": "nap"}),
    (11, "PassStateEntered", 41, {"name": "done"}),
    (12, "PassStateExited", 42, {"name": "done"}),
    (13, "ExecutionSucceeded", 42, {}),
)


def test_a_retry_is_a_transition_and_each_attempt_an_invocation():
    counts = count_history(RETRIED)
    # 3 states entered + 1 retry; 2 Lambda attempts of 21 ms (20.4 rounded up) and 10 ms
    assert counts == ExecutionCounts(transitions=4, lambda_invocations=2, lambda_ms=31)


def test_tasks_other_than_lambda_are_transitions_but_not_invocations():
    events = RETRIED[:2] + [
        {**e, "taskScheduledEventDetails": {"resourceType": "dynamodb"}}
        if e["type"] == "TaskScheduled"
        else e
        for e in RETRIED[2:3]
    ]
    assert count_history(events).lambda_invocations == 0


def test_an_empty_history_counts_nothing():
    assert count_history([]) == ExecutionCounts(0, 0, 0.0)


def test_scaled_waits_and_retry_intervals_are_restored_to_their_real_length():
    # 42 ms locally, of which the retry interval (2 ms) and the wait (5 ms) were scaled by 0.001
    assert unscaled_duration_ms(RETRIED, 0.001) == pytest.approx(42 + 7 * 999)
    assert unscaled_duration_ms(RETRIED, 1.0) == pytest.approx(42)


def test_a_run_is_priced_from_its_counts_and_has_no_estimate_without_them():
    assert run_cost_usd(None, None, None) is None
    cheap = run_cost_usd(4, 2, 31)
    dear = run_cost_usd(40, 2, 31)
    assert cheap is not None and dear is not None
    # 36 more transitions at $0.025 per 1,000
    assert dear - cheap == pytest.approx(36 * 0.000025, abs=2e-6)
