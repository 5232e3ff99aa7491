"""The tool step: one call of a catalogue tool with args rendered from the state document."""

from __future__ import annotations

from typing import Any

from relayflow.errors import InvalidArgsError
from relayflow.expressions import render
from relayflow.steps.effects import Effects
from relayflow.steps.task import parse_task


def run(event: Any, effects: Effects) -> dict[str, Any]:
    """Render ``config.args`` against the document, call ``config.tool`` through
    ``effects``; the tool's result is the step's output. HTTP tools use the declaration
    baked in ``config.http_tool``. With ``config.breaker`` the call goes through the tenant's
    ``tool:<tool>`` circuit breaker (:mod:`relayflow.reliability.breakers`):
    ``Relayflow.CircuitOpen`` while it is open. In a dry run the call is only recorded
    (:mod:`relayflow.steps.dry_run`), unless the step says ``dry_run: read``."""
    task = parse_task(event)
    config = task.step.config
    tool = config.get("tool")
    if not isinstance(tool, str) or not tool:
        raise InvalidArgsError(f"step {task.step.key!r} names no tool", step=task.step.key)
    return effects.tool_step(task, tool, render(config.get("args", {}), task.doc))
