"""The park of a step that failed with ``on_error: {action: park}``
(:mod:`relayflow.compiler.on_error`).

Served by the waitpoint function (step type ``park``) as a ``.waitForTaskToken`` Task: it
stores the park (the error from ``$.error``, the task token, the deadline) and marks the run
``parked``; the run waits until ``POST /runs/{id}/resume`` answers the token
(:mod:`relayflow.control.resume`) or ``park_timeout`` passes.

The park id is derived from the task token: a repeated invocation of the same Task attempt
finds its own park, and every new park of the run (after a retry that failed again) gets a
new one.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from relayflow.errors import TransientError
from relayflow.steps.approval import iso, lifetime, task_token
from relayflow.steps.task import parse_task, result, run_place


def park_id(token: str) -> str:
    """32 hex digits of sha256 over the task token (the token itself is never shown)."""
    return hashlib.sha256(token.encode()).hexdigest()[:32]


def _error(doc: dict[str, Any]) -> dict[str, Any] | None:
    from relayflow.causes import public_error

    error = doc.get("error")
    if not isinstance(error, dict):
        return None
    # A Lambda's cause may carry the engine's stack trace: only its public part is kept
    # (name, message and details; parse_task has already made it public, and doing it
    # again changes nothing).
    public = public_error(error)
    return {k: public[k] for k in ("Error", "Cause", "details") if k in public}


def run(event: Any) -> dict[str, Any]:
    """Store the park and mark the run ``parked``; the output (ignored by the waiting Task)
    names the park."""
    from relayflow.dal import get_dal
    from relayflow.dal.errors import DataAccessError
    from relayflow.dal.items import ACTIVE_STATUSES
    from relayflow.dal.parks import ParkDal, ParkItem

    token = task_token(event)
    task = parse_task(event)
    now = datetime.now(UTC)
    deadline, expires_at = lifetime(now, task.step.config.get("park_timeout"))
    item = ParkItem(
        park_id=park_id(token),
        **run_place(task),
        error=_error(task.doc),
        parked_at=iso(now),
        deadline=deadline,
        task_token=token,
        expires_at=expires_at,
        mergeable=isinstance(task.doc.get("trigger"), dict),
    )
    try:
        if not ParkDal().put(item):
            return result({"park_id": item.park_id, "resumed": True})  # a repeat, answered
        get_dal().update_run(
            item.tenant,
            item.run_id,
            {"status": "parked", "parked": item.info()},
            if_status=ACTIVE_STATUSES,
        )
    except DataAccessError as exc:
        raise TransientError(f"could not park the run at step {task.step.key!r}") from exc
    return result({"park_id": item.park_id, "deadline": deadline})
