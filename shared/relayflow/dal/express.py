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
from relayflow.dal.table import Dal, TableAccess

DUE_PARTITION = "EXPRESS#DUE"


def due_key(deadline: str, tenant: str, run_id: str) -> keys.Key:
    return {
        "pk": DUE_PARTITION,
        "sk": f"{deadline}#{keys.part(tenant, 'tenant')}#{keys.part(run_id, 'run id')}",
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


class ExpressDeadlines(TableAccess):
    """The ``EXPRESS#DUE`` markers (the only code that touches them)."""

    def add(self, deadline: str, tenant: str, run_id: str) -> None:
        """Mark a started Express run (a repeated start writes the same marker)."""
        self.dal.put(dict(due_key(deadline, tenant, run_id)))

    def due(self, now_iso: str, limit: int) -> list[ExpressDeadline]:
        """Markers whose deadline passed at ``now_iso`` (all tenants), oldest first."""
        return self.dal.due_items(
            DUE_PARTITION, ExpressDeadline.from_item, lambda item: item.deadline, now_iso, limit
        )

    def remove(self, item: ExpressDeadline) -> None:
        self.dal.delete(due_key(item.deadline, item.tenant, item.run_id))


def step_records(dal: Dal, tenant: str, run_id: str) -> list[dict[str, Any]]:
    """The step results a run's acting steps recorded (``relayflow.steps.idempotency``), in
    key order: Powertools records with ``sk`` ``<step key>#<hash>``, ``status`` and ``data``."""
    return list(dal.query(partition=keys.step_results_partition(tenant, run_id)))
