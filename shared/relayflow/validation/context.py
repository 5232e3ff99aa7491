"""What every rule of the one validation pass shares: the definition being checked, the
problems found so far, and the template and expression checks the rules apply to fields.

:class:`relayflow.validation.validate.Checker` runs the pass; the rule modules
(``validate_ai``, ``validate_compensation``, ``validate_errors``, ``validate_for_each``,
``validate_reads``) take a :class:`CheckContext` and report through it, so none of them imports
the pass that calls it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from relayflow.definition.problems import Problem
from relayflow.document import ROOTS
from relayflow.expressions import (
    ExpressionSyntaxError,
    TemplateSyntaxError,
    check_template,
    expression_paths,
    template_expressions,
)
from relayflow.validation.hints import did_you_mean
from relayflow.validation.validate_functions import known_functions, unknown_functions

#: Fields of each step type that hold templates (validated and reference-checked).
TEMPLATE_FIELDS: dict[str, tuple[str, ...]] = {
    "transform": ("mapping",),
    "delay": ("seconds", "until"),
    "for_each": ("items",),
    "tool": ("args", "dry_run_output"),
    "agent": ("prompt", "system"),
    "llm_batch": ("prompt", "system", "dry_run_output"),
    "sub_workflow": ("input",),
    "webhook_out": ("url", "headers", "body", "dry_run_output"),
    "approval": ("title", "prompt", "description"),
    "custom": ("url", "headers", "dry_run_output"),
    "code": ("input",),
    "waitpoint": ("idempotency_key",),
}


class CheckContext:
    """One definition under check: its raw data, its steps by key (a step that is not a
    mapping reads as ``{}``: the model reports it) and the problems found, in order."""

    def __init__(
        self, data: Mapping[str, Any], file: str | None, engine_version: str | None = None
    ) -> None:
        self.data = data
        self.file = file
        self.engine_version = engine_version
        self.problems: list[Problem] = []
        raw_steps = data.get("steps")
        self.steps: dict[str, Mapping[str, Any]] = {
            str(k): (v if isinstance(v, Mapping) else {})
            for k, v in (raw_steps.items() if isinstance(raw_steps, Mapping) else [])
        }

    def add(self, path: str, rule: str, message: str) -> None:
        self.problems.append(Problem(self.file, path, rule, message))

    def check_expression_refs(
        self, path: str, expressions: Iterable[str], roots: tuple[str, ...] = ROOTS
    ) -> None:
        for src in expressions:
            for name in unknown_functions(src):
                self.add(
                    path,
                    "unknown-function",
                    f"'{src.strip()}' calls {name}(), which CEL does not define"
                    + (
                        hint
                        if (hint := did_you_mean(name, known_functions())).startswith(
                            "; did you mean"
                        )
                        else " (docs/expressions.md lists the functions)"
                    ),
                )
            for ref in expression_paths(src):
                if not ref:
                    continue
                if ref[0] not in roots:
                    self.add(
                        path,
                        "unknown-variable",
                        f"'{ref[0]}' in '{src.strip()}' is not a variable"
                        + (
                            hint
                            if (hint := did_you_mean(ref[0], roots)).startswith("; did you mean")
                            else f"; use one of: {', '.join(roots)}"
                        ),
                    )
                elif ref[0] == "steps" and len(ref) > 1 and ref[1] not in self.steps:
                    self.add(
                        path,
                        "unknown-step-reference",
                        f"'{src.strip()}' refers to step '{ref[1]}', which does not exist"
                        + did_you_mean(ref[1], self.steps),
                    )

    def check_template_field(self, path: str, value: Any, roots: tuple[str, ...] = ROOTS) -> None:
        """Template syntax, CEL inside each placeholder, and the variables it reads."""
        try:
            check_template(value)
        except (TemplateSyntaxError, ExpressionSyntaxError) as exc:
            self.add(path, "template", str(exc))
            return
        self.check_expression_refs(path, template_expressions(value), roots)

    def check_json_schema(self, path: str, schema: Any) -> None:
        """A schema the step declares is a JSON Schema whose patterns RE2 runs (anything but
        a mapping is left to the model's own field check)."""
        if not isinstance(schema, Mapping):
            return
        from jsonschema import SchemaError

        from relayflow.definition.tenant_schema import UnsupportedPattern, check_schema

        try:
            check_schema(schema)
        except (SchemaError, UnsupportedPattern) as exc:
            self.add(path, "json-schema", exc.message)
