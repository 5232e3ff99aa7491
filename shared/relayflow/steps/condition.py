"""The condition step, for expressions that do not compile to a native Choice state."""

from __future__ import annotations

from typing import Any

from relayflow.errors import InvalidArgsError
from relayflow.expressions import evaluate_condition
from relayflow.steps.task import parse_task, result


def run(event: Any) -> dict[str, Any]:
    """Evaluate the step's CEL expression against the state document.

    Returns ``{"output": {"result": bool}}``; the compiled Choice that follows routes on it.
    """
    task = parse_task(event)
    expression = task.step.config.get("expression")
    if not isinstance(expression, str):
        raise InvalidArgsError(f"condition step '{task.step.key}' has no expression")
    return result({"result": evaluate_condition(expression, task.doc)}, task=task)
