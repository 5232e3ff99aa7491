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
from relayflow.dal.errors import ConditionFailed
from relayflow.dal.table import Dal, deserialize, get_dal, serialize


def waits_partition(tenant: str, workflow_id: str, detail_type: str) -> str:
    digest = hashlib.sha256(detail_type.encode()).hexdigest()[:24]
    workflow = keys._part(workflow_id, "workflow id")
    return f"{keys.tenant_prefix(tenant)}#WAIT#EVENT.{workflow}.{digest}"


class EventWaitDal:
    """Event waits, through the table's :class:`Dal`."""

    def __init__(self, dal: Dal | None = None) -> None:
        self._dal = dal

    @property
    def dal(self) -> Dal:
        return self._dal or get_dal()

    def put(self, tenant: str, workflow_id: str, detail_type: str, item: dict[str, Any]) -> None:
        """Register (or re-register, for a retried step) one wait, ``item["wait_id"]``."""
        dal = self.dal
        record = {
            "pk": waits_partition(tenant, workflow_id, detail_type),
            "sk": keys._part(item["wait_id"], "wait id"),
            "type": "event_wait",
            "tenant": tenant,
            "workflow_id": workflow_id,
            **item,
        }
        dal._call("put_item", TableName=dal.table_name, Item=serialize(record))

    def waiting(self, tenant: str, workflow_id: str, detail_type: str) -> list[dict[str, Any]]:
        """Every wait of the workflow for ``detail_type`` (all pages, consistent)."""
        dal = self.dal
        params: dict[str, Any] = {
            "TableName": dal.table_name,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": "pk"},
            "ExpressionAttributeValues": serialize(
                {":pk": waits_partition(tenant, workflow_id, detail_type)}
            ),
            "ConsistentRead": True,
        }
        found: list[dict[str, Any]] = []
        while True:
            response = dal._call("query", **params)
            found.extend(deserialize(raw) for raw in response["Items"])
            if not response.get("LastEvaluatedKey"):
                return found
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def claim(self, item: dict[str, Any]) -> bool:
        """Delete the wait as read (same token); ``False`` when another event took it."""
        dal = self.dal
        try:
            dal._call(
                "delete_item",
                TableName=dal.table_name,
                Key=serialize({"pk": item["pk"], "sk": item["sk"]}),
                ConditionExpression="#token = :token",
                ExpressionAttributeNames={"#token": "task_token"},
                ExpressionAttributeValues=serialize({":token": item["task_token"]}),
            )
        except ConditionFailed:
            return False
        return True
