"""Per-workflow failure notifications: when a run ends badly, tell the people the workflow's
``notifications`` names.

The recorder calls :func:`notify_run_end` once per run end, after the end is recorded, with
the ``notifications`` of the version the run ran. The payload (``data``, and the webhook body's
``data``) is::

    {"type": "relayflow.run.failed", "tenant", "workflow_id", "run_id", "attempt", "version",
     "status", "failing_step", "error", "cause", "started_at", "ended_at"}

``cause`` is cut to :data:`CAUSE_LIMIT_BYTES` of UTF-8 (a Lambda stack trace can be long).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from relayflow.notify.channels import Channel, channels_from_config
from relayflow.notify.models import Delivery, Notification

if TYPE_CHECKING:
    from relayflow.dal import RunItem
    from relayflow.definition.models import NotificationSettings

#: Longest ``cause`` a notification carries, in UTF-8 bytes (before the "…" marker).
CAUSE_LIMIT_BYTES = 2048
#: Characters of the run id the subject shows.
SHORT_RUN_ID = 8
_OUTCOME = {"failed": "failed", "timed_out": "timed out", "aborted": "was aborted"}


def truncate_cause(cause: str | None, limit: int = CAUSE_LIMIT_BYTES) -> str | None:
    """``cause`` cut to at most ``limit`` UTF-8 bytes (never inside a character), "…" if cut."""
    if cause is None:
        return None
    raw = cause.encode("utf-8")
    if len(raw) <= limit:
        return cause
    return raw[:limit].decode("utf-8", errors="ignore") + "…"


def run_end_notification(run: RunItem) -> Notification:
    """The notification of ``run``'s end: subject, plain-text body and the payload."""
    status = run.status
    outcome = _OUTCOME.get(status, status)
    short = run.run_id if len(run.run_id) <= SHORT_RUN_ID else run.run_id[:SHORT_RUN_ID] + "…"
    subject = f"Relayflow: {run.workflow_id} run {short} {outcome}"
    if run.failing_step:
        subject += f" at {run.failing_step}"
    if run.error:
        subject += f" ({run.error})"
    cause = truncate_cause(run.cause)
    data: dict[str, Any] = {
        "type": f"relayflow.run.{status}",
        "tenant": run.tenant,
        "workflow_id": run.workflow_id,
        "run_id": run.run_id,
        "attempt": run.attempt,
        "version": run.version,
        "status": status,
        "failing_step": run.failing_step,
        "error": run.error,
        "cause": cause,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
    }
    version = f", version {run.version}" if run.version is not None else ""
    lines = [
        f"Run {run.run_id} of workflow {run.workflow_id} (tenant {run.tenant}{version}) {outcome}.",
        "",
    ]
    for label, value in (
        ("Failing step", run.failing_step),
        ("Error", run.error),
        ("Cause", cause),
        ("Started", run.started_at),
        ("Ended", run.ended_at),
    ):
        if value:
            lines.append(f"{label}: {value}")
    return Notification(
        event=data["type"],
        tenant=run.tenant,
        subject=subject,
        text="\n".join(lines) + "\n",
        data=data,
        # A retried run (DLQ) can fail again: each execution's end is its own notification.
        id=f"{run.run_id}:{run.attempt}:{status}",
    )


def notify_run_end(
    run: RunItem,
    settings: NotificationSettings | Mapping[str, Any] | None,
    *,
    channels: Sequence[Channel] | None = None,
) -> list[Delivery]:
    """Send ``run``'s end through every channel of ``settings`` when its status is one of
    ``settings.on``; return one :class:`Delivery` per channel (empty when nothing was due).

    ``settings`` is the version's ``notifications`` (parsed, or its JSON form; ``None`` sends
    nothing). ``channels`` replaces the channels ``settings`` names (tests, callers that built
    them already). Delivery problems are in the results, never raised."""
    if settings is None:
        return []
    from relayflow.definition.models import NotificationSettings

    parsed = (
        settings
        if isinstance(settings, NotificationSettings)
        else NotificationSettings.model_validate(settings)
    )
    if run.status not in parsed.on:
        return []
    notification = run_end_notification(run)
    targets = list(channels) if channels is not None else channels_from_config(parsed)
    return [channel.send(notification) for channel in targets]
