"""The approval step: record a request for a person's decision and let the run wait for it.

The step is a ``lambda:invoke.waitForTaskToken`` Task: this function renders the request from
the state document, stores it (with the task token, which never leaves the table) and returns
at once. Step Functions keeps the Task open until the control API's ``respond`` sends the
decision with ``SendTaskSuccess`` (:mod:`relayflow.control.waits`), or until the Task's
``TimeoutSeconds`` (the approval's expiry) end it with ``States.Timeout``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from relayflow.errors import InvalidArgsError, TransientError
from relayflow.expressions import render
from relayflow.expressions.templates import text_form
from relayflow.steps.effects import Effects
from relayflow.steps.task import parse_task, result, run_place

DEFAULT_OPTIONS = ["approve", "reject"]


def iso(value: datetime) -> str:
    """ISO-8601 UTC to the millisecond with ``Z`` (every time in the table)."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def lifetime(now: datetime, timeout_seconds: int | None) -> tuple[str | None, int]:
    """The decision deadline (``None`` without a timeout) and the item's TTL (epoch seconds):
    kept :data:`~relayflow.dal.waits.WAIT_RETENTION_SECONDS` beyond the deadline."""
    from relayflow.dal.waits import WAIT_MAX_AGE_SECONDS, WAIT_RETENTION_SECONDS

    if not timeout_seconds:
        return None, int(now.timestamp()) + WAIT_MAX_AGE_SECONDS
    deadline = now + timedelta(seconds=int(timeout_seconds))
    return iso(deadline), int(deadline.timestamp()) + WAIT_RETENTION_SECONDS


def wait_fields(token: str, timeout_seconds: int | None) -> dict[str, Any]:
    """The fields of an approval or waitpoint item that start its wait now: ``created_at``,
    the ``deadline`` and TTL of :func:`lifetime`, and the task token that resumes the run."""
    now = datetime.now(UTC)
    deadline, expires_at = lifetime(now, timeout_seconds)
    return {
        "created_at": iso(now),
        "deadline": deadline,
        "task_token": token,
        "expires_at": expires_at,
    }


def task_token(event: Any) -> str:
    """The ``$$.Task.Token`` the compiler adds to a callback Task's payload."""
    token = event.get("task_token") if isinstance(event, dict) else None
    if not isinstance(token, str) or not token:
        raise InvalidArgsError("a callback step's payload carries no task_token")
    return token


def approved(option: str, options: list[str]) -> bool:
    """``approve`` is the approving option; without one, the first option is."""
    return option == "approve" if "approve" in options else option == options[0]


def _text(value: Any) -> str | None:
    return None if value is None else text_form(value)


def run(event: Any, effects: Effects) -> dict[str, Any]:
    """Render and store the approval request, notify its channels (through ``effects``:
    a dry run waits for a decision but tells no one); the output (ignored by the waiting
    Task) names the request."""
    from relayflow.dal.errors import ConditionFailed, DataAccessError
    from relayflow.dal.waits import ApprovalItem, WaitDal

    token = task_token(event)
    task = parse_task(event)
    config = task.step.config
    options = list(config.get("options") or DEFAULT_OPTIONS)
    from relayflow.steps.idempotency import step_identity

    identity = step_identity(event)
    # An agent asks once per gated tool call, not once per step: its approval state names the
    # call as the request's scope, so each call gets its own request (and decision).
    scope = config.get("scope")
    kind = f"approval:{text_form(render(scope, task.doc))}" if scope else "approval"
    item = ApprovalItem(
        approval_id=identity.wait_id(kind) if identity else uuid.uuid4().hex,
        **run_place(task),
        title=_text(render(config.get("title") or "Approval required", task.doc)) or "",
        description=_text(render(config.get("description"), task.doc)),
        prompt=_text(render(config.get("prompt"), task.doc)),
        options=options,
        form_schema=config.get("form_schema"),
        assigned_to=config.get("assigned_to"),
        assigned_role=config.get("assigned_role"),
        timeout_action=str(config.get("timeout_action") or "fail"),
        **wait_fields(token, config.get("timeout_seconds")),
    )
    dal = WaitDal()
    try:
        try:
            dal.put_approval(item)
            asked = True
        except ConditionFailed:
            asked = _ask_again(dal, item)
    except DataAccessError as exc:
        raise TransientError(
            f"could not store the approval request of step {task.step.key!r}"
        ) from exc
    if asked:
        effects.notify_approval(item, config.get("notification_channels") or [])
    return result({"approval_id": item.approval_id, "expires_at": item.deadline})


def _ask_again(dal: Any, item: Any) -> bool:
    """The step execution asked before (same run id, step, item and loop pass): a repeated
    invocation, or the run restarted from the DLQ. An undecided request waits for this
    execution now (whether to notify again: only when it waits under a new token); a decided
    one resumes this execution with its recorded decision at once (the step does not ask
    twice)."""
    existing = dal.get_approval(item.tenant, item.approval_id)
    if existing is not None and existing.status != "decided":
        rearmed = dal.rearm_approval(item)
        if rearmed is not None:
            return existing.task_token != item.task_token
        existing = dal.get_approval(item.tenant, item.approval_id)
    if existing is None or existing.status != "decided" or not existing.decision:
        raise TransientError("the approval request changed while it was re-armed; retry")
    _resume_with(existing.decision, item.task_token)
    return False


def _resume_with(decision: dict[str, Any], token: str) -> None:
    import json

    from botocore.exceptions import ClientError

    from relayflow.adapters.aws import client

    output = json.dumps({**decision, "timed_out": False}, separators=(",", ":"))
    try:
        client("stepfunctions").send_task_success(taskToken=token, output=output)
    except ClientError as exc:
        raise TransientError("could not resume with the recorded decision") from exc
