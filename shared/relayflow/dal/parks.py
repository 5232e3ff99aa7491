"""Data access for parked runs (``on_error: {action: park}``).

A park lives beside the waits, under ``TENANT#<t>#WAIT#<park id>`` / ``WAIT`` (the waitpoint
function that stores it may write only partitions of that shape), with GSI1
``TENANT#<t>#PARKS`` / ``<parked_at>#<park id>``: the tenant's parks, oldest first, which
``GET /runs?status=parked`` reads. The task token is stored here and nowhere else.

A resume *claims* the park with one conditional update (``parked`` → ``resumed``), so of two
racing resumes exactly one wins.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from relayflow.dal import keys
from relayflow.dal.errors import ConditionFailed
from relayflow.dal.items import ItemModel
from relayflow.dal.table import TableAccess

ParkStatus = Literal["parked", "resumed", "expired"]


def parks_partition(tenant: str) -> str:
    """GSI1 partition of a tenant's parks (sorted by park time, then id)."""
    return f"{keys.tenant_prefix(tenant)}#PARKS"


#: The fields of a park the run item shows while parked.
PARKED_INFO = frozenset({"park_id", "step", "error", "parked_at", "deadline"})


class ParkItem(ItemModel):
    """One park: a run waiting at a failed step for a person's decision."""

    kind: ClassVar[str] = "park"

    park_id: str
    tenant: str
    workflow_id: str
    run_id: str
    step: str
    execution_id: str | None = None
    status: ParkStatus = "parked"
    error: dict[str, Any] | None = Field(None, description="{Error, Cause} of the failure.")
    parked_at: str
    deadline: str | None = Field(None, description="When the park times out (ISO-8601 UTC).")
    task_token: str = Field(repr=False, description="Never returned to a caller or logged.")
    decision: dict[str, Any] | None = Field(None, description="The resume: {action, …}.")
    mergeable: bool = Field(
        True, description="Whether the run's trigger data is an object a context can merge into."
    )
    resumed_at: str | None = None
    expires_at: int = Field(description="TTL: epoch seconds.")

    def key(self) -> keys.Key:
        return keys.wait_key(self.tenant, self.park_id)

    def index_keys(self) -> dict[str, str]:
        return {
            "gsi1pk": parks_partition(self.tenant),
            "gsi1sk": keys.approvals_sort(self.parked_at, self.park_id),
        }

    def info(self) -> dict[str, Any]:
        """What the run item (and its views) show while parked (:data:`PARKED_INFO`, in field
        order): never the token."""
        return self.model_dump(include=PARKED_INFO)


class ParkDal(TableAccess):
    """Park items, through the table's :class:`Dal` (its client, table name and error
    translation)."""

    def put(self, item: ParkItem) -> bool:
        """Store the park, or re-arm one of the same id that still waits (a repeated
        invocation: its token is the newest). ``False`` when it was resumed already."""
        stored = self.dal.put_if(
            item.to_item(),
            "attribute_not_exists(pk) OR #status = :parked",
            {":parked": "parked"},
        )
        return stored is not None

    def get(self, tenant: str, park_id: str) -> ParkItem | None:
        raw = self.dal.get(keys.wait_key(tenant, park_id))
        if not raw or raw.get("type") != ParkItem.kind:
            return None
        return ParkItem.from_item(raw)

    def claim(
        self, tenant: str, park_id: str, decision: dict[str, Any], resumed_at: str
    ) -> ParkItem | None:
        """``parked`` → ``resumed`` with the decision; ``None`` when it no longer waits."""
        try:
            raw = self.dal.update(
                keys.wait_key(tenant, park_id),
                set_values={"status": "resumed", "decision": decision, "resumed_at": resumed_at},
                condition="attribute_exists(#pk) AND #status = :parked",
                values={":parked": "parked"},
            )
        except ConditionFailed:
            return None
        return ParkItem.from_item(raw)

    def release(self, tenant: str, park_id: str) -> None:
        """Undo a claim whose answer never reached Step Functions (the run still waits)."""
        try:
            self.dal.update(
                keys.wait_key(tenant, park_id),
                set_values={"status": "parked", "decision": None, "resumed_at": None},
                condition="attribute_exists(#pk) AND #status = :resumed",
                values={":resumed": "resumed"},
            )
        except ConditionFailed:
            return

    def expire(self, tenant: str, park_id: str) -> None:
        """Mark a park whose token Step Functions no longer accepts (it timed out)."""
        try:
            self.dal.update(
                keys.wait_key(tenant, park_id),
                set_values={"status": "expired"},
                condition="attribute_exists(#pk)",
            )
        except ConditionFailed:
            return

    def list_parked(
        self, tenant: str, *, limit: int, next_token: str | None
    ) -> tuple[list[ParkItem], str | None]:
        """The tenant's parks still waiting, oldest first."""
        return self.dal.page(
            ParkItem.from_item,
            partition=parks_partition(tenant),
            limit=limit,
            next_token=next_token,
            forward=True,
            status="parked",
        )
