"""What a local execution did, read from its Step Functions history.

:class:`ExecutionRecord` is the result of :meth:`LocalRuntime.run`/``wait``: status, output,
error, the raw history events (JSON-serialisable) and one :class:`StateRun` per state entered.
State runs are generic (by state name); callers map names to their own concepts.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from relayflow.executions.history import (
    StateRun,
    build_state_runs,
    millis_between,
    parse_json,
    parse_time,
)

__all__ = ["ExecutionRecord", "StateRun", "build_state_runs", "parse_json", "parse_time"]


@dataclass
class ExecutionRecord:
    """The outcome of one execution, as the local runtime observed it."""

    execution_arn: str
    name: str
    state_machine_arn: str
    status: str
    input: Any = None
    output: Any = None
    error: str | None = None
    cause: str | None = None
    started_at: datetime.datetime | None = None
    stopped_at: datetime.datetime | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    states: list[StateRun] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return self.status == "SUCCEEDED"

    @property
    def duration_ms(self) -> float | None:
        return millis_between(self.started_at, self.stopped_at)

    def runs(self, name: str) -> list[StateRun]:
        """Every entry into the state ``name``, in order."""
        return [run for run in self.states if run.name == name]

    def state(self, name: str) -> StateRun:
        """The last entry into the state ``name`` (KeyError when it never ran)."""
        runs = self.runs(name)
        if not runs:
            raise KeyError(f"state {name!r} never ran; ran: {[r.name for r in self.states]}")
        return runs[-1]

    def event_types(self) -> list[str]:
        return [str(event["type"]) for event in self.events]

    def to_dict(self) -> dict[str, Any]:
        return {
            "execution_arn": self.execution_arn,
            "name": self.name,
            "state_machine_arn": self.state_machine_arn,
            "status": self.status,
            "input": self.input,
            "output": self.output,
            "error": self.error,
            "cause": self.cause,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "stopped_at": self.stopped_at.isoformat() if self.stopped_at else None,
            "duration_ms": self.duration_ms,
            "states": [run.to_dict() for run in self.states],
            "events": self.events,
        }
