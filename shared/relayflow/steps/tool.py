"""The tool step: one call of a catalogue tool with args rendered from the state document."""

from __future__ import annotations

from typing import Any

from relayflow.errors import InvalidArgsError
from relayflow.expressions import render
from relayflow.steps.task import parse_task, result
from relayflow.tools.catalogue import run_tool


def run(event: Any) -> dict[str, Any]:
    """Render ``config.args`` against the document, call ``config.tool``; the tool's result
    is the step's output. HTTP tools use the declaration baked in ``config.http_tool``."""
    task = parse_task(event)
    config = task.step.config
    tool = config.get("tool")
    if not isinstance(tool, str) or not tool:
        raise InvalidArgsError(f"step {task.step.key!r} names no tool", step=task.step.key)
    args = render(config.get("args", {}), task.doc)
    output = run_tool(tool, args, doc=task.doc, http_tool=config.get("http_tool"))
    return result(output, task=task)
