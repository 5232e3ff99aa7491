"""The transform step, for mappings that do not compile to a native Pass state."""

from __future__ import annotations

from typing import Any

from relayflow.expressions import render
from relayflow.steps.task import parse_task, result


def run(event: Any) -> dict[str, Any]:
    """Render the step's mapping against the state document; the result is its output.

    With ``input_check: {workflow_id, schema}`` in the config (a sub_workflow step's
    ``<key>.check_input`` state), the rendered mapping is the child's input: one that breaks
    the child's ``input_schema`` raises ``Relayflow.InvalidInput`` naming each violation."""
    task = parse_task(event)
    rendered = render(task.step.config.get("mapping"), task.doc)
    check = task.step.config.get("input_check")
    if isinstance(check, dict):
        _check_child_input(check, rendered)
        return result({"checked": True})
    return result(rendered, task=task)


def _check_child_input(check: dict[str, Any], rendered: Any) -> None:
    from relayflow.definition.input_schema import describe, input_violations
    from relayflow.errors import InvalidRunInput

    violations = input_violations(check.get("schema"), rendered)
    if violations:
        raise InvalidRunInput(
            f"the input of workflow {check.get('workflow_id')!r} does not match its "
            f"input_schema: {describe(violations)}"
        )
