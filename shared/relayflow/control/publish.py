"""``POST /events``: an API client publishes an event on the Relayflow bus, for its tenant,
through the one rule a ``tool`` step's ``put_events`` follows too
(:func:`relayflow.triggers.publish.tenant_event`). It lives in the control plane, not beside
the rule, so that step functions, which import the rule, never reach the control plane.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.triggers.publish import ReservedEvent, tenant_event


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
    :class:`~relayflow.control.errors.Unprocessable` for a reserved source or detail type
    (:func:`tenant_event`) or an event
    EventBridge refuses, ``TooManyRequests`` / ``ServiceUnavailable`` when EventBridge
    throttles or fails."""
    from relayflow.control.errors import ServiceUnavailable, TooManyRequests, Unprocessable
    from relayflow.triggers.bus import EventBus, EventBusError, EventBusThrottled, PublishRejected

    try:
        stamped = tenant_event(tenant, source, detail_type, detail)
    except ReservedEvent as exc:
        what = "reserved source" if exc.field == "source" else "reserved detail type"
        raise Unprocessable(str(exc), [{"path": exc.field, "message": what}]) from None
    if bus is None:
        from relayflow.settings import get_settings

        bus = EventBus(get_settings().event_bus_name)
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
