"""The transform step, for mappings that do not compile to a native Pass state."""

from __future__ import annotations

from typing import Any

from relayflow.expressions import render
from relayflow.steps.task import parse_task, result


def run(event: Any) -> dict[str, Any]:
    """Render the step's mapping against the state document; the result is its output."""
    task = parse_task(event)
    return result(render(task.step.config.get("mapping"), task.doc), task=task)
