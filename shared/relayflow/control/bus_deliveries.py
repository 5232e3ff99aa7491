"""Deliveries of a bus event to one workflow's subscription (``cancel_on``, a
``wait_for_event`` step): trigger sync's rule delivers ``{"kind", "tenant", "workflow_id",
"event", …}`` to the trigger function, which hands it to the subscription's handler."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BusDelivery:
    """One delivery, as its handler reads it."""

    kind: str
    tenant: str
    workflow_id: str
    event: Mapping[str, Any]

    @classmethod
    def of(cls, delivery: Mapping[str, Any], kind: str) -> BusDelivery:
        return cls(
            kind=kind,
            tenant=str(delivery["tenant"]),
            workflow_id=str(delivery["workflow_id"]),
            event=delivery.get("event") or {},
        )

    @property
    def answer(self) -> dict[str, Any]:
        """What every answer of the handler starts with."""
        return {"kind": self.kind, "tenant": self.tenant, "workflow_id": self.workflow_id}

    def foreign(self) -> dict[str, Any] | None:
        """The ``skipped`` answer when the event belongs to another tenant than the
        delivery's (a rule matches on the tenant, but a handler never trusts that alone);
        ``None`` when it is the delivery's own."""
        from relayflow.triggers.deliveries import event_tenant

        if event_tenant(self.event) == self.tenant:
            return None
        return {**self.answer, "status": "skipped", "reason": "the event belongs to another tenant"}
