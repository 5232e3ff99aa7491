"""The rule for a tenant's event on the Relayflow bus (``POST /events``,
:mod:`relayflow.control.publish`, and a ``tool`` step's ``aws.events.put_events``).

The event's ``detail`` always carries ``relayflow_tenant`` = the caller's tenant (whatever the
client sent in that field is overwritten), and every subscription rule requires it, so a
tenant's events only ever start that tenant's workflows. :func:`tenant_event` is that rule,
shared with a ``tool`` step's ``aws.events.put_events`` on the Relayflow bus
(:mod:`relayflow.tools.guard`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.triggers.sync import TENANT_FIELD

#: Sources a client may not publish under: AWS's own (EventBridge refuses them) and the one
#: Relayflow's run lifecycle events use.
RESERVED_SOURCES = ("aws.", "relayflow")
#: Detail types a client may not publish: Relayflow's lifecycle events (relayflow.run.failed …).
RESERVED_DETAIL_TYPE_PREFIX = "relayflow"


class ReservedEvent(ValueError):
    """The event claims to be Relayflow's or AWS's own (``field``: ``source`` or
    ``detail_type``)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def reserved_problem(source: str, detail_type: str) -> ReservedEvent | None:
    """Why a tenant may not publish this event on the Relayflow bus, or ``None``: a source
    ``aws.*``, ``relayflow`` or starting with ``relayflow`` (``relayflow.*``,
    ``relayflow-x``), or a detail type starting with ``relayflow`` (the lifecycle events'
    ``relayflow.run.failed``). Compared without case and surrounding blanks."""
    lowered = source.strip().lower()
    if lowered.startswith("aws.") or lowered.startswith("relayflow"):
        return ReservedEvent(
            f"source {source!r} is reserved (aws.*, relayflow*); use your own, e.g. shop.orders",
            "source",
        )
    if detail_type.strip().lower().startswith(RESERVED_DETAIL_TYPE_PREFIX):
        return ReservedEvent(
            f"detail type {detail_type!r} is reserved (relayflow*: Relayflow's lifecycle "
            "events); use your own, e.g. order.created",
            "detail_type",
        )
    return None


def stamped_detail(tenant: str, detail: Mapping[str, Any]) -> dict[str, Any]:
    """``detail`` with ``relayflow_tenant`` set to ``tenant`` (whatever it held before): every
    subscription rule requires it, so the event reaches only ``tenant``'s workflows."""
    return {**detail, TENANT_FIELD: tenant}


def tenant_event(
    tenant: str, source: str, detail_type: str, detail: Mapping[str, Any]
) -> dict[str, Any]:
    """The one way a tenant's event goes onto the Relayflow bus (``POST /events`` and a
    ``tool`` step's ``aws.events.put_events``): reserved sources and detail types refused
    (:class:`ReservedEvent`), the tenant stamped. Returns the stamped detail."""
    problem = reserved_problem(source, detail_type)
    if problem is not None:
        raise problem
    return stamped_detail(tenant, detail)
