"""The function side of ``wait_for_event``: register the wait with its task token.

It runs in the waitpoint function (``relayflow.compiler.kinds.wait_for_event``). The wait
keeps what ``match`` may read of the run (``trigger``, ``steps``, ``run`` and, in a loop,
``item`` and ``index``), so the trigger function can evaluate it against an event later.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from relayflow.errors import TransientError
from relayflow.steps.approval import iso, lifetime, task_token
from relayflow.steps.task import parse_task, result

#: The run data a match may read.
MATCH_ROOTS = ("trigger", "steps", "run", "item", "index")


def run(event: Any) -> dict[str, Any]:
    """Store the wait; the output (ignored by the waiting Task) names it."""
    from relayflow.dal.errors import DataAccessError
    from relayflow.dal.event_waits import EventWaitDal
    from relayflow.steps.idempotency import step_identity

    token = task_token(event)
    task = parse_task(event)
    config = task.step.config
    run_info = task.doc.get("run") or {}
    tenant = str(run_info.get("tenant") or "local")
    identity = step_identity(event)
    wait_id = identity.wait_id("wait_for_event") if identity else uuid.uuid4().hex
    now = datetime.now(UTC)
    deadline, expires_at = lifetime(now, config.get("timeout_seconds"))
    doc = {root: task.doc[root] for root in MATCH_ROOTS if root in task.doc}
    item = {
        "wait_id": wait_id,
        "run_id": str(run_info.get("id") or ""),
        "step": task.step.key,
        "source": config.get("source"),
        "match": config.get("match"),
        "doc": json.dumps(doc, separators=(",", ":"), default=str),
        "task_token": token,
        "created_at": iso(now),
        "deadline": deadline,
        "expires_at": expires_at,
    }
    try:
        EventWaitDal().put(
            tenant,
            str(run_info.get("workflow_id") or ""),
            str(config["event"]),
            {k: v for k, v in item.items() if v is not None},
        )
    except DataAccessError as exc:
        raise TransientError(f"could not store the wait of step {task.step.key!r}") from exc
    return result({"wait_id": wait_id, "expires_at": deadline})
