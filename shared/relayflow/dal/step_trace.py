"""Data access for per-step lifecycle events: where each state of an execution stands.

CloudWatch Logs delivers an execution's log records in batches, and a step's entry, its
attempts and its exit may arrive in different ones. The step-events function
(:mod:`relayflow.control.step_events`) keeps one small item per open state entry so that an
exit can say how long the step took and how many attempts it made:
``pk = TENANT#<t>#STEPEV#<execution name>``, ``sk = <state name>@<entry event id>`` (and
``<step>@carry`` across a linear retry's wait). An item is deleted when its state exits, and
expires with the run (``expires_at``) otherwise. A write is conditional on the item's
``last_event_id`` being older than the event it applies, so a redelivered batch never moves a
step backwards.
"""

from __future__ import annotations

from typing import Any

from relayflow.dal import keys
from relayflow.dal.errors import ConditionFailed
from relayflow.dal.table import Dal, deserialize, get_dal, serialize


def trace_partition(tenant: str, execution: str) -> str:
    return f"{keys.tenant_prefix(tenant)}#STEPEV#{keys._part(execution, 'execution name')}"


class StepTraceDal:
    """Step traces, through the table's :class:`Dal`."""

    def __init__(self, dal: Dal | None = None) -> None:
        self._dal = dal

    @property
    def dal(self) -> Dal:
        return self._dal or get_dal()

    def states(self, tenant: str, execution: str) -> list[dict[str, Any]]:
        """Every trace of the execution (all pages, consistent)."""
        dal = self.dal
        params: dict[str, Any] = {
            "TableName": dal.table_name,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": "pk"},
            "ExpressionAttributeValues": serialize({":pk": trace_partition(tenant, execution)}),
            "ConsistentRead": True,
        }
        found: list[dict[str, Any]] = []
        while True:
            response = dal._call("query", **params)
            found.extend(deserialize(raw) for raw in response["Items"])
            if not response.get("LastEvaluatedKey"):
                return found
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def save(self, tenant: str, execution: str, state: str, trace: dict[str, Any]) -> bool:
        """Store ``trace`` (its ``last_event_id`` is the newest event it reflects) unless the
        stored one reflects that event or a newer one already; whether it was stored."""
        dal = self.dal
        item = {
            **trace,
            "pk": trace_partition(tenant, execution),
            "sk": keys._part(state, "state"),
            "type": "step_trace",
        }
        try:
            dal._call(
                "put_item",
                TableName=dal.table_name,
                Item=serialize(item),
                ConditionExpression="attribute_not_exists(#last) OR #last < :last",
                ExpressionAttributeNames={"#last": "last_event_id"},
                ExpressionAttributeValues=serialize({":last": item["last_event_id"]}),
            )
        except ConditionFailed:
            return False
        return True

    def delete(self, tenant: str, execution: str, state: str) -> None:
        """Forget a trace (its state exited, or its execution ended)."""
        dal = self.dal
        key = {"pk": trace_partition(tenant, execution), "sk": keys._part(state, "state")}
        dal._call("delete_item", TableName=dal.table_name, Key=serialize(key))
