"""The definition format: models, loading, problems and the step graph.

Checking a definition (cross-field rules, limits, quotas) is :mod:`relayflow.validation`, which
imports this package; this package imports nothing above it.

Attributes load on first use (PEP 562), so a step function that needs one model class does
not import YAML and the expression language at cold start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relayflow import lazy_exports

if TYPE_CHECKING:
    from relayflow.definition.models import AVAILABLE_STEP_TYPES, STEP_TYPES, Workflow
    from relayflow.definition.problems import DefinitionError, Problem

_EXPORTS = {
    "AVAILABLE_STEP_TYPES": "relayflow.definition.models",
    "STEP_TYPES": "relayflow.definition.models",
    "Workflow": "relayflow.definition.models",
    "DefinitionError": "relayflow.definition.problems",
    "Problem": "relayflow.definition.problems",
}

__all__ = ["AVAILABLE_STEP_TYPES", "STEP_TYPES", "DefinitionError", "Problem", "Workflow"]


__getattr__ = lazy_exports(__name__, _EXPORTS)
