"""Data access for run admission: gates (singleton, concurrency), debounce and batches.

Every item lives under the tenant's prefix, in a partition per workflow and rendered key
(``<key id>`` is a hash of the key's text, so any text is a valid key part):

* gate ``P = TENANT#<t>#GATE#<workflow>#<key id>``: sk ``COUNT`` holds ``running`` (slots held)
  and ``queued`` (entries waiting); sk ``HOLD#<run id>`` one item per run holding a slot; sk
  ``QUEUE#<epoch ms, 13 digits>#<run id>`` one item per queued run, oldest first.
* debounce ``TENANT#<t>#DEBOUNCE#<workflow>#<key id>`` / ``PENDING``: the pending run of a
  key (its generation, first and due times, the last trigger and a change counter ``seq``).
* batch ``TENANT#<t>#BATCH#<workflow>#<key id>`` / ``OPEN``: the open batch (id, ``count``,
  opening time); its triggers under ``…#<batch id>`` with sk ``<epoch ms>#<uuid>``; sk
  ``MEMBER#<id>`` marks an idempotent trigger (its key's hash) that joined a batch.

Each change that must not race is one conditional write or one transaction: a slot is taken
only while ``running < limit`` and nobody queues, handed from an ending run to the head of the
queue in the same transaction that deletes the ending run's hold, and a trigger joins a batch
in the same transaction that counts it, so a full batch holds exactly its triggers.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from relayflow.dal import keys
from relayflow.dal.codec import serialize
from relayflow.dal.errors import ConditionFailed
from relayflow.dal.table import TableAccess

COUNT_SK = "COUNT"
HOLD_PREFIX = "HOLD#"
QUEUE_PREFIX = "QUEUE#"
PENDING_SK = "PENDING"
OPEN_SK = "OPEN"
MEMBER_PREFIX = "MEMBER#"
#: How long a batch remembers an idempotent trigger (an event or webhook delivery id) that
#: joined it, so a redelivery joins no batch twice: longer than EventBridge (24 h) or a
#: webhook sender retries.
MEMBER_RETENTION_SECONDS = 8 * 86_400
#: Admission items outlive what they describe by this long at most (TTL), so a key nobody
#: uses again leaves nothing behind.
RETENTION_SECONDS = 400 * 86_400
#: Rounds of read-and-retry a contended change takes before it gives up (and raises).
MAX_ROUNDS = 100


def gate_partition(tenant: str, workflow_id: str, key_id: str) -> str:
    return (
        f"{keys.tenant_prefix(tenant)}#GATE#{keys.part(workflow_id, 'workflow id')}"
        f"#{keys.part(key_id, 'key id')}"
    )


def debounce_key(tenant: str, workflow_id: str, key_id: str) -> keys.Key:
    pk = (
        f"{keys.tenant_prefix(tenant)}#DEBOUNCE#{keys.part(workflow_id, 'workflow id')}"
        f"#{keys.part(key_id, 'key id')}"
    )
    return {"pk": pk, "sk": PENDING_SK}


def batch_partition(tenant: str, workflow_id: str, key_id: str) -> str:
    return (
        f"{keys.tenant_prefix(tenant)}#BATCH#{keys.part(workflow_id, 'workflow id')}"
        f"#{keys.part(key_id, 'key id')}"
    )


def queue_sort(queued_ms: int, run_id: str) -> str:
    return f"{QUEUE_PREFIX}{int(queued_ms):013d}#{keys.part(run_id, 'run id')}"


def _hold_sk(run_id: str) -> str:
    """The sort key of the item that says ``run_id`` holds a slot of its gate."""
    return f"{HOLD_PREFIX}{keys.part(run_id, 'run id')}"


class AdmissionDal(TableAccess):
    """The admission items, through the table's :class:`Dal` (client, table, errors)."""

    # -- plumbing ----------------------------------------------------------------------------

    # -- gates -------------------------------------------------------------------------------

    def gate(self, tenant: str, workflow_id: str, key_id: str) -> dict[str, Any]:
        """The gate's counter (``running``, ``queued``; zeros when it has none)."""
        item = self.dal.get({"pk": gate_partition(tenant, workflow_id, key_id), "sk": COUNT_SK})
        return {"running": 0, "queued": 0, **(item or {})}

    def holders(self, tenant: str, workflow_id: str, key_id: str) -> list[str]:
        """The run ids holding a slot of the gate."""
        pk = gate_partition(tenant, workflow_id, key_id)
        return [str(item["run_id"]) for item in self.dal.query_items(pk, HOLD_PREFIX)]

    def queue(
        self, tenant: str, workflow_id: str, key_id: str, limit: int | None = None
    ) -> list[str]:
        """The run ids waiting at the gate, oldest first."""
        pk = gate_partition(tenant, workflow_id, key_id)
        return [str(item["run_id"]) for item in self.dal.query_items(pk, QUEUE_PREFIX, limit=limit)]

    def _hold(self, pk: str, tenant: str, run_id: str, now: int) -> dict[str, Any]:
        return {
            "Put": {
                "Item": serialize(
                    {
                        "pk": pk,
                        "sk": _hold_sk(run_id),
                        "type": "gate_hold",
                        "tenant": tenant,
                        "run_id": run_id,
                        "held_since": now,
                        "expires_at": now + RETENTION_SECONDS,
                    }
                ),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _unhold(self, pk: str, run_id: str) -> dict[str, Any]:
        return {
            "Delete": {
                "Key": serialize({"pk": pk, "sk": _hold_sk(run_id)}),
                "ConditionExpression": "attribute_exists(pk)",
            }
        }

    def _dequeue(self, pk: str, tenant: str, sk: str, now: int) -> list[dict[str, Any]]:
        """The changes that take the queue entry ``sk`` out: the entry and one from the count."""
        return [
            {
                "Delete": {
                    "Key": serialize({"pk": pk, "sk": sk}),
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
            self._count(
                pk, tenant, "ADD #queued :minus", "#queued > :zero", {":minus": -1, ":zero": 0}, now
            ),
        ]

    def _count(
        self,
        pk: str,
        tenant: str,
        expression: str,
        condition: str,
        values: dict[str, Any],
        now: int,
    ) -> dict[str, Any]:
        update = f"SET #type = :type, #tenant = :tenant, #exp = :exp {expression}"
        text = f"{update} {condition}"
        # DynamoDB refuses names a request does not use.
        used = {
            name: attribute
            for name, attribute in (("#running", "running"), ("#queued", "queued"))
            if name in text
        }
        return {
            "Update": {
                "Key": serialize({"pk": pk, "sk": COUNT_SK}),
                "UpdateExpression": update,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {
                    "#type": "type",
                    "#tenant": "tenant",
                    "#exp": "expires_at",
                    **used,
                },
                "ExpressionAttributeValues": serialize(
                    {":type": "gate", ":tenant": tenant, ":exp": now + RETENTION_SECONDS, **values}
                ),
            }
        }

    def take_slot(
        self, tenant: str, workflow_id: str, key_id: str, run_id: str, *, limit: int, now: int
    ) -> bool:
        """Hold a slot for ``run_id`` if fewer than ``limit`` are held and nobody queues (a
        newcomer never overtakes the queue)."""
        pk = gate_partition(tenant, workflow_id, key_id)
        count = self._count(
            pk,
            tenant,
            "ADD #running :one",
            "(attribute_not_exists(#running) OR #running < :limit) AND "
            "(attribute_not_exists(#queued) OR #queued <= :zero)",
            {":one": 1, ":limit": limit, ":zero": 0},
            now,
        )
        return self.dal.transact_if([count, self._hold(pk, tenant, run_id, now)])

    def enqueue(
        self,
        tenant: str,
        workflow_id: str,
        key_id: str,
        run_id: str,
        *,
        limit: int,
        now_ms: int,
        max_queued: int | None = None,
    ) -> bool:
        """Queue ``run_id`` while the gate is full or others queue (and fewer than
        ``max_queued`` wait); ``False`` when a slot freed meanwhile or the queue is full
        (read the gate to tell which)."""
        pk = gate_partition(tenant, workflow_id, key_id)
        now = now_ms // 1000
        condition = "(#running >= :limit OR #queued > :zero)"
        values: dict[str, Any] = {":one": 1, ":limit": limit, ":zero": 0}
        if max_queued is not None:
            condition += " AND (attribute_not_exists(#queued) OR #queued < :max)"
            values[":max"] = max_queued
        count = self._count(pk, tenant, "ADD #queued :one", condition, values, now)
        entry = {
            "Put": {
                "Item": serialize(
                    {
                        "pk": pk,
                        "sk": queue_sort(now_ms, run_id),
                        "type": "gate_queue",
                        "tenant": tenant,
                        "run_id": run_id,
                        "queued_ms": now_ms,
                        "expires_at": now + RETENTION_SECONDS,
                    }
                ),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        return self.dal.transact_if([count, entry])

    def release(
        self, tenant: str, workflow_id: str, key_id: str, run_id: str, *, now: int
    ) -> tuple[bool, str | None]:
        """Free ``run_id``'s slot: hand it to the oldest queued run (returned: it holds the
        slot now and must be started) or, with nobody queued, give it back. Returns
        ``(False, None)`` when ``run_id`` held no slot (released already). When ``run_id``
        itself is the oldest queued run (a duplicate start queued it while this request held
        its slot), it keeps the slot and leaves the queue: ``(True, run_id)``, to be started."""
        pk = gate_partition(tenant, workflow_id, key_id)
        for _ in range(MAX_ROUNDS):
            head = self.dal.query_items(pk, QUEUE_PREFIX, limit=1)
            if head and head[0]["run_id"] == run_id:
                # The run holding the slot is also the head of the queue: a duplicate start
                # queued it while this one held the slot. It keeps the slot; its queue
                # entry goes (one transaction may not touch its hold twice).
                entry = head[0]
                kept = self.dal.transact_if(
                    [
                        {
                            "ConditionCheck": {
                                "Key": serialize({"pk": pk, "sk": _hold_sk(run_id)}),
                                "ConditionExpression": "attribute_exists(pk)",
                            }
                        },
                        *self._dequeue(pk, tenant, entry["sk"], now),
                    ]
                )
                if kept:
                    return True, run_id
            elif head:
                entry = head[0]
                delete, count = self._dequeue(pk, tenant, entry["sk"], now)
                handed = self.dal.transact_if(
                    [
                        self._unhold(pk, run_id),
                        delete,
                        self._hold(pk, tenant, str(entry["run_id"]), now),
                        count,
                    ]
                )
                if handed:
                    return True, str(entry["run_id"])
            else:
                freed = self.dal.transact_if(
                    [
                        self._unhold(pk, run_id),
                        self._count(
                            pk,
                            tenant,
                            "ADD #running :minus",
                            "#running > :zero AND "
                            "(attribute_not_exists(#queued) OR #queued <= :zero)",
                            {":minus": -1, ":zero": 0},
                            now,
                        ),
                    ]
                )
                if freed:
                    return True, None
            if run_id not in self.holders(tenant, workflow_id, key_id):
                return False, None
            # Another release took that head, or someone queued meanwhile: look again.
        raise ConditionFailed(f"the gate of {workflow_id} stayed contended; retry the release")

    def hand_over(
        self,
        tenant: str,
        workflow_id: str,
        key_id: str,
        old_run_id: str,
        new_run_id: str,
        *,
        now: int,
    ) -> bool:
        """Move ``old_run_id``'s slot to ``new_run_id`` (singleton cancel_running)."""
        pk = gate_partition(tenant, workflow_id, key_id)
        return self.dal.transact_if(
            [self._unhold(pk, old_run_id), self._hold(pk, tenant, new_run_id, now)]
        )

    def drop_queued(self, tenant: str, workflow_id: str, key_id: str, run_id: str) -> bool:
        """Take ``run_id`` out of the queue (a queued run was cancelled)."""
        pk = gate_partition(tenant, workflow_id, key_id)
        for item in self.dal.query_items(pk, QUEUE_PREFIX):
            if item["run_id"] == run_id:
                return self.dal.transact_if(
                    self._dequeue(pk, tenant, item["sk"], int(item["queued_ms"]) // 1000)
                )
        return False

    # -- debounce ----------------------------------------------------------------------------

    def pending(self, tenant: str, workflow_id: str, key_id: str) -> dict[str, Any] | None:
        """The key's pending debounced run, if any."""
        return self.dal.get(debounce_key(tenant, workflow_id, key_id))

    def open_pending(
        self, tenant: str, workflow_id: str, key_id: str, values: dict[str, Any]
    ) -> bool:
        """Create the key's pending run; ``False`` when one exists."""
        item = {
            **debounce_key(tenant, workflow_id, key_id),
            "type": "debounce",
            "tenant": tenant,
            "seq": 1,
            **values,
        }
        return self.dal.put_if(item, "attribute_not_exists(pk)") is not None

    def push_pending(
        self, tenant: str, workflow_id: str, key_id: str, generation: str, values: dict[str, Any]
    ) -> bool:
        """Replace the trigger (and due time) of generation ``generation``; ``False`` when
        that generation has started (a new one must be opened)."""
        dal = self.dal
        names = {f"#v{i}": name for i, name in enumerate(values)}
        sets = ", ".join(f"#v{i} = :v{i}" for i in range(len(values)))
        try:
            dal.call(
                "update_item",
                TableName=dal.table_name,
                Key=serialize(debounce_key(tenant, workflow_id, key_id)),
                UpdateExpression=f"SET {sets} ADD #seq :one",
                ConditionExpression="#gen = :gen",
                ExpressionAttributeNames={**names, "#seq": "seq", "#gen": "generation"},
                ExpressionAttributeValues=serialize(
                    {
                        **{f":v{i}": v for i, v in enumerate(values.values())},
                        ":one": 1,
                        ":gen": generation,
                    }
                ),
            )
        except ConditionFailed:
            return False
        return True

    def close_pending(
        self, tenant: str, workflow_id: str, key_id: str, generation: str, seq: int
    ) -> bool:
        """Delete the pending run as read (generation and change counter); ``False`` when a
        trigger changed it since."""
        return self.dal.delete_if(
            debounce_key(tenant, workflow_id, key_id),
            "#gen = :gen AND #seq = :seq",
            {":gen": generation, ":seq": seq},
            names={"#gen": "generation", "#seq": "seq"},
        )

    # -- batches -----------------------------------------------------------------------------

    def open_batch(self, tenant: str, workflow_id: str, key_id: str) -> dict[str, Any] | None:
        """The key's open batch (``batch_id``, ``count``, ``opened_at``), if any."""
        return self.dal.get({"pk": batch_partition(tenant, workflow_id, key_id), "sk": OPEN_SK})

    def add_to_batch(
        self,
        tenant: str,
        workflow_id: str,
        key_id: str,
        *,
        seen: dict[str, Any] | None,
        new_batch_id: str,
        max_size: int,
        trigger: Any,
        entry_sk: str,
        now: int,
        member: str | None = None,
    ) -> tuple[str, int] | None:
        """Add ``trigger`` to the batch ``seen`` was read as, or open ``new_batch_id`` when
        there was none or it was full. Returns ``(batch id, count after)``, or ``None`` when
        the batch changed since it was read (read it again) or ``member`` (the id of an
        idempotent trigger) joined a batch already (:meth:`batch_member` tells which)."""
        pk = batch_partition(tenant, workflow_id, key_id)
        names = {"#id": "batch_id", "#count": "count"}
        if seen is not None and int(seen["count"]) < max_size:
            batch_id, count = str(seen["batch_id"]), int(seen["count"]) + 1
            head: dict[str, Any] = {
                "Update": {
                    "Key": serialize({"pk": pk, "sk": OPEN_SK}),
                    "UpdateExpression": "ADD #count :one",
                    "ConditionExpression": "#id = :id AND #count = :count",
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": serialize(
                        {":one": 1, ":id": batch_id, ":count": int(seen["count"])}
                    ),
                }
            }
        else:
            batch_id, count = new_batch_id, 1
            opened = {
                "pk": pk,
                "sk": OPEN_SK,
                "type": "batch",
                "tenant": tenant,
                "batch_id": batch_id,
                "count": 1,
                "opened_at": now,
                "expires_at": now + RETENTION_SECONDS,
            }
            head = {"Put": {"Item": serialize(opened)}}
            if seen is None:
                head["Put"]["ConditionExpression"] = "attribute_not_exists(pk)"
            else:
                head["Put"]["ConditionExpression"] = "#id = :id"
                head["Put"]["ExpressionAttributeNames"] = {"#id": "batch_id"}
                head["Put"]["ExpressionAttributeValues"] = serialize({":id": seen["batch_id"]})
        entry = {
            "Put": {
                "Item": serialize(
                    {
                        "pk": f"{pk}#{keys.part(batch_id, 'batch id')}",
                        "sk": entry_sk,
                        "type": "batch_entry",
                        "tenant": tenant,
                        "trigger": json.dumps(trigger, separators=(",", ":")),
                        "expires_at": now + RETENTION_SECONDS,
                    }
                )
            }
        }
        changes = [head, entry]
        if member is not None:
            joined = {
                "pk": pk,
                "sk": f"{MEMBER_PREFIX}{member}",
                "type": "batch_member",
                "tenant": tenant,
                "batch_id": batch_id,
                "position": count,
                "expires_at": now + MEMBER_RETENTION_SECONDS,
            }
            changes.append(
                {
                    "Put": {
                        "Item": serialize(joined),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
        if not self.dal.transact_if(changes):
            return None
        return batch_id, count

    def batch_member(
        self, tenant: str, workflow_id: str, key_id: str, member: str
    ) -> dict[str, Any] | None:
        """Where the idempotent trigger ``member`` joined (``batch_id``, ``position``), if
        it did."""
        pk = batch_partition(tenant, workflow_id, key_id)
        return self.dal.get({"pk": pk, "sk": f"{MEMBER_PREFIX}{member}"})

    def seal_batch(self, tenant: str, workflow_id: str, key_id: str, batch_id: str) -> bool:
        """Close the open batch ``batch_id`` to new triggers (its timeout ran out); ``False``
        when it is no longer the open one (it filled up, or was sealed already)."""
        return self.dal.delete_if(
            {"pk": batch_partition(tenant, workflow_id, key_id), "sk": OPEN_SK},
            "#id = :id",
            {":id": batch_id},
            names={"#id": "batch_id"},
        )

    def batch_triggers(
        self, tenant: str, workflow_id: str, key_id: str, batch_id: str
    ) -> list[Any]:
        """The triggers of a batch, in the order they arrived."""
        pk = f"{batch_partition(tenant, workflow_id, key_id)}#{keys.part(batch_id, 'batch id')}"
        return [json.loads(item["trigger"]) for item in self.dal.query_items(pk, "")]

    # -- schedule marks ----------------------------------------------------------------------

    def _mark_key(self, tenant: str, workflow_id: str, index: int) -> dict[str, str]:
        workflow = keys.part(workflow_id, "workflow id")
        return {"pk": f"{keys.tenant_prefix(tenant)}#SCHED#{workflow}#{int(index)}", "sk": "MARK"}

    def last_tick(self, tenant: str, workflow_id: str, index: int) -> str | None:
        """The latest scheduled time (``…Z``) of cron trigger ``index`` that started a run."""
        item = self.dal.get(self._mark_key(tenant, workflow_id, index))  # type: ignore[arg-type]
        return str(item["last_tick"]) if item else None

    def advance_tick(self, tenant: str, workflow_id: str, index: int, tick: str, now: int) -> None:
        """Move the mark forward to ``tick`` (never back: times of one format sort as text)."""
        dal = self.dal
        # A later tick may be recorded already: the mark stays.
        with contextlib.suppress(ConditionFailed):
            dal.call(
                "update_item",
                TableName=dal.table_name,
                Key=serialize(self._mark_key(tenant, workflow_id, index)),
                UpdateExpression="SET #tick = :tick, #type = :type, #tenant = :tenant, #exp = :exp",
                ConditionExpression="attribute_not_exists(#tick) OR #tick < :tick",
                ExpressionAttributeNames={
                    "#tick": "last_tick",
                    "#type": "type",
                    "#tenant": "tenant",
                    "#exp": "expires_at",
                },
                ExpressionAttributeValues=serialize(
                    {
                        ":tick": tick,
                        ":type": "schedule_mark",
                        ":tenant": tenant,
                        ":exp": now + RETENTION_SECONDS,
                    }
                ),
            )
