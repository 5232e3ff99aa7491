"""Validation rule ``read-before-run``: a step reads ``steps.<b>`` although ``b`` never runs
before it. Part of :mod:`relayflow.validation.validate`'s one pass.

A step's output enters the state document when the step finishes, so a read of ``steps.b``
sees something only where some route leads from ``b`` to the reader (its ``on_success``, a
branch, an error route, a loop back). When none does, the read is empty in every run: a
mistake (usually a typo or a step wired in the wrong order) that would otherwise show only as
a run-time template error or a silent null.

Reads from inside a ``parallel`` branch or a ``for_each`` item count as reads by the
``parallel`` or ``for_each`` step that contains them, in ``b``'s scope. Reads of steps in
scopes that do not contain the reader (another branch, an item step from the main flow) and
of compensation steps are left to the other rules.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from relayflow.validation.context import TEMPLATE_FIELDS

if TYPE_CHECKING:
    from relayflow.definition.graph import Scope, StepGraph
    from relayflow.validation.context import CheckContext


def check_reads_before_run(checker: CheckContext, graph: StepGraph) -> None:
    """Every ``steps.<b>`` read of a reachable step that no route from ``b`` leads to."""
    _, reached_by = graph.scopes()
    scope_of = {key: found[0] for key, found in reached_by.items() if len(found) == 1}
    reach = graph.route_reach()

    for key, raw in checker.steps.items():
        if key not in scope_of:
            continue
        reported: set[str] = set()
        for path, read in _step_reads(key, raw):
            if read in reported or read not in scope_of:
                continue
            reader = _in_scope(key, scope_of[read], scope_of)
            if reader is None or reach.runs_before(read, reader):
                continue
            reported.add(read)
            where = "itself" if reader == read else f"'{reader}'"
            checker.add(
                path,
                "read-before-run",
                f"'{key}' reads steps.{read}, but '{read}' never runs before {where}: no "
                f"route leads from '{read}' to {where}, so the read is always empty",
            )


def _in_scope(key: str, scope: Scope, scope_of: Mapping[str, Scope]) -> str | None:
    """``key``, or the parallel / for_each step containing it that lies in ``scope``."""
    step: str | None = key
    while step is not None and step in scope_of:
        if scope_of[step] is scope:
            return step
        step = scope_of[step].owner
    return None


def _step_reads(key: str, raw: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(path, step key)`` for each ``steps.<key>`` a step's templates and expressions read."""
    from relayflow.expressions import expression_paths, template_expressions

    sources: list[tuple[str, list[str]]] = []
    step_type = str(raw.get("type"))
    if step_type == "condition" and isinstance(raw.get("expression"), str):
        sources.append((f"steps.{key}.expression", [raw["expression"]]))
    for name in TEMPLATE_FIELDS.get(step_type, ()):
        value = raw.get(name)
        if value is None or isinstance(value, int):
            continue
        try:
            sources.append((f"steps.{key}.{name}", list(template_expressions(value))))
        except ValueError:
            continue  # a template problem, reported by its own rule
    for path, expressions in sources:
        for src in expressions:
            try:
                refs = expression_paths(src)
            except ValueError:
                continue
            for ref in refs:
                if len(ref) > 1 and ref[0] == "steps" and isinstance(ref[1], str):
                    yield path, ref[1]
