"""The run DLQ's policy: which failures retry on their own, and when.

A failed or timed-out run is archived in the DLQ by the recorder. A *transient* failure (the
kind that may pass on its own: a network error, a timeout, throttling, an open circuit breaker
downstream) is retried automatically by the maintenance function: the first retry 2 minutes
after the failure, the second 4 minutes after the first retry failed, the third 8 minutes after
the second, then the entry is ``exhausted``. Any other failure waits for a manual retry
(``POST /dlq/{run_id}/retry``). A retry restarts the run under the same run id, so steps that
already succeeded return their recorded results (:mod:`relayflow.steps.idempotency`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from relayflow.errors import CircuitOpen, Throttled, TransientError

#: Delay before automatic retry n (1-based): 2, 4 and 8 minutes.
AUTO_RETRY_BACKOFF: tuple[timedelta, ...] = (
    timedelta(minutes=2),
    timedelta(minutes=4),
    timedelta(minutes=8),
)
MAX_AUTO_RETRIES = len(AUTO_RETRY_BACKOFF)

#: Errors of a failed run that may pass on their own.
TRANSIENT_RUN_ERRORS: frozenset[str] = frozenset(
    {
        TransientError.error_name,
        Throttled.error_name,
        CircuitOpen.error_name,
        "States.Timeout",
        "States.HeartbeatTimeout",
        "Lambda.ServiceException",
        "Lambda.AWSLambdaException",
        "Lambda.SdkClientException",
        "Lambda.TooManyRequestsException",
        "Lambda.Unknown",
    }
)


#: Step types whose timeout is a decision, not a hiccup: a person or a caller did not answer in
#: time. Retrying would ask again; the run waits for a manual retry instead.
WAITING_STEP_TYPES = frozenset({"approval", "waitpoint"})


def is_transient(status: str, error: str | None, failing_step_type: str | None = None) -> bool:
    """Whether a run that ended with ``status`` and ``error`` (at a step of
    ``failing_step_type``) is retried automatically. A run that ran out of its own time
    (``timed_out``) is not: it would most likely do it again; nor is an approval or waitpoint
    that expired."""
    if failing_step_type in WAITING_STEP_TYPES:
        return False
    return status == "failed" and (error or "") in TRANSIENT_RUN_ERRORS


def next_auto_retry(failed_at: datetime, auto_attempts: int) -> datetime | None:
    """When the next automatic retry is due, after ``auto_attempts`` of them failed; ``None``
    once all are used up."""
    if auto_attempts >= MAX_AUTO_RETRIES:
        return None
    return failed_at + AUTO_RETRY_BACKOFF[auto_attempts]
