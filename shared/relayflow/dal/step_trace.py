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
from relayflow.dal.table import TableAccess


def trace_partition(tenant: str, execution: str) -> str:
    return f"{keys.tenant_prefix(tenant)}#STEPEV#{keys.part(execution, 'execution name')}"


class StepTraceDal(TableAccess):
    """Step traces, through the table's :class:`Dal`."""

    def states(self, tenant: str, execution: str) -> list[dict[str, Any]]:
        """Every trace of the execution (all pages, consistent)."""
        return self.dal.query_items(trace_partition(tenant, execution))

    def save(self, tenant: str, execution: str, state: str, trace: dict[str, Any]) -> bool:
        """Store ``trace`` (its ``last_event_id`` is the newest event it reflects) unless the
        stored one reflects that event or a newer one already; whether it was stored."""
        item = {
            **trace,
            "pk": trace_partition(tenant, execution),
            "sk": keys.part(state, "state"),
            "type": "step_trace",
        }
        stored = self.dal.put_if(
            item,
            "attribute_not_exists(#last) OR #last < :last",
            {":last": item["last_event_id"]},
            names={"#last": "last_event_id"},
        )
        return stored is not None

    def delete(self, tenant: str, execution: str, state: str) -> None:
        """Forget a trace (its state exited, or its execution ended)."""
        self.dal.delete({"pk": trace_partition(tenant, execution), "sk": keys.part(state, "state")})
