"""Data access for the run dead-letter queue (DLQ): entries, retry schedule and depth.

A failed or timed-out run is archived as one entry, found by its run id:

* entry: ``TENANT#<t>#DLQ#<run id>`` / ``DLQ``; GSI1 ``TENANT#<t>#DLQS`` /
  ``<archived at>#<run id>``;
* due retry: ``DLQ#DUE`` / ``<due at>#<t>#<run id>``;
* depth counter: ``DLQ#STATS`` / ``DEPTH``.

An entry is ``pending`` (waiting for a retry: automatic when it holds a *due retry* item, manual
otherwise), ``retrying`` (a new execution of the run is under way), ``retried`` (that execution
succeeded), ``exhausted`` (its automatic retries are used up; a manual retry is still allowed) or
``discarded``. The *due retry* items of all tenants share one partition sorted by due time, so
the maintenance function finds what is due with one Query; each names the entry it is for.
The depth counter counts entries that are neither ``retried`` nor ``discarded``.

Every transition is a conditional write (in a transaction with the items it moves), so two
maintenance runs, or a maintenance run and a manual retry, never start the same retry twice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from relayflow.dal import keys
from relayflow.dal.codec import alias_names, serialize
from relayflow.dal.items import ItemModel
from relayflow.dal.table import TableAccess

DLQ_SK = "DLQ"
DUE_PARTITION = "DLQ#DUE"
STATS_KEY: keys.Key = {"pk": "DLQ#STATS", "sk": "DEPTH"}

DlqStatus = Literal["pending", "retrying", "retried", "exhausted", "discarded"]
DLQ_STATUSES: tuple[str, ...] = ("pending", "retrying", "retried", "exhausted", "discarded")
#: Statuses from which a retry may start.
RETRYABLE_STATUSES: tuple[str, ...] = ("pending", "exhausted")
_PLACEHOLDER = re.compile(r"^#[vx]\d+$")


def entry_key(tenant: str, run_id: str) -> keys.Key:
    return {"pk": f"{keys.tenant_prefix(tenant)}#DLQ#{keys.part(run_id, 'run id')}", "sk": DLQ_SK}


def entries_partition(tenant: str) -> str:
    """GSI1 partition of a tenant's DLQ entries (sorted by archive time, then run id)."""
    return f"{keys.tenant_prefix(tenant)}#DLQS"


def due_key(due_at: str, tenant: str, run_id: str) -> keys.Key:
    return {"pk": DUE_PARTITION, "sk": f"{due_at}#{tenant}#{keys.part(run_id, 'run id')}"}


class DlqEntry(ItemModel):
    """One archived run: what is needed to understand it and to run it again."""

    kind: ClassVar[str] = "dlq_entry"

    tenant: str
    run_id: str
    workflow_id: str
    version: int | None = None
    trigger_type: str = "api"
    input: str | None = Field(None, description="The run's trigger payload, as JSON.")
    status: DlqStatus = "pending"
    run_status: str = Field(description="failed or timed_out: how the last execution ended.")
    error: str | None = None
    cause: str | None = None
    failing_step: str | None = None
    outputs: str | None = Field(
        None, description="Outputs of the steps that succeeded, as JSON (left out when large)."
    )
    transient: bool = Field(description="Whether the error may pass on its own (auto-retried).")
    attempts: int = Field(0, description="Retries started (automatic and manual).")
    auto_attempts: int = Field(0, description="Automatic retries started.")
    archived_at: str
    updated_at: str
    last_failed_at: str
    last_execution_arn: str | None = None
    last_retry_at: str | None = None
    last_retry_by: Literal["auto", "manual"] | None = None
    next_retry_at: str | None = Field(None, description="When the next automatic retry is due.")
    resolved_at: str | None = None
    expires_at: int | None = Field(None, description="TTL: epoch seconds.")

    def key(self) -> keys.Key:
        return entry_key(self.tenant, self.run_id)

    def index_keys(self) -> dict[str, str]:
        return {
            "gsi1pk": entries_partition(self.tenant),
            "gsi1sk": f"{self.archived_at}#{self.run_id}",
        }


class DueRetry(ItemModel):
    """An automatic retry that is due at ``due_at`` (in the shared due partition)."""

    kind: ClassVar[str] = "dlq_due"

    tenant: str
    run_id: str
    due_at: str
    expires_at: int | None = None

    def key(self) -> keys.Key:
        return due_key(self.due_at, self.tenant, self.run_id)


