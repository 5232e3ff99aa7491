"""Validation rules of saga compensation (``compensate:``). Part of
:mod:`relayflow.validation.validate`'s one pass.

Rules, each reported with the path of the ``compensate`` field it concerns:

* ``compensate-not-acting``: only tool, webhook_out, custom, code and agent steps act on the
  world, so only they may declare a compensation;
* ``unknown-step``: a compensation step key that names no step;
* ``compensation-step``: a compensation is a tool, webhook_out or custom call, and a step
  named as one runs only as a compensation (no flow may route to it);
* ``compensation-route``: a compensation routes nowhere (no on_success, on_failure, branches);
* ``compensation-compensates``: a compensation never has a compensation of its own;
* ``compensate-in-parallel`` / ``compensate-in-cycle``: a compensated step inside a parallel
  branch or on a cycle (the compiled list of completed steps lives in the main flow and holds
  one entry per step);
* ``compensate-distributed``: the item step of a ``mode: distributed`` for_each (its items
  run as child executions whose results go to S3: the step's output is the result manifest,
  not a list of item outputs the undo could walk);
* ``unknown-tool`` / ``tool-args``: an inline tool call is checked like a tool step (the
  catalogue, declared HTTP tools and operations, args);
* ``unknown-variable`` / ``unknown-step-reference``: the compensation's templates read
  ``output`` (the compensated step's output), ``steps.<that step>``, ``trigger``, ``run`` and,
  per for_each item, ``index``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from relayflow.definition.compensation import CALL_ROUTES, CALL_TYPES, COMPENSABLE_TYPES
from relayflow.validation.context import TEMPLATE_FIELDS
from relayflow.validation.hints import did_you_mean

if TYPE_CHECKING:
    from relayflow.definition.graph import StepGraph
    from relayflow.validation.context import CheckContext


def compensation_targets(steps: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """Keys of the steps that other steps name as their compensation."""
    return {
        raw["compensate"]
        for raw in steps.values()
        if isinstance(raw.get("compensate"), str) and raw["compensate"] in steps
    }


def check_compensations(checker: CheckContext, graph: StepGraph | None) -> None:
    """Every ``compensate`` of the definition (see the module docstring)."""
    targets = compensation_targets(checker.steps)
    scopes, reached_by = graph.scopes() if graph is not None else ([], {})
    cycles = [c for scope in scopes for c in graph.cycles(scope)] if graph is not None else []
    item_steps = {
        raw["step"]
        for raw in checker.steps.values()
        if raw.get("type") == "for_each" and isinstance(raw.get("step"), str)
    }
    distributed = {
        raw["step"]: owner
        for owner, raw in checker.steps.items()
        if raw.get("type") == "for_each"
        and isinstance(raw.get("step"), str)
        and raw.get("mode") == "distributed"
    }
    on_cycle = {key for cycle in cycles for key in cycle}
    for key, raw in checker.steps.items():
        compensate = raw.get("compensate")
        if compensate is None:
            continue
        path = f"steps.{key}.compensate"
        step_type = raw.get("type")
        if not isinstance(step_type, str):  # the model reports its type
            continue
        if step_type not in COMPENSABLE_TYPES:
            checker.add(
                path,
                "compensate-not-acting",
                f"a {step_type} step does not act on the world, so it has nothing to "
                f"compensate (compensate is for: {', '.join(sorted(COMPENSABLE_TYPES))})",
            )
            continue
        if key in targets:
            checker.add(
                path,
                "compensation-compensates",
                f"'{key}' is itself a compensation; a compensation is never compensated",
            )
        parallel = sorted(
            o
            for o in _owners(key, reached_by)
            if checker.steps.get(o, {}).get("type") == "parallel"
        )
        if parallel:
            checker.add(
                path,
                "compensate-in-parallel",
                f"'{key}' is in a branch of parallel '{parallel[0]}': compensation is "
                "available in the main flow and per for_each item, not inside a branch",
            )
        if key in distributed:
            checker.add(
                path,
                "compensate-distributed",
                f"'{key}' is the item step of for_each '{distributed[key]}', which runs "
                "mode: distributed: each item is a child execution whose result goes to S3, so "
                "nothing in the run lists what each item did to undo it; use mode: inline "
                "(compensated per item), or compensate inside a sub_workflow run per item",
            )
        if key in on_cycle:
            checker.add(
                path,
                "compensate-in-cycle",
                f"'{key}' is on a cycle: compensation records one completion per step",
            )
        per_item = key in item_steps
        if isinstance(compensate, str):
            _check_referenced(checker, key, compensate, path, reached_by, per_item)
        elif isinstance(compensate, Mapping):
            _check_inline(checker, key, compensate, path, per_item)


def _owners(key: str, reached_by: Mapping[str, Any]) -> set[str]:
    """The parallel and for_each steps whose scopes contain ``key``, at any depth."""
    found: set[str] = set()
    pending = [key]
    while pending:
        for scope in reached_by.get(pending.pop(), []):
            if scope.owner and scope.owner not in found:
                found.add(scope.owner)
                pending.append(scope.owner)
    return found


def _check_referenced(
    checker: CheckContext,
    key: str,
    target: str,
    path: str,
    reached_by: Mapping[str, Any],
    per_item: bool,
) -> None:
    raw = checker.steps.get(target)
    if raw is None:
        checker.add(
            path,
            "unknown-step",
            f"compensation step '{target}' does not exist" + did_you_mean(target, checker.steps),
        )
        return
    if raw.get("type") not in CALL_TYPES:
        checker.add(
            path,
            "compensation-step",
            f"compensation '{target}' is a {raw.get('type')} step; a compensation is a "
            f"{', '.join(CALL_TYPES)} call",
        )
    if target in reached_by:
        checker.add(
            path,
            "compensation-step",
            f"'{target}' runs only as a compensation: no flow may route to it",
        )
    if raw.get("compensate") is not None:
        checker.add(
            f"steps.{target}.compensate",
            "compensation-compensates",
            f"'{target}' compensates '{key}'; a compensation is never compensated",
        )
    for name in CALL_ROUTES:
        if raw.get(name):
            checker.add(
                f"steps.{target}.{name}",
                "compensation-route",
                f"'{target}' compensates '{key}' and routes nowhere; remove {name}",
            )
    _check_templates(checker, key, raw, f"steps.{target}", per_item)


def _check_inline(
    checker: CheckContext, key: str, call: Mapping[str, Any], path: str, per_item: bool
) -> None:
    from relayflow.definition.models import CustomStep, ToolStep, WebhookOutStep

    models = {"tool": ToolStep, "webhook_out": WebhookOutStep, "custom": CustomStep}
    if call.get("compensate") is not None:
        checker.add(
            f"{path}.compensate",
            "compensation-compensates",
            "a compensation is never compensated",
        )
    for name in CALL_ROUTES:
        if call.get(name):
            checker.add(
                f"{path}.{name}", "compensation-route", f"a compensation routes nowhere: {name}"
            )
    model = models.get(str(call.get("type")))
    if model is None:
        return  # the model reports the type
    try:
        model.model_validate(dict(call))
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            where = ".".join(str(p) for p in err["loc"])
            checker.add(f"{path}.{where}" if where else path, "compensation-step", err["msg"])
    if call.get("type") == "tool" and isinstance(call.get("tool"), str):
        _check_tool_call(checker, call, path)
    _check_templates(checker, key, call, path, per_item)


def _check_tool_call(checker: CheckContext, call: Mapping[str, Any], path: str) -> None:
    """An inline tool call is checked like a tool step: the catalogue, the declared HTTP
    tools and operations, and the args (``unknown-tool``, ``tool-args``)."""
    from relayflow.tools.catalogue import check_tool

    http_tools = checker.data.get("http_tools")
    http_tools = http_tools if isinstance(http_tools, Mapping) else {}
    for suffix, rule, message in check_tool(call["tool"], call.get("args", {}), http_tools):
        checker.add(f"{path}.{suffix}".rstrip("."), rule, message)


def _check_templates(
    checker: CheckContext, key: str, call: Mapping[str, Any], path: str, per_item: bool
) -> None:
    from relayflow.expressions import expression_paths, template_expressions

    roots = ("output", "steps", "trigger", "run", *(("index",) if per_item else ()))
    for name in TEMPLATE_FIELDS.get(str(call.get("type")), ()):
        value = call.get(name)
        if value is None or isinstance(value, int):
            continue
        checker.check_template_field(f"{path}.{name}", value, roots)
        try:
            expressions = template_expressions(value)
        except ValueError:
            continue  # reported above
        for src in expressions:
            for ref in expression_paths(src):
                if len(ref) > 1 and ref[0] == "steps" and ref[1] != key:
                    checker.add(
                        f"{path}.{name}",
                        "unknown-step-reference",
                        f"'{src.strip()}': a compensation of '{key}' reads output (or "
                        f"steps.{key}), not the outputs of other steps",
                    )
