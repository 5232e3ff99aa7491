"""``cancel_on``: a matching event on the Relayflow bus cancels a workflow's running runs.

Trigger sync subscribes one rule per ``cancel_on`` entry (its detail-type, optional source,
and always the tenant), delivering ``{"kind": "cancel", "tenant", "workflow_id",
"index", "event"}`` to the trigger function, which calls :func:`handle_cancel`. The
entry is read from the live version; each running (or queued) run of the workflow whose
``match`` is true for ``{trigger: the run's trigger, event: the event}`` is cancelled like
``POST /runs/{id}/cancel`` does (``Relayflow.Cancelled``). Runs are listed and cancelled
with the delivery's tenant only, so another tenant's identical event cancels nothing.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from relayflow.control.bus_deliveries import BusDelivery
from relayflow.control.errors import Conflict, NotFound

if TYPE_CHECKING:
    from relayflow.control.ports import RunControl

CANCEL_KIND = "cancel"


def handle_cancel(delivery: Mapping[str, Any], *, control: RunControl) -> dict[str, Any]:
    """Cancel the runs one ``cancel_on`` event matches; says which (and why none)."""
    from relayflow.errors import ExpressionError
    from relayflow.expressions import evaluate_condition
    from relayflow.observability import logger
    from relayflow.triggers.deliveries import event_trigger

    plane = control
    received = BusDelivery.of(delivery, CANCEL_KIND)
    if (skipped := received.foreign()) is not None:
        return skipped
    tenant, workflow_id, event = received.tenant, received.workflow_id, received.event
    answer = received.answer
    entry = _entry(plane, tenant, workflow_id, int(delivery.get("index", -1)))
    if entry is None:
        return {
            **answer,
            "status": "skipped",
            "reason": "the live version declares no such cancel_on",
        }
    payload = event_trigger(event)
    cancelled: list[str] = []
    for run in _active_runs(plane, tenant, workflow_id):
        match = entry.get("match")
        if match:
            try:
                trigger = json.loads(run.input) if run.input else {}
                if not evaluate_condition(match, {"trigger": trigger, "event": payload}):
                    continue
            except ExpressionError as exc:
                logger.warning(
                    "cancel_on match failed; the run is left running",
                    extra={"run_id": run.run_id, "reason": str(exc)},
                )
                continue
        with contextlib.suppress(Conflict, NotFound):  # it ended meanwhile
            plane.cancel_run(tenant, run.run_id)
            cancelled.append(run.run_id)
    logger.info("cancel_on event handled", extra={**answer, "cancelled": cancelled})
    return {**answer, "status": "cancelled" if cancelled else "no_match", "run_ids": cancelled}


def _entry(plane: RunControl, tenant: str, workflow_id: str, index: int) -> dict[str, Any] | None:
    head = plane.dal.get_workflow(tenant, workflow_id)
    if head is None:
        return None
    version = plane.dal.get_version(tenant, workflow_id, head.live_version)
    entries = (json.loads(version.definition).get("cancel_on") or []) if version else []
    return entries[index] if 0 <= index < len(entries) else None


def _active_runs(plane: RunControl, tenant: str, workflow_id: str) -> list[Any]:
    runs: list[Any] = []
    for status in ("running", "parked", "queued"):
        token: str | None = None
        while True:
            items, token = plane.dal.list_runs(
                tenant, workflow_id, status=status, limit=100, next_token=token
            )
            runs.extend(items)
            if not token:
                break
    return runs
