"""Data access for ``wait_for_event``: the waits of one workflow for one detail-type.

One partition per tenant, workflow and detail-type, inside the waits' key space (so the
waitpoint function, which may write only ``TENANT#*#WAIT#*`` partitions, registers them):
``pk = TENANT#<t>#WAIT#EVENT.<workflow id>.<sha256(detail-type)[:24]>``, ``sk = <wait id>``.
A wait is completed once: the completer deletes it conditionally before it sends the token.
"""

from __future__ import annotations

import hashlib
from typing import Any

from relayflow.dal import keys
from relayflow.dal.table import TableAccess


def waits_partition(tenant: str, workflow_id: str, detail_type: str) -> str:
    digest = hashlib.sha256(detail_type.encode()).hexdigest()[:24]
    workflow = keys.part(workflow_id, "workflow id")
    return f"{keys.tenant_prefix(tenant)}#WAIT#EVENT.{workflow}.{digest}"


class EventWaitDal(TableAccess):
    """Event waits, through the table's :class:`Dal`."""

    def put(self, tenant: str, workflow_id: str, detail_type: str, item: dict[str, Any]) -> None:
        """Register (or re-register, for a retried step) one wait, ``item["wait_id"]``."""
        record = {
            "pk": waits_partition(tenant, workflow_id, detail_type),
            "sk": keys.part(item["wait_id"], "wait id"),
            "type": "event_wait",
            "tenant": tenant,
            "workflow_id": workflow_id,
            **item,
        }
        self.dal.put(record)

    def waiting(self, tenant: str, workflow_id: str, detail_type: str) -> list[dict[str, Any]]:
        """Every wait of the workflow for ``detail_type`` (all pages, consistent)."""
        return self.dal.query_items(waits_partition(tenant, workflow_id, detail_type))

    def claim(self, item: dict[str, Any]) -> bool:
        """Delete the wait as read (same token); ``False`` when another event took it."""
        return self.dal.delete_if(
            {"pk": item["pk"], "sk": item["sk"]},
            "#token = :token",
            {":token": item["task_token"]},
            names={"#token": "task_token"},
        )
