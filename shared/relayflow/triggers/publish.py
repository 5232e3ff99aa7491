"""``POST /events``: an API client publishes an event on the Relayflow bus, for its tenant.

The event's ``detail`` always carries ``relayflow_tenant`` = the caller's tenant (whatever the
client sent in that field is overwritten), and every subscription rule requires it, so a
tenant's events only ever start that tenant's workflows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.triggers.sync import TENANT_FIELD

#: Sources a client may not publish under: AWS's own (EventBridge refuses them) and the one
#: Relayflow's run lifecycle events use.
RESERVED_SOURCES = ("aws.", "relayflow")


def publish_event(
    tenant: str,
    source: str,
    detail_type: str,
    detail: Mapping[str, Any],
    *,
    bus: Any | None = None,
) -> str:
    """Put the event on ``settings.event_bus_name`` (or ``bus``, an
    :class:`~relayflow.triggers.bus.EventBus`); returns its id. Raises
    :class:`~relayflow.control.errors.Unprocessable` for a reserved source or an event
    EventBridge refuses, ``TooManyRequests`` / ``ServiceUnavailable`` when EventBridge
    throttles or fails."""
    from relayflow.control.errors import ServiceUnavailable, TooManyRequests, Unprocessable
    from relayflow.triggers.bus import EventBus, EventBusError, EventBusThrottled, PublishRejected

    lowered = source.lower()
    if lowered.startswith("aws.") or lowered == "relayflow" or lowered.startswith("relayflow."):
        raise Unprocessable(
            f"source {source!r} is reserved (aws.*, relayflow, relayflow.*); use your own, "
            "e.g. shop.orders",
            [{"path": "source", "message": "reserved source"}],
        )
    if bus is None:
        from relayflow.settings import get_settings

        bus = EventBus(get_settings().event_bus_name)
    stamped = {**detail, TENANT_FIELD: tenant}
    try:
        return str(bus.publish(source, detail_type, stamped))
    except PublishRejected as exc:
        raise Unprocessable(f"EventBridge refused the event: {exc}") from exc
    except EventBusThrottled as exc:
        raise TooManyRequests("EventBridge is throttling requests; retry shortly") from exc
    except EventBusError as exc:
        from relayflow.observability import logger

        logger.error("publishing an event failed", extra={"reason": str(exc)})
        raise ServiceUnavailable("the event bus could not be reached; retry shortly") from exc
