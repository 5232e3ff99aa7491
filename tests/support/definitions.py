"""A one-step workflow definition and the problems validation finds in a definition, for unit
tests of one validation rule.

On pytest's ``pythonpath`` (pyproject.toml), so any test imports it by name.
"""

from __future__ import annotations

from typing import Any


def noop_workflow(workflow_id: str = "wf", **extra: Any) -> dict[str, Any]:
    """A definition of one ``noop`` step ``a``, with ``extra`` top-level fields."""
    return {"id": workflow_id, "start": "a", "steps": {"a": {"type": "noop"}}, **extra}


def validation_problems(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    """What :func:`relayflow.validation.validate_data` finds: ``(path, rule, message)`` each."""
    from relayflow.validation import validate_data

    _, found = validate_data(data)
    return [(p.path, p.rule, p.message) for p in found]
