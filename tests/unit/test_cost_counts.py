"""Counting an execution's history: transitions, Lambda invocations and their time, and the
duration with the local runtime's scaled sleeps restored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from relayflow.cost.counts import ExecutionCounts, count_history, real_duration_ms
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
            event[f"{kind[0].lower()}{kind[1:]}EventDetails"] = {
                "resourceType": "lambda",
                **details,
            }
        events.append(event)
    return events


#: A Lambda Task that fails once (20.4 ms), waits 2 ms (scaled) and succeeds (10 ms), then a
#: Wait state that slept 5 ms (scaled) and a Pass.
RETRIED = history(
    (0, "ExecutionStarted", 0, {}),
    (1, "TaskStateEntered", 1, {"name": "charge"}),
    (2, "TaskScheduled", 1, {}),
    (3, "TaskStarted", 2, {}),
    (4, "TaskFailed", 22.4, {"error": "Relayflow.Transient"}),
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


#: The machine RETRIED ran: a 3 s retry interval doubling (capped at 5 s), a 60 s wait.
RETRIED_ASL = {
    "StartAt": "charge",
    "States": {
        "charge": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Retry": [
                {"ErrorEquals": ["Lambda.ServiceException"], "IntervalSeconds": 1},
                {
                    "ErrorEquals": ["Relayflow.Transient"],
                    "IntervalSeconds": 3,
                    "BackoffRate": 2.0,
                    "MaxDelaySeconds": 5,
                },
            ],
            "Next": "nap",
        },
        "nap": {"Type": "Wait", "Seconds": 60, "Next": "done"},
        "done": {"Type": "Pass", "End": True},
    },
}


def test_scaled_sleeps_count_at_their_configured_length():
    # 42 ms locally, of which the retry interval (2 ms) and the wait (5 ms) were scaled sleeps:
    # they count as the matching retrier's first interval (3 s) and the wait's 60 s
    assert real_duration_ms(RETRIED, RETRIED_ASL, 0.001) == pytest.approx(42 - 7 + 3000 + 60_000)
    assert real_duration_ms(RETRIED, RETRIED_ASL, 1.0) == pytest.approx(42)


def test_a_later_retry_waits_longer_up_to_the_cap_and_full_jitter_halves_it():
    second = [dict(e) for e in RETRIED[:8]]
    # a second failure (at 35 ms), a retry scheduled 4 ms later, succeeding at 50 ms
    second[7] = {
        **{k: v for k, v in second[7].items() if not k.endswith("EventDetails")},
        "type": "TaskFailed",
        "taskFailedEventDetails": {"resourceType": "lambda", "error": "Relayflow.Transient"},
    }
    second += [
        {
            "id": 9,
            "previousEventId": 8,
            "type": "TaskScheduled",
            "timestamp": T0 + timedelta(milliseconds=39),
        },
        {
            "id": 10,
            "previousEventId": 9,
            "type": "TaskStarted",
            "timestamp": T0 + timedelta(milliseconds=40),
        },
        {
            "id": 11,
            "previousEventId": 10,
            "type": "TaskSucceeded",
            "timestamp": T0 + timedelta(milliseconds=50),
        },
    ]
    # 50 ms, less 2 + 4 ms slept, plus 3 s and min(6 s, 5 s)
    assert real_duration_ms(second, RETRIED_ASL, 0.001) == pytest.approx(50 - 6 + 3000 + 5000)
    jittered = {**RETRIED_ASL["States"]["charge"]}
    jittered["Retry"] = [{**jittered["Retry"][1], "JitterStrategy": "FULL"}]
    asl = {**RETRIED_ASL, "States": {**RETRIED_ASL["States"], "charge": jittered}}
    assert real_duration_ms(second, asl, 0.001) == pytest.approx(50 - 6 + 1500 + 2500)


def test_a_run_is_priced_from_its_counts_and_has_no_estimate_without_them():
    assert run_cost_usd(None, None, None) is None
    cheap = run_cost_usd(4, 2, 31)
    dear = run_cost_usd(40, 2, 31)
    assert cheap is not None and dear is not None
    # 36 more transitions at $0.025 per 1,000
    assert dear - cheap == pytest.approx(36 * 0.000025, abs=2e-6)
