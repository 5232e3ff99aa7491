"""Data access for steps that wait: approval requests and waitpoints.

Both live in the one Relayflow table under ``TENANT#<tenant>#WAIT#<id>`` / ``WAIT`` (the
approval and waitpoint functions' IAM ``LeadingKeys`` are ``TENANT#*#WAIT#*``):

* approval: pk ``TENANT#<t>#WAIT#<id>``, sk ``WAIT``; GSI1 ``TENANT#<t>#APPROVALS`` /
  ``<created_at>#<id>`` (the tenant's requests, oldest first);
* waitpoint: pk ``TENANT#<t>#WAIT#<id>``, sk ``WAIT``; GSI1
  ``TENANT#<t>#RUN#<run id>#WAITPOINTS`` / ``<created_at>#<id>`` (a run's waitpoints).

``expires_at`` is the table's TTL attribute (epoch seconds): an item is kept for
:data:`WAIT_RETENTION_SECONDS` after its decision deadline (``deadline``, ISO-8601), or after
the longest run when it has none. The Step Functions task token is stored here and nowhere
else; nothing that reads these items for a caller may return it.

A decision is *claimed* with one conditional update (``pending`` → ``decided`` / ``completed``
/ ``failed`` while the deadline has not passed), so of two racing responses exactly one wins;
a claim whose ``SendTask*`` call failed for a retryable reason is *released* again.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from relayflow.dal import keys
from relayflow.dal.errors import ConditionFailed
from relayflow.dal.items import ItemModel
from relayflow.dal.table import TableAccess

#: Waits are kept this long after their deadline (as long as a run item after its end).
WAIT_RETENTION_SECONDS = 90 * 86_400
#: A wait without a deadline expires after the longest Standard execution plus the retention.
WAIT_MAX_AGE_SECONDS = 366 * 86_400 + WAIT_RETENTION_SECONDS

ApprovalStatus = Literal["pending", "decided", "expired"]
WaitpointStatus = Literal["pending", "completed", "failed", "expired"]


class ApprovalItem(ItemModel):
    """One approval request of one run's approval step."""

    kind: ClassVar[str] = "approval"

    approval_id: str
    tenant: str
    workflow_id: str
    run_id: str
    step: str
    execution_id: str | None = None
    title: str
    description: str | None = None
    prompt: str | None = None
    options: list[str]
    form_schema: dict[str, Any] | None = None
    assigned_to: str | None = None
    assigned_role: str | None = None
    timeout_action: str = "fail"
    status: ApprovalStatus = "pending"
    created_at: str
    deadline: str | None = Field(None, description="Decision deadline (ISO-8601 UTC).")
    task_token: str = Field(repr=False, description="Never returned to a caller or logged.")
    decision: dict[str, Any] | None = Field(
        None, description="{option, approved, data, responder, responded_at}."
    )
    expires_at: int = Field(description="TTL: epoch seconds.")

    def key(self) -> keys.Key:
        return keys.wait_key(self.tenant, self.approval_id)

    def index_keys(self) -> dict[str, str]:
        return {
            "gsi1pk": keys.approvals_partition(self.tenant),
            "gsi1sk": keys.approvals_sort(self.created_at, self.approval_id),
        }


class WaitpointItem(ItemModel):
    """One waitpoint: a run paused until another system completes or fails it."""

    kind: ClassVar[str] = "waitpoint"

    waitpoint_id: str
    tenant: str
    workflow_id: str
    run_id: str
    step: str
    execution_id: str | None = None
    label: str | None = None
    idempotency_key: str | None = None
    status: WaitpointStatus = "pending"
    created_at: str
    deadline: str | None = Field(None, description="Completion deadline (ISO-8601 UTC).")
    task_token: str = Field(repr=False, description="Never returned to a caller or logged.")
    result: Any = Field(None, description="The completion data.")
    error: dict[str, Any] | None = Field(None, description="{error, message} of a failure.")
    completed_at: str | None = None
    expires_at: int = Field(description="TTL: epoch seconds.")

    def key(self) -> keys.Key:
        return keys.wait_key(self.tenant, self.waitpoint_id)

    def index_keys(self) -> dict[str, str]:
        return {
            "gsi1pk": keys.run_waitpoints_partition(self.tenant, self.run_id),
            "gsi1sk": keys.approvals_sort(self.created_at, self.waitpoint_id),
        }


