"""The DLQ's retry policy: which failures retry on their own, and when."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from relayflow.control.models import DlqEntryInfo
from relayflow.reliability.dlq import MAX_AUTO_RETRIES, is_transient, next_auto_retry

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "error",
    [
        "Relayflow.Transient",
        "Relayflow.Throttled",
        "Relayflow.CircuitOpen",
        "States.Timeout",
        "Lambda.TooManyRequestsException",
    ],
)
def test_transient_step_errors_of_a_failed_run_are_retried_automatically(error):
    assert is_transient("failed", error)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        ("failed", "Relayflow.HttpError"),
        ("failed", "Relayflow.InvalidArgs"),
        ("failed", "Relayflow.CodeError"),
        ("failed", None),
        ("timed_out", "States.Timeout"),
        ("aborted", "Relayflow.Cancelled"),
    ],
)
def test_other_failures_wait_for_a_manual_retry(status, error):
    assert not is_transient(status, error)


@pytest.mark.parametrize("step_type", ["approval", "waitpoint"])
def test_an_expired_approval_or_waitpoint_is_not_asked_again_automatically(step_type):
    assert not is_transient("failed", "States.Timeout", step_type)
    assert is_transient("failed", "States.Timeout", "webhook_out")


def test_automatic_retries_back_off_2_4_8_minutes_then_stop():
    assert [next_auto_retry(T0, n) for n in range(4)] == [
        T0 + timedelta(minutes=2),
        T0 + timedelta(minutes=4),
        T0 + timedelta(minutes=8),
        None,
    ]
    assert MAX_AUTO_RETRIES == 3


def test_the_api_model_states_the_same_maximum():
    assert DlqEntryInfo.model_fields["max_auto_attempts"].default == MAX_AUTO_RETRIES
