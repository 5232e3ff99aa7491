"""Express runs' deadlines: one marker per running Express run, so the maintenance sweep finds
the runs whose machine never recorded an end (``docs/engines.md``).

An Express execution has no status change events and cannot be described after the fact, so
nothing else would notice a run that died (timed out, or failed outside its Catch-all path).
Items: ``EXPRESS#DUE`` / ``<deadline>#<tenant>#<run id>``, written when the run starts,
deleted once the sweep settled the run. Deadlines sort as ISO-8601 UTC text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relayflow.dal import keys
from relayflow.dal.table import Dal, get_dal, serialize

DUE_PARTITION = "EXPRESS#DUE"


def due_key(deadline: str, tenant: str, run_id: str) -> keys.Key:
    return {
        "pk": DUE_PARTITION,
        "sk": f"{deadline}#{keys._part(tenant, 'tenant')}#{keys._part(run_id, 'run id')}",
    }


@dataclass(frozen=True)
class ExpressDeadline:
    """A running Express run and the time by which its machine must have ended."""

    deadline: str
    tenant: str
    run_id: str

    @classmethod
    def from_item(cls, raw: dict[str, Any]) -> ExpressDeadline:
        deadline, tenant, run_id = str(raw["sk"]).rsplit("#", 2)
        return cls(deadline, tenant, run_id)


class ExpressDeadlines:
    """The ``EXPRESS#DUE`` markers (the only code that touches them)."""

    def __init__(self, dal: Dal | None = None) -> None:
        self._dal = dal

    @property
    def dal(self) -> Dal:
        return self._dal or get_dal()

    def add(self, deadline: str, tenant: str, run_id: str) -> None:
        """Mark a started Express run (a repeated start writes the same marker)."""
        self.dal._put(dict(due_key(deadline, tenant, run_id)))

    def due(self, now_iso: str, limit: int) -> list[ExpressDeadline]:
        """Markers whose deadline passed at ``now_iso`` (all tenants), oldest first."""
        found: list[ExpressDeadline] = []
        for raw in self.dal._query(partition=DUE_PARTITION):
            item = ExpressDeadline.from_item(raw)
            if item.deadline > now_iso or len(found) >= limit:
                break
            found.append(item)
        return found

    def remove(self, item: ExpressDeadline) -> None:
        self.dal._call(
            "delete_item",
            TableName=self.dal.table_name,
            Key=serialize(due_key(item.deadline, item.tenant, item.run_id)),
        )


def step_records(dal: Dal, tenant: str, run_id: str) -> list[dict[str, Any]]:
    """The step results a run's acting steps recorded (``relayflow.steps.idempotency``), in
    key order: Powertools records with ``sk`` ``<step key>#<hash>``, ``status`` and ``data``."""
    return list(dal._query(partition=keys.step_results_partition(tenant, run_id)))