class WaitDal(TableAccess):
    """Approval and waitpoint items, through the table's :class:`Dal` (its client, table
    name and error translation)."""

    # -- approvals ---------------------------------------------------------------------------

    def put_approval(self, item: ApprovalItem) -> None:
        """Store a new request (ids are fresh uuid4s: an existing one is ConditionFailed)."""
        self.dal.put(item.to_item(), condition="attribute_not_exists(pk)")

    def get_approval(self, tenant: str, approval_id: str) -> ApprovalItem | None:
        raw = self.dal.get(keys.wait_key(tenant, approval_id))
        if not raw or raw.get("type") != ApprovalItem.kind:
            return None
        return ApprovalItem.from_item(raw)

    def list_approvals(
        self, tenant: str, *, status: str | None, limit: int, next_token: str | None
    ) -> tuple[list[ApprovalItem], str | None]:
        """The tenant's approval requests, oldest first, optionally of one stored status."""
        return self.dal.page(
            ApprovalItem.from_item,
            partition=keys.approvals_partition(tenant),
            limit=limit,
            next_token=next_token,
            forward=True,
            status=status,
        )

    def claim_approval(
        self, tenant: str, approval_id: str, decision: dict[str, Any], now: str
    ) -> ApprovalItem | None:
        """``pending`` → ``decided`` with ``decision``, only while pending and before the
        deadline; the decided item, or ``None`` when it was not pending (or had expired)."""
        raw = self.dal.update_if(
            keys.wait_key(tenant, approval_id),
            "SET #status = :decided, #decision = :decision",
            "#status = :pending AND (attribute_not_exists(#deadline) OR #deadline > :now)",
            {":decided": "decided", ":decision": decision, ":pending": "pending", ":now": now},
        )
        return ApprovalItem.from_item(raw) if raw else None

    def release_approval(self, tenant: str, approval_id: str, responded_at: str) -> bool:
        """Undo a claim whose SendTaskSuccess failed for a retryable reason (only the claim
        made at ``responded_at``)."""
        raw = self.dal.update_if(
            keys.wait_key(tenant, approval_id),
            "SET #status = :pending REMOVE #decision",
            "#status = :decided AND #decision.#responded_at = :at",
            {":pending": "pending", ":decided": "decided", ":at": responded_at},
        )
        return raw is not None

    def expire_approval(self, tenant: str, approval_id: str) -> ApprovalItem | None:
        """Mark a request that can no longer be decided ``expired`` (from pending, or from a
        claim whose token Step Functions no longer accepts)."""
        raw = self.dal.update_if(
            keys.wait_key(tenant, approval_id),
            "SET #status = :expired REMOVE #decision",
            "#status IN (:pending, :decided)",
            {":expired": "expired", ":pending": "pending", ":decided": "decided"},
        )
        return ApprovalItem.from_item(raw) if raw else None

    # -- waitpoints --------------------------------------------------------------------------

    def get_waitpoint(self, tenant: str, waitpoint_id: str) -> WaitpointItem | None:
        raw = self.dal.get(keys.wait_key(tenant, waitpoint_id))
        if not raw or raw.get("type") != WaitpointItem.kind:
            return None
        return WaitpointItem.from_item(raw)

    def list_run_waitpoints(self, tenant: str, run_id: str) -> list[WaitpointItem]:
        """The waitpoints a run created, oldest first (a re-armed one under its newest run)."""
        from relayflow.dal.schema import GSI1

        rows = self.dal.query(partition=keys.run_waitpoints_partition(tenant, run_id), index=GSI1)
        return [WaitpointItem.from_item(plain) for plain in rows]

    def put_waitpoint(self, item: WaitpointItem) -> bool:
        """Store a new waitpoint; ``False`` when one with its id exists (an idempotency key
        seen before: see :meth:`rearm_waitpoint`)."""
        try:
            self.dal.put(item.to_item(), condition="attribute_not_exists(pk)")
        except ConditionFailed:
            return False
        return True

    def rearm_approval(self, item: ApprovalItem) -> ApprovalItem | None:
        """Point an existing, undecided request with ``item``'s id at ``item``'s execution
        and token (a restarted run, or a repeated invocation), with ``item``'s deadline: it
        waits afresh. ``None`` when it was decided (that decision stands)."""
        fields = {
            "task_token": item.task_token,
            "execution_id": item.execution_id,
            "deadline": item.deadline,
            "expires_at": item.expires_at,
        }
        raw = self._rearm(item.key(), fields, ("pending", "expired"))
        return ApprovalItem.from_item(raw) if raw is not None else None

    def rearm_waitpoint(
        self, item: WaitpointItem, *, after_failure: bool = False
    ) -> WaitpointItem | None:
        """Point an existing waitpoint with ``item``'s id at ``item``'s run and token while
        it is pending or expired (it then waits afresh) — and, with ``after_failure``, when it
        failed (a restarted run waits again; the failure is forgotten). ``None`` when it was
        completed (or failed, without ``after_failure``): that outcome stands."""
        fields = {
            "task_token": item.task_token,
            "run_id": item.run_id,
            "workflow_id": item.workflow_id,
            "step": item.step,
            "execution_id": item.execution_id,
            "label": item.label,
            "deadline": item.deadline,
            "expires_at": item.expires_at,
            "error": None,
            "result": None,
            "completed_at": None,
            **item.index_keys(),
        }
        statuses = ("pending", "expired", "failed") if after_failure else ("pending", "expired")
        raw = self._rearm(item.key(), fields, statuses)
        return WaitpointItem.from_item(raw) if raw is not None else None

    def _rearm(
        self, key: keys.Key, fields: dict[str, Any], statuses: tuple[str, ...]
    ) -> dict[str, Any] | None:
        """Set ``fields`` (``None`` removes one) and status ``pending``, while the item's
        status is one of ``statuses``; the item afterwards, or ``None``."""
        fields = {**fields, "status": "pending"}
        sets = [f"#{n} = :{n}" for n, v in fields.items() if v is not None]
        removed = [f"#{n}" for n, v in fields.items() if v is None]
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removed) if removed else "")
        values = {f":{n}": v for n, v in fields.items() if v is not None}
        allowed = {f":was{i}": status for i, status in enumerate(statuses)}
        return self.dal.update_if(
            key,
            update,
            f"#status IN ({', '.join(allowed)})",
            {**values, **allowed},
        )

    def claim_waitpoint(
        self,
        tenant: str,
        waitpoint_id: str,
        *,
        status: Literal["completed", "failed"],
        result: Any,
        error: dict[str, Any] | None,
        now: str,
    ) -> WaitpointItem | None:
        """``pending`` → ``completed`` / ``failed``, only while pending and before the
        deadline; ``None`` otherwise."""
        raw = self.dal.update_if(
            keys.wait_key(tenant, waitpoint_id),
            "SET #status = :status, #result = :result, #error = :error, #completed_at = :now",
            "#status = :pending AND (attribute_not_exists(#deadline) OR #deadline > :now)",
            {
                ":status": status,
                ":result": result,
                ":error": error,
                ":pending": "pending",
                ":now": now,
            },
        )
        return WaitpointItem.from_item(raw) if raw else None

    def release_waitpoint(self, tenant: str, waitpoint_id: str, completed_at: str) -> bool:
        """Undo a claim whose SendTask* call failed for a retryable reason."""
        raw = self._clear_completion(
            tenant,
            waitpoint_id,
            "pending",
            "#status IN (:completed, :failed) AND #completed_at = :at",
            {":completed": "completed", ":failed": "failed", ":at": completed_at},
        )
        return raw is not None

    def expire_waitpoint(self, tenant: str, waitpoint_id: str) -> WaitpointItem | None:
        """Mark a waitpoint Step Functions no longer waits for ``expired``."""
        raw = self._clear_completion(
            tenant,
            waitpoint_id,
            "expired",
            "#status IN (:pending, :completed, :failed)",
            {":pending": "pending", ":completed": "completed", ":failed": "failed"},
        )
        return WaitpointItem.from_item(raw) if raw else None

    def _clear_completion(
        self,
        tenant: str,
        waitpoint_id: str,
        status: WaitpointStatus,
        condition: str,
        values: dict[str, Any],
    ) -> dict[str, Any] | None:
        """Set the waitpoint's ``status`` and forget its completion (result, error, time) when
        ``condition`` holds; the item afterwards, else ``None``."""
        return self.dal.update_if(
            keys.wait_key(tenant, waitpoint_id),
            f"SET #status = :{status} REMOVE #result, #error, #completed_at",
            condition,
            {f":{status}": status, **values},
        )


__all__ = ["ApprovalItem", "WaitDal", "WaitpointItem"]
