"""Completing ``wait_for_event`` steps: an event on the bus resumes the runs waiting for it.

Trigger sync subscribes one rule per ``wait_for_event`` step (its detail-type, optional
source, and always the tenant), delivering ``{"kind": "wait_event", "tenant", "workflow_id",
"event"}`` to the trigger function, which calls :func:`handle_wait_event`. Each wait of the
workflow for that detail-type (read under the delivery's tenant only) whose source fits and
whose ``match`` is true for the run's data plus ``event`` is claimed (a conditional delete,
so one wait completes once) and its task token sent the event: the step's output.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from relayflow.control.bus_deliveries import BusDelivery

WAIT_EVENT_KIND = "wait_event"


def handle_wait_event(delivery: Mapping[str, Any], *, sfn: Any | None = None) -> dict[str, Any]:
    """Complete the waits one event matches; says which."""
    from botocore.exceptions import ClientError

    from relayflow.adapters.aws import client
    from relayflow.dal.event_waits import EventWaitDal
    from relayflow.errors import ExpressionError
    from relayflow.expressions import evaluate_condition
    from relayflow.observability import logger
    from relayflow.steps.wait_outcomes import TOKEN_GONE
    from relayflow.triggers.deliveries import event_trigger

    received = BusDelivery.of(delivery, WAIT_EVENT_KIND)
    if (skipped := received.foreign()) is not None:
        return skipped
    tenant, workflow_id, event = received.tenant, received.workflow_id, received.event
    answer = received.answer
    payload = event_trigger(event)
    store = EventWaitDal()
    completed: list[str] = []
    for wait in store.waiting(tenant, workflow_id, str(event.get("detail-type") or "")):
        if wait.get("source") and wait["source"] != payload["source"]:
            continue
        if wait.get("match"):
            try:
                data = {**json.loads(wait["doc"]), "event": payload}
                if not evaluate_condition(wait["match"], data):
                    continue
            except ExpressionError as exc:
                logger.warning(
                    "wait_for_event match failed; the run keeps waiting",
                    extra={"run_id": wait.get("run_id"), "reason": str(exc)},
                )
                continue
        if not store.claim(wait):
            continue  # another event completed it
        output = json.dumps({"event": payload}, separators=(",", ":"))
        try:
            (sfn or client("stepfunctions")).send_task_success(
                taskToken=wait["task_token"], output=output
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code not in TOKEN_GONE:
                raise
            continue  # the step expired or its run ended meanwhile
        completed.append(str(wait.get("run_id")))
    logger.info("wait_for_event event handled", extra={**answer, "completed": completed})
    return {**answer, "status": "completed" if completed else "no_match", "run_ids": completed}
