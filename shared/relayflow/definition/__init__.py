"""The definition format: models, loading, validation and the step graph.

Attributes load on first use (PEP 562), so a step function that needs one model class does
not import validation, YAML and the expression language at cold start.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from relayflow.definition.models import AVAILABLE_STEP_TYPES, STEP_TYPES, Workflow
    from relayflow.definition.problems import DefinitionError, Problem
    from relayflow.definition.validate import load_workflow, load_workflow_text, validate_data

_EXPORTS = {
    "AVAILABLE_STEP_TYPES": "relayflow.definition.models",
    "STEP_TYPES": "relayflow.definition.models",
    "Workflow": "relayflow.definition.models",
    "DefinitionError": "relayflow.definition.problems",
    "Problem": "relayflow.definition.problems",
    "load_workflow": "relayflow.definition.validate",
    "load_workflow_text": "relayflow.definition.validate",
    "validate_data": "relayflow.definition.validate",
}

__all__ = [
    "AVAILABLE_STEP_TYPES",
    "STEP_TYPES",
    "DefinitionError",
    "Problem",
    "Workflow",
    "load_workflow",
    "load_workflow_text",
    "validate_data",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'relayflow.definition' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
