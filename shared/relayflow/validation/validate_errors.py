"""Validation rules of ``on_error`` (:mod:`relayflow.definition.errors_model`). Part of
:mod:`relayflow.validation.validate`'s one pass.

Rules:

* ``on-error-type``: only steps whose failure a Catch routes may declare it;
* ``on-error-scope``: only steps of the main flow (not inside a parallel branch or a for_each
  item: a parked run resumes, and a fallback is marked, in the run's own state document);
* ``on-error-conflict``: ``continue`` never fails, so an ``on_failure`` route beside it
  could never be taken;
* ``template``: the fallback output's templates (they may read ``error``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from relayflow.definition.errors_model import ON_ERROR_TYPES

if TYPE_CHECKING:
    from relayflow.definition.graph import StepGraph
    from relayflow.validation.context import CheckContext


def check_on_error(checker: CheckContext, graph: StepGraph, start_known: bool) -> None:
    """Report every misplaced or conflicting ``on_error`` (see the module docstring)."""
    main: set[str] = set()
    if start_known:
        scopes, _ = graph.scopes()
        main = set(scopes[0].steps) if scopes else set()
    for key, raw in checker.steps.items():
        on_error = raw.get("on_error")
        if not isinstance(on_error, Mapping):
            continue
        path = f"steps.{key}.on_error"
        step_type = raw.get("type")
        if step_type not in ON_ERROR_TYPES:
            checker.add(
                path,
                "on-error-type",
                f"a {step_type} step cannot declare on_error; it is for "
                f"{', '.join(ON_ERROR_TYPES)} steps",
            )
            continue
        if start_known and key not in main:
            checker.add(
                path,
                "on-error-scope",
                "on_error is for steps of the main flow, not inside a parallel branch or a "
                "for_each item (use on_failure there, or on_error on the parallel / for_each)",
            )
        action = on_error.get("action")
        if action == "continue" and raw.get("on_failure") is not None:
            checker.add(
                path,
                "on-error-conflict",
                "on_error continue never fails the step, so on_failure "
                f"'{raw.get('on_failure')}' could never be taken: remove one of them",
            )
        if action == "continue" and on_error.get("output") is not None:
            checker.check_template_field(f"{path}.output", on_error["output"])
