"""Data access for step flow control: concurrency slots (leases) and rate windows.

Both live in the one Relayflow table under the tenant's prefix, in partitions of their own per
workflow, step and group (the rendered ``key``, see :func:`relayflow.reliability.flow.group_of`),
with ``P = TENANT#<tenant>#FLOW#<workflow id>#<step key>#<group>``:

* concurrency slot: pk ``P#CONC``, sk ``SLOT#<n>``; expires (TTL) an hour after its lease;
* rate window: pk ``P#RATE``, sk ``WINDOW``: the sliding window's ring of bucket counts
  (:mod:`relayflow.dal.limits`); expires an hour after its last start's window.

A concurrency limit of ``limit`` has the slots ``SLOT#0`` … ``SLOT#<limit-1>``. A slot is held
by the lease written in it until ``lease_until`` (epoch milliseconds); claiming one is a
single conditional ``PutItem`` (the slot is absent or its lease has run out), so two claims of
one slot can never both succeed, and ``limit`` slots mean at most ``limit`` live leases.
Releasing deletes the slot only while it still holds the caller's lease id. ``expires_at`` is
the table's TTL, well after the lease ends: it only tidies slots nobody claimed again.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from relayflow.dal import keys
from relayflow.dal.items import ItemModel
from relayflow.dal.limits import RateWindowDal
from relayflow.dal.table import TableAccess

SLOT_SK_PREFIX = "SLOT#"
#: Slots and rate windows are kept this long after their lease or window ends (to inspect).
FLOW_RETENTION_SECONDS = 3600


def flow_prefix(tenant: str, workflow_id: str, step_key: str, group: str) -> str:
    """The start of every flow-control partition of one step and group."""
    return (
        f"{keys.tenant_prefix(tenant)}#FLOW#{keys.part(workflow_id, 'workflow id')}"
        f"#{keys.part(step_key, 'step key')}#{keys.part(group, 'flow group')}"
    )


def slots_partition(tenant: str, workflow_id: str, step_key: str, group: str) -> str:
    return f"{flow_prefix(tenant, workflow_id, step_key, group)}#CONC"


def slot_sort(slot: int) -> str:
    return f"{SLOT_SK_PREFIX}{int(slot)}"


def rate_partition(tenant: str, workflow_id: str, step_key: str, group: str) -> str:
    """The item of a step group's sliding rate window (:mod:`relayflow.dal.limits`)."""
    return f"{flow_prefix(tenant, workflow_id, step_key, group)}#RATE"


class FlowLeaseItem(ItemModel):
    """One concurrency slot held by one step execution until ``lease_until``."""

    kind: ClassVar[str] = "flow_lease"

    tenant: str
    workflow_id: str
    step_key: str
    group: str = Field(description="The rendered concurrency key (or its hash), '*' if none.")
    slot: int = Field(ge=0)
    lease_id: str = Field(description="Random id of the holder; release is conditional on it.")
    lease_until: int = Field(description="Epoch milliseconds at which the lease runs out.")
    acquired_at: int = Field(description="Epoch milliseconds.")
    run_id: str | None = None
    expires_at: int = Field(description="TTL: epoch seconds, after the lease ends.")

    def key(self) -> keys.Key:
        return {
            "pk": slots_partition(self.tenant, self.workflow_id, self.step_key, self.group),
            "sk": slot_sort(self.slot),
        }


class FlowDal(TableAccess):
    """Concurrency slots and rate windows, through the table's :class:`Dal` (its client,
    table name and error translation)."""

    # -- concurrency slots --------------------------------------------------------------------

    def claim_slot(self, lease: FlowLeaseItem, *, now_ms: int) -> tuple[bool, FlowLeaseItem | None]:
        """Write ``lease`` into its slot if the slot is free: absent, or holding a lease that
        ran out at or before ``now_ms``. Returns whether it was claimed and, if so, the
        expired lease it replaced (``None`` when the slot was empty)."""
        old = self.dal.put_if(
            lease.to_item(),
            "attribute_not_exists(#pk) OR #until <= :now",
            {":now": now_ms},
            names={"#pk": "pk", "#until": "lease_until"},
            return_old=True,
        )
        if old is None:
            return False, None
        return True, FlowLeaseItem.from_item(old) if old else None

    def slot_leases(
        self, tenant: str, workflow_id: str, step_key: str, group: str
    ) -> list[FlowLeaseItem]:
        """Every slot item of the group, live or expired (a strongly consistent Query)."""
        rows = self.dal.query_items(
            slots_partition(tenant, workflow_id, step_key, group), SLOT_SK_PREFIX
        )
        return [FlowLeaseItem.from_item(raw) for raw in rows]

    def release_slot(self, lease: FlowLeaseItem) -> bool:
        """Free the slot while it still holds ``lease``; ``False`` when it does not (the lease
        ran out and another execution claimed the slot, whose lease stays)."""
        return self.dal.delete_if(
            lease.key(),
            "#lease = :lease",
            {":lease": lease.lease_id},
            names={"#lease": "lease_id"},
        )

    # -- rate windows -------------------------------------------------------------------------

    @property
    def rate_windows(self) -> RateWindowDal:
        """The sliding-window counters of rate limits (:mod:`relayflow.dal.limits`)."""
        return RateWindowDal(self._dal)
