"""Checking a definition: every problem with its path and rule, in one pass.

The pydantic models (:mod:`relayflow.definition`) give the field-level rules; this package adds
the rules that span fields, the limits and the compiled quotas, so it sits above the definition
format, the compiler, the tools and the AI providers it asks.

Attributes load on first use (PEP 562), so importing one module of the package (for example
:mod:`relayflow.validation.children`) does not import the whole of validation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relayflow import lazy_exports

if TYPE_CHECKING:
    from relayflow.validation.validate import load_workflow, load_workflow_text, validate_data

_EXPORTS = {
    "load_workflow": "relayflow.validation.validate",
    "load_workflow_text": "relayflow.validation.validate",
    "validate_data": "relayflow.validation.validate",
}

__all__ = ["load_workflow", "load_workflow_text", "validate_data"]


__getattr__ = lazy_exports(__name__, _EXPORTS)
