"""The definition format: models, loading, validation and the step graph."""

from relayflow.definition.models import AVAILABLE_STEP_TYPES, STEP_TYPES, Workflow
from relayflow.definition.problems import DefinitionError, Problem
from relayflow.definition.validate import load_workflow, load_workflow_text, validate_data

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