class DlqDal(TableAccess):
    """DLQ reads and conditional writes through the table's :class:`Dal`. Writes return
    whether their condition held."""

    def _update_op(
        self,
        key: keys.Key,
        expression: str,
        condition: str,
        values: Mapping[str, Any],
    ) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.dal.table_name,
                "Key": serialize(key),
                "UpdateExpression": expression,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": _names(expression, condition),
                "ExpressionAttributeValues": serialize(values),
            }
        }

    def _depth_op(self, change: int) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.dal.table_name,
                "Key": serialize(STATS_KEY),
                "UpdateExpression": "ADD #depth :change",
                "ExpressionAttributeNames": {"#depth": "depth"},
                "ExpressionAttributeValues": serialize({":change": change}),
            }
        }

    def _put_due_op(self, due: DueRetry) -> dict[str, Any]:
        return {"Put": {"TableName": self.dal.table_name, "Item": serialize(due.to_item())}}

    def _delete_due_op(self, entry: DlqEntry, *, must_exist: bool) -> dict[str, Any]:
        assert entry.next_retry_at is not None
        op: dict[str, Any] = {
            "TableName": self.dal.table_name,
            "Key": serialize(due_key(entry.next_retry_at, entry.tenant, entry.run_id)),
        }
        if must_exist:
            op["ConditionExpression"] = "attribute_exists(pk)"
        return {"Delete": op}

    def _write_over_retrying(self, entry: DlqEntry, execution_arn: str | None) -> bool:
        """Store ``entry`` (all but its identity, and its due retry when it has one) while the
        stored entry is still ``retrying`` ``execution_arn``."""
        values = entry.to_item()
        sets = {
            k: v
            for k, v in values.items()
            if k not in ("pk", "sk", "gsi1pk", "gsi1sk", "tenant", "run_id", "archived_at")
        }
        expression, names, vals = _set_expression(sets, remove=_absent(entry))
        condition = "#status = :retrying AND #last_execution_arn = :arn"
        vals.update({":retrying": "retrying", ":arn": execution_arn})
        op = self._update_op(entry.key(), expression, condition, vals)
        op["Update"]["ExpressionAttributeNames"].update(names)
        ops = [op]
        if entry.next_retry_at:
            ops.append(self._put_due_op(_due_of(entry)))
        return self.dal.transact_if(ops)

    # -- reads -------------------------------------------------------------------------------

    def get(self, tenant: str, run_id: str) -> DlqEntry | None:
        raw = self.dal.get(entry_key(tenant, run_id))
        return DlqEntry.from_item(raw) if raw else None

    def list_entries(
        self, tenant: str, *, status: str | None, limit: int, next_token: str | None
    ) -> tuple[list[DlqEntry], str | None]:
        """A tenant's entries, newest first, optionally of one status."""
        return self.dal.page(
            DlqEntry.from_item,
            partition=entries_partition(tenant),
            limit=limit,
            next_token=next_token,
            forward=False,
            status=status,
        )

    def due(self, now_iso: str, limit: int) -> list[DueRetry]:
        """Automatic retries due at or before ``now_iso`` (all tenants), oldest first."""
        return self.dal.due_items(
            DUE_PARTITION, DueRetry.from_item, lambda item: item.due_at, now_iso, limit
        )

    def depth(self) -> int:
        raw = self.dal.get(STATS_KEY)
        return int(raw.get("depth", 0)) if raw else 0

    # -- writes ------------------------------------------------------------------------------

    def archive(self, entry: DlqEntry) -> bool:
        """Write a new entry (and its due retry, when ``entry.next_retry_at`` is set);
        ``False`` when the run is archived already."""
        ops = [
            {
                "Put": {
                    "TableName": self.dal.table_name,
                    "Item": serialize(entry.to_item()),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            self._depth_op(1),
        ]
        if entry.next_retry_at:
            ops.append(self._put_due_op(_due_of(entry)))
        return self.dal.transact_if(ops)

    def record_failure(self, entry: DlqEntry, *, execution_arn: str) -> bool:
        """A retry's execution failed again: store ``entry`` (its new status, error and next
        retry) while the entry is still ``retrying`` that execution."""
        return self._write_over_retrying(entry, execution_arn)

    def claim_retry(
        self,
        entry: DlqEntry,
        *,
        execution_arn: str,
        by: Literal["auto", "manual"],
        now_iso: str,
    ) -> DlqEntry | None:
        """Mark ``entry`` ``retrying`` ``execution_arn``, on the condition that it is still as
        read (same status and attempt count). An automatic retry also takes its due item, on
        the condition that it still exists (so one claim wins); a manual one drops it. Returns
        the entry afterwards, or ``None`` when another caller changed it first."""
        updated = entry.model_copy(
            update={
                "status": "retrying",
                "attempts": entry.attempts + 1,
                "auto_attempts": entry.auto_attempts + (1 if by == "auto" else 0),
                "last_execution_arn": execution_arn,
                "last_retry_at": now_iso,
                "last_retry_by": by,
                "next_retry_at": None,
                "updated_at": now_iso,
            }
        )
        expression = (
            "SET #status = :retrying, #attempts = :attempts, #auto_attempts = :auto, "
            "#last_execution_arn = :arn, #last_retry_at = :now, #last_retry_by = :by, "
            "#updated_at = :now REMOVE #next_retry_at"
        )
        condition = "#status = :status AND #attempts = :before"
        values = {
            ":retrying": "retrying",
            ":attempts": updated.attempts,
            ":auto": updated.auto_attempts,
            ":arn": execution_arn,
            ":now": now_iso,
            ":by": by,
            ":status": entry.status,
            ":before": entry.attempts,
        }
        ops = [self._update_op(entry.key(), expression, condition, values)]
        if entry.next_retry_at:
            ops.append(self._delete_due_op(entry, must_exist=by == "auto"))
        return updated if self.dal.transact_if(ops) else None

    def release_retry(self, claimed: DlqEntry, previous: DlqEntry) -> bool:
        """Undo :meth:`claim_retry` when the retry could not start: the entry (and its due
        item) as they were."""
        return self._write_over_retrying(previous, claimed.last_execution_arn)

    def resolve(self, tenant: str, run_id: str, *, execution_arn: str, now_iso: str) -> bool:
        """The retry ``execution_arn`` succeeded: the entry is ``retried`` (and leaves the
        depth)."""
        expression = "SET #status = :retried, #resolved_at = :now, #updated_at = :now"
        condition = "#status = :retrying AND #last_execution_arn = :arn"
        values = {
            ":retried": "retried",
            ":now": now_iso,
            ":retrying": "retrying",
            ":arn": execution_arn,
        }
        return self.dal.transact_if(
            [
                self._update_op(entry_key(tenant, run_id), expression, condition, values),
                self._depth_op(-1),
            ]
        )

    def clear_due(self, tenant: str, run_id: str, due_at: str) -> bool:
        """Forget the automatic retry due at ``due_at`` (the entry stays as it is otherwise),
        while the entry still names it."""
        op = self._update_op(
            entry_key(tenant, run_id),
            "REMOVE #next_retry_at",
            "#next_retry_at = :due",
            {":due": due_at},
        )
        return self.dal.transact_if([op])

    def discard(self, entry: DlqEntry, *, now_iso: str) -> bool:
        """Give up on ``entry`` (``pending`` or ``exhausted``): ``discarded``, its due retry
        dropped, out of the depth."""
        expression = (
            "SET #status = :discarded, #resolved_at = :now, #updated_at = :now "
            "REMOVE #next_retry_at"
        )
        condition = "#status = :status AND #attempts = :attempts"
        values = {
            ":discarded": "discarded",
            ":now": now_iso,
            ":status": entry.status,
            ":attempts": entry.attempts,
        }
        ops = [self._update_op(entry.key(), expression, condition, values), self._depth_op(-1)]
        if entry.next_retry_at:
            ops.append(self._delete_due_op(entry, must_exist=False))
        return self.dal.transact_if(ops)


def _due_of(entry: DlqEntry) -> DueRetry:
    assert entry.next_retry_at is not None
    return DueRetry(
        tenant=entry.tenant,
        run_id=entry.run_id,
        due_at=entry.next_retry_at,
        expires_at=entry.expires_at,
    )


def _absent(entry: DlqEntry) -> tuple[str, ...]:
    """The optional fields ``entry`` leaves empty (removed when it is written over)."""
    return tuple(
        name
        for name, value in entry.model_dump().items()
        if value is None and name not in ("version",)
    )


def _set_expression(
    values: Mapping[str, Any], *, remove: tuple[str, ...] = ()
) -> tuple[str, dict[str, str], dict[str, Any]]:
    names: dict[str, str] = {}
    vals: dict[str, Any] = {}
    sets = []
    for i, (attr, value) in enumerate(values.items()):
        names[f"#v{i}"] = attr
        vals[f":v{i}"] = value
        sets.append(f"#v{i} = :v{i}")
    expression = "SET " + ", ".join(sets)
    removed = [attr for attr in remove if attr not in values]
    if removed:
        for i, attr in enumerate(removed):
            names[f"#x{i}"] = attr
        expression += " REMOVE " + ", ".join(f"#x{i}" for i in range(len(removed)))
    return expression, names, vals


def _names(*expressions: str) -> dict[str, str]:
    """``#name`` → ``name`` for every alias in the expressions, except the ``#v0``/``#x0``
    placeholders that :func:`_set_expression` names itself."""
    return {
        alias: name
        for alias, name in alias_names(*expressions).items()
        if not _PLACEHOLDER.match(alias)
    }


__all__ = [
    "DLQ_STATUSES",
    "RETRYABLE_STATUSES",
    "DlqDal",
    "DlqEntry",
    "DueRetry",
]
