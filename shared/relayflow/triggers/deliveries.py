"""What the trigger function receives and answers: the deliveries trigger sync sets up
(a schedule that fired, an event that matched a subscription rule), parsed and checked, the
``trigger`` an event gives a run, and the answer for one delivery.

The wire format the schedules and rules of :mod:`relayflow.triggers.sync` send; the use case
that starts runs for them is :mod:`relayflow.control.dispatch`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from relayflow.triggers.sync import TENANT_FIELD

DispatchStatus = Literal[
    "started",
    "duplicate",
    "filtered",
    "filter_error",
    "skipped",
    "queued",
    "debounced",
    "batched",
    "invalid_input",
]


class InvalidDelivery(ValueError):
    """The trigger function received something that is not a schedule or event delivery."""


class TriggerDelivery(BaseModel):
    """What every delivery names: the tenant, the workflow and the trigger's index."""

    model_config = ConfigDict(extra="ignore")

    tenant: str = Field(min_length=1)
    workflow_id: str = Field(min_length=1)
    trigger_index: int = Field(ge=0)


class ScheduleDelivery(TriggerDelivery):
    """What a schedule sends (its input, with Scheduler's scheduled time filled in)."""

    kind: Literal["schedule"]
    scheduled_time: str = Field(description="When the schedule was due (ISO-8601).")
    input: Any = Field(None, description="The trigger's declared input.")


class EventDelivery(TriggerDelivery):
    """What a subscription rule's input transformer sends."""

    kind: Literal["event"]
    event: dict[str, Any] = Field(description="The whole EventBridge event.")


Delivery = Annotated[ScheduleDelivery | EventDelivery, Field(discriminator="kind")]


class DispatchResult(BaseModel):
    """The trigger function's answer: what happened to one delivery."""

    status: DispatchStatus
    tenant: str
    workflow_id: str
    trigger_index: int
    run_id: str | None = None
    reason: str | None = None


def parse_delivery(event: Mapping[str, Any]) -> ScheduleDelivery | EventDelivery:
    from pydantic import TypeAdapter

    try:
        delivery = TypeAdapter(Delivery).validate_python(event)
    except ValidationError as exc:
        raise InvalidDelivery(f"not a schedule or event delivery: {exc}") from exc
    if isinstance(delivery, ScheduleDelivery):
        try:
            datetime.fromisoformat(delivery.scheduled_time.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidDelivery(
                f"scheduled_time {delivery.scheduled_time!r} is not an ISO-8601 time"
            ) from exc
    return delivery


def event_tenant(event: Mapping[str, Any]) -> Any:
    """The tenant a bus event was published for (the detail field Relayflow adds; ``None``
    for an event without one). A delivery for another tenant starts and completes nothing."""
    detail = event.get("detail")
    return detail.get(TENANT_FIELD) if isinstance(detail, Mapping) else None


def event_trigger(event: Mapping[str, Any]) -> dict[str, Any]:
    """The ``trigger`` of a run an event starts (and of its filter): the event's ``id``,
    ``source``, ``detail_type``, ``time``, ``account``, ``region``, ``resources`` and
    ``detail`` as published (without the tenant field Relayflow adds)."""
    detail = event.get("detail")
    if isinstance(detail, Mapping):
        detail = {k: v for k, v in detail.items() if k != TENANT_FIELD}
    return {
        "id": event.get("id"),
        "source": event.get("source"),
        "detail_type": event.get("detail-type"),
        "time": event.get("time"),
        "account": event.get("account"),
        "region": event.get("region"),
        "resources": event.get("resources") or [],
        "detail": detail,
    }
