"""Validate a definition in one pass and report every problem with its path and rule.

Field-level rules come from the pydantic models; the rules that span fields (references,
reachability, scopes, cycles, templates, expressions, schedules, availability in this build)
are checked here on the raw data, so that one broken field never hides the rest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from relayflow.definition.graph import StepGraph
from relayflow.definition.loader import LoadedDocument, load_file, parse_text
from relayflow.definition.models import (
    AVAILABLE_STEP_TYPES,
    STEP_KEY_PATTERN,
    STEP_TYPES,
    Workflow,
)
from relayflow.definition.problems import DefinitionError, Problem
from relayflow.document import ROOTS
from relayflow.expressions import (
    ExpressionSyntaxError,
    TemplateSyntaxError,
    check_expression,
    expression_jsonpath,
)
from relayflow.validation.context import TEMPLATE_FIELDS, CheckContext
from relayflow.validation.hints import did_you_mean, time_zone_hint
from relayflow.validation.limits import (
    compiled_quota_problems,
    non_finite_problems,
    parse_rfc3339,
)
from relayflow.validation.model_errors import taught
from relayflow.validation.validate_ai import check_agents, check_batches
from relayflow.validation.validate_compensation import check_compensations, compensation_targets
from relayflow.validation.validate_errors import check_on_error
from relayflow.validation.validate_for_each import check_for_each
from relayflow.validation.validate_reads import check_reads_before_run

_KEY_RE = re.compile(STEP_KEY_PATTERN)

#: How to get, per item, what a step type that cannot be a for_each item does.
_PER_ITEM_FIX = {
    kind: f"; to {what} per item, make the item step a sub_workflow whose workflow holds the "
    f"{kind} step"
    for kind, what in (
        ("approval", "ask a person"),
        ("waitpoint", "wait for a caller"),
        ("wait_for_event", "wait for an event"),
        ("delay", "wait"),
        ("condition", "branch"),
        ("parallel", "fan out"),
        ("for_each", "loop"),
        ("llm_batch", "submit a batch"),
        ("custom", "call a receiver"),
    )
}
_SINGLE_PLACEHOLDER = re.compile(r"^\s*\{\{(.*)\}\}\s*$", re.DOTALL)

#: A placeholder reading a caught error other than its name (native paths read only
#: ``error.Error``: relayflow.expressions.asl).
_READS_CAUGHT_ERROR = re.compile(r"\{\{\s*error\b(?!\.Error\s*\}\})")
TRIGGER_TYPES = ("manual", "cron", "at", "event", "webhook")
#: Settings a step type cannot honour, refused rather than silently ignored.
#: noop and delay cannot fail; Parallel and Map states have no TimeoutSeconds in ASL.
NOT_APPLICABLE: dict[str, tuple[str, ...]] = {
    "noop": ("retry", "timeout_seconds", "on_failure", "concurrency", "rate_limit"),
    "delay": ("retry", "timeout_seconds", "on_failure", "concurrency", "rate_limit"),
    "parallel": ("timeout_seconds", "concurrency", "rate_limit"),
    "for_each": ("timeout_seconds", "concurrency", "rate_limit"),
    # The code function holds no permissions (user code could read its credentials), so it
    # cannot keep flow-control leases in the table.
    "code": ("concurrency", "rate_limit"),
    # A callback Task is retried only on its own transient failures (compiled in): a policy
    # would also re-open a request that expired or that a caller failed on purpose.
    "approval": ("retry", "concurrency", "rate_limit"),
    "waitpoint": ("retry", "concurrency", "rate_limit"),
    "wait_for_event": ("retry", "concurrency", "rate_limit"),
    # A sub_workflow is a native Task (no step Lambda to hold flow-control leases).
    "sub_workflow": ("concurrency", "rate_limit"),
    # The poll invocations would take slots and rate windows; a batch is one job.
    "llm_batch": ("concurrency", "rate_limit"),
}
#: Step types a for_each may run per item: one unit of work that produces an output.
#: (An llm_batch already runs per item, and its poll loop is not an item's unit of work.)
FOR_EACH_TARGET_TYPES = frozenset(
    {"noop", "transform", "tool", "agent", "sub_workflow", "code", "webhook_out"}
)


def _loc_to_path(loc: Iterable[Any]) -> str:
    """pydantic's error location → ``steps.charge.retry.max_attempts``.

    Tagged-union locations carry the tag (``steps.charge.tool.retry``); it is dropped so
    the path is the one a person sees in the file.
    """
    parts = [str(p) for p in loc]
    if len(parts) >= 3 and parts[0] == "steps" and parts[2] in STEP_TYPES:
        del parts[2]
    if len(parts) >= 3 and parts[0] == "triggers" and parts[2] in TRIGGER_TYPES:
        del parts[2]
    out = ""
    for part in parts:
        if part.isdigit() and out:
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _rule_for(error_type: str) -> str:
    return {
        "missing": "required",
        "extra_forbidden": "unknown-field",
        "union_tag_invalid": "step-type",
        "union_tag_not_found": "step-type",
        "string_pattern_mismatch": "pattern",
    }.get(error_type, error_type.replace("_", "-"))


def _policy_or_word(loc: tuple[Any, ...]) -> tuple[tuple[Any, ...], bool] | None:
    """A location inside ``<policy> | Literal[word]`` (``retry: none``, ``timeout_seconds:
    none``): the location without the union member's tag, and whether the member is the word."""
    for i, part in enumerate(loc):
        if isinstance(part, str) and part.startswith(
            ("function-after[", "literal[", "constrained-int")
        ):
            return loc[:i] + loc[i + 1 :], part.startswith("literal[")
    return None


def _model_problems(file: str | None, exc: ValidationError) -> list[Problem]:
    problems = []
    for err in exc.errors(include_url=False):
        member = _policy_or_word(tuple(err["loc"]))
        if member is not None:
            # Both members of the union fail; report the policy's error, once, at the path
            # the person wrote (a non-mapping gets one message naming both spellings).
            if member[1]:
                continue
            err = {**err, "loc": member[0]}
            if err["type"] == "model_type":
                err["msg"] = "Input should be a policy (a mapping of its fields) or none"
            elif err["type"] == "int_parsing":
                err["msg"] = "Input should be a whole number of seconds or none"
        message = err["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        message = taught(Workflow, err, message)
        if err["type"] == "union_tag_invalid":
            tag = str((err.get("ctx") or {}).get("tag", ""))
            if err["loc"] and err["loc"][0] == "triggers":
                message = f"unknown trigger type '{tag}'" + did_you_mean(tag, TRIGGER_TYPES)
            elif "auth" in err["loc"]:
                auth = ("bearer", "basic", "api_key", "hmac")
                message = f"unknown auth type '{tag}'" + did_you_mean(tag, auth)
            elif len(err["loc"]) == 2 and err["loc"][0] == "steps":
                message = f"unknown step type '{tag}'" + did_you_mean(tag, STEP_TYPES)
            else:
                ctx = err.get("ctx") or {}
                field = str(ctx.get("discriminator", "type")).strip("'")
                allowed = re.findall(r"'([^']*)'", str(ctx.get("expected_tags", "")))
                message = f"unknown {field} '{tag}'" + did_you_mean(tag, allowed)
        elif err["type"] == "union_tag_not_found":
            kinds = TRIGGER_TYPES if err["loc"] and err["loc"][0] == "triggers" else STEP_TYPES
            message = f"missing field 'type': one of {', '.join(kinds)}"
        problems.append(Problem(file, _loc_to_path(err["loc"]), _rule_for(err["type"]), message))
    return problems


class Checker(CheckContext):
    """The one pass: the cross-field rules in their order (:meth:`run`)."""

    def run(self) -> list[Problem]:
        self.check_requires()
        self.check_keys_and_types()
        start = self.data.get("start")
        errors = self.data.get("errors")
        default_on_failure = errors.get("on_failure") if isinstance(errors, Mapping) else None
        if isinstance(start, str) and start not in self.steps:
            self.add(
                "start",
                "unknown-step",
                f"start step '{start}' does not exist" + did_you_mean(start, self.steps),
            )
        if isinstance(default_on_failure, str) and default_on_failure not in self.steps:
            self.add(
                "errors.on_failure",
                "unknown-step",
                f"error route '{default_on_failure}' does not exist"
                + did_you_mean(default_on_failure, self.steps),
            )
        graph = StepGraph(
            self.steps,
            start if isinstance(start, str) else "",
            default_on_failure if isinstance(default_on_failure, str) else None,
        )
        self.check_references(graph)
        self.check_outputs()
        if isinstance(start, str) and start in self.steps:
            self.check_scopes(graph)
        check_compensations(self, graph if isinstance(start, str) and start in self.steps else None)
        self.check_templates()
        if isinstance(start, str) and start in self.steps:
            check_reads_before_run(self, graph)
        self.check_waits()
        self.check_tools()
        check_agents(self)
        check_batches(self)
        check_on_error(self, graph, isinstance(start, str) and start in self.steps)
        check_for_each(self)
        self.check_triggers()
        return self.problems

    def check_requires(self) -> None:
        """The engine-version guard: a definition written for another engine is refused,
        naming both versions (a malformed specifier is the model's problem)."""
        from relayflow.engine import ENGINE_VERSION, BadSpecifier, unmet_requirement

        requires = self.data.get("requires")
        if not isinstance(requires, str):
            return
        try:
            unmet = unmet_requirement(requires, self.engine_version or ENGINE_VERSION)
        except BadSpecifier:
            return
        if unmet is not None:
            self.add("requires", "engine-version", unmet)

    def check_keys_and_types(self) -> None:
        for key, raw in self.steps.items():
            if not _KEY_RE.match(key) or len(key) > 64:
                self.add(
                    f"steps.{key}",
                    "step-key",
                    "step keys are 1-64 characters of a-z, 0-9 and '_', starting with a letter",
                )
            step_type = raw.get("type")
            for name in NOT_APPLICABLE.get(str(step_type), ()):
                if raw.get(name) is not None:
                    self.add(
                        f"steps.{key}.{name}",
                        "not-applicable",
                        f"a {step_type} step cannot use {name}",
                    )
            retry = raw.get("retry")
            if (
                step_type in ("parallel", "for_each", "llm_batch")
                and isinstance(retry, Mapping)
                and retry.get("backoff") == "linear"
            ):
                self.add(
                    f"steps.{key}.retry.backoff",
                    "not-applicable",
                    "linear backoff is not available on an llm_batch (its submit and poll "
                    "Tasks share one retry policy); use fixed or exponential"
                    if step_type == "llm_batch"
                    else "linear backoff is available on steps that run in a Lambda, "
                    f"not on {step_type}",
                )
            if step_type in STEP_TYPES and step_type not in AVAILABLE_STEP_TYPES:
                self.add(
                    f"steps.{key}.type",
                    "not-available",
                    f"step type '{step_type}' is not available in this build "
                    f"(available: {', '.join(sorted(AVAILABLE_STEP_TYPES))})",
                )

    def check_references(self, graph: StepGraph) -> None:
        for edges in graph.edges.values():
            for edge in edges:
                if edge.target not in self.steps and edge.path != "errors.on_failure":
                    self.add(
                        edge.path,
                        "unknown-step",
                        f"step '{edge.target}' does not exist"
                        + did_you_mean(edge.target, self.steps),
                    )
                elif edge.target == edge.source and edge.is_containment:
                    self.add(edge.path, "self-reference", "a step cannot contain itself")

    def check_outputs(self) -> None:
        """``outputs`` names steps of the workflow."""
        outputs = self.data.get("outputs")
        for i, key in enumerate(outputs if isinstance(outputs, list) else []):
            if isinstance(key, str) and key not in self.steps:
                self.add(
                    f"outputs[{i}]",
                    "unknown-step",
                    f"step '{key}' does not exist" + did_you_mean(key, self.steps),
                )

    def check_scopes(self, graph: StepGraph) -> None:
        scopes, reached_by = graph.scopes()
        # A step named as a compensation runs only as one (validate_compensation).
        compensations = compensation_targets(self.steps)
        for key in self.steps:
            if key not in reached_by and key not in compensations:
                self.add(
                    f"steps.{key}",
                    "unreachable",
                    f"step '{key}' cannot be reached from start '{graph.start}'",
                )
        for key, where in reached_by.items():
            if len(where) > 1:
                owners = sorted({s.owner or "the main flow" for s in where})
                self.add(
                    f"steps.{key}",
                    "scope",
                    f"step '{key}' is used by more than one flow ({', '.join(owners)}); "
                    "a step inside a parallel branch or for_each belongs to that step only",
                )
        for key, raw in self.steps.items():
            if raw.get("type") != "for_each" or not isinstance(raw.get("step"), str):
                continue
            target = raw["step"]
            target_raw = self.steps.get(target)
            if target_raw is None:
                continue
            if not isinstance(target_raw.get("type"), str):  # the model reports its type
                continue
            if target_raw["type"] not in FOR_EACH_TARGET_TYPES:
                self.add(
                    f"steps.{key}.step",
                    "for-each-target",
                    f"for_each runs one unit of work per item; '{target}' is a "
                    f"{target_raw.get('type')} step (allowed: "
                    f"{', '.join(sorted(FOR_EACH_TARGET_TYPES))})"
                    + _PER_ITEM_FIX.get(str(target_raw.get("type")), ""),
                )
            for route in ("on_success", "on_failure", "outcomes", "require_approval_tools"):
                if target_raw.get(route):
                    self.add(
                        f"steps.{target}.{route}",
                        "for-each-target",
                        f"'{target}' runs per item of for_each '{key}' and cannot route; "
                        "use on_item_failure on the for_each, or a parallel branch",
                    )
        for scope in scopes:
            for component in graph.cycles(scope):
                members = set(component)
                exits = False
                for key in component:
                    raw = self.steps[key]
                    normal = [e for e in graph.routes(key) if e.kind != "on_failure"]
                    if any(e.target not in members for e in normal):
                        exits = True
                    if raw.get("type") == "condition" and (
                        raw.get("on_true") is None or raw.get("on_false") is None
                    ):
                        exits = True
                if not exits:
                    cycle = " → ".join([*component, component[0]])
                    self.add(
                        f"steps.{component[0]}",
                        "unbounded-cycle",
                        f"the cycle {cycle} has no way out; add a condition that leaves it",
                    )

    def check_templates(self) -> None:
        compensations = compensation_targets(self.steps)
        for key, raw in self.steps.items():
            if key in compensations:
                continue  # its templates read output: validate_compensation checks them
            step_type = raw.get("type")
            if step_type == "condition" and isinstance(raw.get("expression"), str):
                path = f"steps.{key}.expression"
                try:
                    check_expression(raw["expression"])
                except ExpressionSyntaxError as exc:
                    self.add(path, "expression", str(exc))
                else:
                    self.check_expression_refs(path, [raw["expression"]])
            for control in ("concurrency", "rate_limit"):
                setting = raw.get(control)
                if isinstance(setting, Mapping) and isinstance(setting.get("key"), str):
                    self.check_template_field(f"steps.{key}.{control}.key", setting["key"])
            for name in TEMPLATE_FIELDS.get(str(step_type), ()):
                if name not in raw or raw[name] is None or isinstance(raw[name], int):
                    continue
                self.check_template_field(f"steps.{key}.{name}", raw[name])
            if step_type == "for_each" and isinstance(raw.get("items"), str):
                self.check_path_placeholder(
                    f"steps.{key}.items",
                    "for-each-items",
                    raw["items"],
                    "items must be one placeholder naming a list, e.g. "
                    "'{{ trigger.orders }}' or '{{ steps.fetch.output.items }}'",
                )
            if step_type == "sub_workflow" and raw.get("input") is not None:
                self.check_sub_workflow_input(f"steps.{key}.input", raw["input"])
            if step_type == "sub_workflow" and "{{" in str(raw.get("workflow_id") or ""):
                self.check_dynamic_target(key, raw)
            if step_type == "delay" and isinstance(raw.get("until"), str):
                self.check_until(f"steps.{key}.until", raw["until"])
            if step_type == "delay" and isinstance(raw.get("seconds"), str):
                self.check_path_placeholder(
                    f"steps.{key}.seconds",
                    "delay-seconds",
                    raw["seconds"],
                    "seconds must be a whole number or one placeholder naming one, "
                    "e.g. '{{ trigger.wait_seconds }}'",
                )

    def check_waits(self) -> None:
        """Approval options, branches and timeout routing; waitpoint timeout routing."""
        for key, raw in self.steps.items():
            step_type = raw.get("type")
            base = f"steps.{key}"
            action = raw.get("timeout_action", "fail")
            expires = bool(raw.get("timeout_seconds"))
            timed = step_type in ("waitpoint", "wait_for_event")
            if timed and raw.get("on_timeout") and not expires:
                self.add(f"{base}.on_timeout", "timeout", "on_timeout needs timeout_seconds")
            if step_type != "approval":
                continue
            options = raw.get("options", ["approve", "reject"])
            options = options if isinstance(options, list) else []
            dupes = sorted({o for o in options if isinstance(o, str) and options.count(o) > 1})
            if dupes:
                self.add(f"{base}.options", "unique", f"options repeat: {', '.join(dupes)}")
            branches = raw.get("branches")
            if isinstance(branches, Mapping):
                for name in branches:
                    if name not in options:
                        self.add(
                            f"{base}.branches.{name}",
                            "approval-branch",
                            f"'{name}' is not one of the options ({', '.join(map(str, options))})",
                        )
            branches = branches if isinstance(branches, Mapping) else {}
            if action != "fail" and not raw.get("timeout_seconds"):
                self.add(
                    f"{base}.timeout_action",
                    "timeout",
                    f"timeout_action {action} needs timeout_seconds (the approval's expiry)",
                )
            if (action == "route") != bool(raw.get("on_timeout")):
                self.add(
                    f"{base}.on_timeout",
                    "timeout",
                    "on_timeout is required with timeout_action route, and only then",
                )
            for decided in ("approve", "reject"):
                if action == decided and not (raw.get(f"on_{decided}") or decided in branches):
                    self.add(
                        f"{base}.timeout_action",
                        "timeout",
                        f"timeout_action {decided} needs on_{decided} or a '{decided}' branch "
                        "to route to",
                    )
            self.check_json_schema(f"{base}.form_schema", raw.get("form_schema"))

    def check_sub_workflow_input(self, path: str, value: Any) -> None:
        """A child's input is built natively in ASL (no Lambda runs a sub_workflow), so it may
        hold only literals, plain-path placeholders and text mixing the two."""
        from relayflow.expressions import template_to_parameters

        try:
            native = template_to_parameters({"trigger": value})
        except (TemplateSyntaxError, ExpressionSyntaxError):
            return  # reported by check_template_field
        path_keys = list(_path_like_keys(value, path))
        for key_path in path_keys:
            self.add(
                key_path,
                "sub-workflow-input",
                "a sub_workflow input key cannot end in '.$': the child's input is built "
                "natively, where Step Functions would read the value as a path",
            )
        if native is None and not path_keys and _READS_CAUGHT_ERROR.search(str(value)):
            self.add(
                path,
                "sub-workflow-input",
                "a sub_workflow input reads a caught error only as '{{ error.Error }}' (its "
                "Cause is Lambda's raw report, stack trace included); copy '{{ error }}' in a "
                "transform step first, where it reads as {Error, Cause, details}, and pass "
                "that step's output",
            )
        elif native is None and not path_keys:
            self.add(
                path,
                "sub-workflow-input",
                "a sub_workflow input may hold only literals, placeholders naming a value "
                "(e.g. '{{ steps.fetch.output.order }}') and text mixing the two; compute "
                "anything else in a transform step first",
            )

    def check_dynamic_target(self, key: str, raw: Mapping[str, Any]) -> None:
        """A templated ``workflow_id`` is rendered natively (``States.Format`` into the child's
        ARN), so it may mix only literal text and plain-path placeholders; a version cannot
        be pinned on a workflow not known until run time."""
        from relayflow.expressions import template_to_parameters

        path = f"steps.{key}.workflow_id"
        self.check_template_field(path, raw["workflow_id"])
        try:
            native = template_to_parameters({"id": raw["workflow_id"]})
        except (TemplateSyntaxError, ExpressionSyntaxError):
            return  # reported by check_template_field
        if native is None or "id.$" not in native:
            self.add(
                path,
                "dynamic-workflow-id",
                "a templated workflow_id may hold only literal text and placeholders naming a "
                "value, e.g. '{{ trigger.kind }}-handler'; compute anything else in a "
                "transform step first",
            )
        if raw.get("version") is not None:
            self.add(
                f"steps.{key}.version",
                "dynamic-workflow-id",
                "a templated workflow_id always starts the target's live version; a version "
                "cannot be pinned",
            )

    def check_path_placeholder(self, path: str, rule: str, value: str, message: str) -> None:
        """``value`` is one placeholder naming a path of the run's data (what a ``*Path``
        field of the compiled state takes); ``message`` says what else it may be."""
        match = _SINGLE_PLACEHOLDER.match(value)
        if not match or expression_jsonpath(match.group(1).strip()) is None:
            self.add(path, rule, message)

    def check_until(self, path: str, value: str) -> None:
        """``until`` is an ISO-8601 timestamp with a zone, or one placeholder naming one:
        exactly what a Wait state's Timestamp / TimestampPath accept."""
        match = _SINGLE_PLACEHOLDER.match(value)
        if match:
            if expression_jsonpath(match.group(1).strip()) is None:
                self.add(
                    path,
                    "delay-until",
                    "until must be a timestamp or one placeholder naming one, "
                    "e.g. '{{ trigger.due_at }}'",
                )
            return
        if parse_rfc3339(value.strip()) is None:
            self.add(
                path,
                "delay-until",
                f"'{value}' is not an RFC 3339 timestamp with a time zone (a real date and "
                "time, ASCII digits, upper-case T and Z), e.g. 2030-01-01T09:00:00Z or "
                "2030-01-01T09:00:00+02:00",
            )

    def check_tools(self) -> None:
        """Tool names against the catalogue and declared HTTP tools; templates inside HTTP
        tool operations (which may also read ``args``)."""
        from relayflow.tools.catalogue import check_tool

        http_tools = self.data.get("http_tools")
        http_tools = http_tools if isinstance(http_tools, Mapping) else {}
        for name, tool in http_tools.items():
            operations = tool.get("operations") if isinstance(tool, Mapping) else None
            if not isinstance(operations, Mapping):  # the model reports its type
                continue
            for op_name, op in operations.items():
                if not isinstance(op, Mapping):
                    continue
                for field in ("path", "query", "headers", "body"):
                    if op.get(field) is None:
                        continue
                    self.check_template_field(
                        f"http_tools.{name}.operations.{op_name}.{field}",
                        op[field],
                        (*ROOTS, "args"),
                    )
        for key, raw in self.steps.items():
            if raw.get("type") != "tool" or not isinstance(raw.get("tool"), str):
                continue
            self.check_dry_run_read(key, raw)
            for suffix, rule, message in check_tool(raw["tool"], raw.get("args", {}), http_tools):
                self.add(f"steps.{key}.{suffix}".rstrip("."), rule, message)

    def check_dry_run_read(self, key: str, raw: Mapping[str, Any]) -> None:
        """``dry_run: read`` lets a tool act in a dry run: only AWS tools that read may."""
        from relayflow.tools.aws import READ_ONLY_AWS_TOOLS

        tool = raw["tool"]
        if (
            raw.get("dry_run") == "read"
            and tool.startswith("aws.")
            and tool not in READ_ONLY_AWS_TOOLS
        ):
            self.add(
                f"steps.{key}.dry_run",
                "dry-run-read",
                f"{tool} changes the world, so a dry run cannot make the call; dry_run: read "
                f"is for tools that only read ({', '.join(sorted(READ_ONLY_AWS_TOOLS))}, or an "
                "http tool you know to be safe)",
            )

    def check_triggers(self) -> None:
        """Time zones, cron expressions as EventBridge Scheduler will run them (one that AWS
        cannot express is refused here, not at deploy time), one-time ``at`` times that exist
        exactly once in their zone, event filters, and webhook slugs used once."""
        triggers = self.data.get("triggers")
        if not isinstance(triggers, list):
            return
        from datetime import datetime

        from relayflow.cron import (
            UnknownTimeZone,
            UnsupportedCron,
            to_at_expression,
            to_scheduler_expressions,
            zone,
        )

        #: The text fields of a trigger type that must parse: (type, field, rule, parse, its
        #: refusal).
        parsed_fields: tuple[tuple[str, str, str, Callable[[str], Any], type[Exception]], ...] = (
            ("cron", "cron", "cron", to_scheduler_expressions, UnsupportedCron),
            ("event", "filter", "expression", check_expression, ExpressionSyntaxError),
        )
        slugs: dict[str, int] = {}
        for i, trig in enumerate(triggers):
            if not isinstance(trig, Mapping):
                continue
            tz = trig.get("timezone")
            valid_tz = True
            if isinstance(tz, str):
                try:
                    zone(tz)
                except UnknownTimeZone:
                    valid_tz = False
                    self.add(
                        f"triggers[{i}].timezone",
                        "timezone",
                        f"unknown time zone '{tz}'{time_zone_hint(tz)}",
                    )
            for kind, field, rule, parse, refusal in parsed_fields:
                if trig.get("type") == kind and isinstance(trig.get(field), str):
                    try:
                        parse(trig[field])
                    except refusal as exc:
                        self.add(f"triggers[{i}].{field}", rule, str(exc))
            at = trig.get("at")
            if trig.get("type") == "at" and isinstance(at, str) and valid_tz:
                try:
                    to_at_expression(
                        datetime.fromisoformat(at), tz if isinstance(tz, str) else "UTC"
                    )
                except ValueError as exc:
                    self.add(f"triggers[{i}].at", "at", str(exc))
            if trig.get("type") == "webhook" and trig.get("transform") is not None:
                # A delivery is trigger = {body, headers, query}; nothing else exists yet.
                self.check_template_field(
                    f"triggers[{i}].transform", trig["transform"], ("trigger",)
                )
            slug = trig.get("slug")
            if trig.get("type") == "webhook" and isinstance(slug, str):
                if slug in slugs:
                    self.add(
                        f"triggers[{i}].slug",
                        "duplicate-slug",
                        f"slug '{slug}' is already used by triggers[{slugs[slug]}]",
                    )
                slugs.setdefault(slug, i)


def _path_like_keys(value: Any, path: str) -> Iterable[str]:
    """Paths of the object keys in ``value`` that end in ``.$``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and key.endswith(".$"):
                yield f"{path}.{key}"
            yield from _path_like_keys(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _path_like_keys(item, f"{path}[{index}]")


def validate_data(
    data: Any, file: str | None = None, *, engine_version: str | None = None
) -> tuple[Workflow | None, list[Problem]]:
    """Check a parsed definition. Returns the model (when it parsed) and every problem found.

    ``engine_version`` is the engine the ``requires:`` guard is checked against (default:
    this one, :data:`relayflow.engine.ENGINE_VERSION`)."""
    if not isinstance(data, Mapping):
        return None, [
            Problem(file, "", "type", "a definition is a mapping (YAML) or object (JSON)")
        ]
    problems: list[Problem] = non_finite_problems(data, file)
    workflow: Workflow | None = None
    try:
        workflow = Workflow.model_validate(data)
    except ValidationError as exc:
        problems.extend(_model_problems(file, exc))
    problems.extend(Checker(data, file, engine_version).run())
    if workflow is not None and not problems:
        # Only a sound definition compiles; its quotas are the last thing to check.
        problems.extend(compiled_quota_problems(workflow, file))
        from relayflow.compiler.engine import engine_problems

        problems.extend(engine_problems(workflow, file))
    unique = sorted(set(problems), key=lambda p: (p.path, p.rule, p.message))
    return (workflow if not unique else None), unique


def _checked(doc: LoadedDocument) -> Workflow:
    if doc.problems and doc.data is None:
        raise DefinitionError(doc.problems)
    workflow, problems = validate_data(doc.data, doc.file)
    problems = doc.problems + problems
    if problems or workflow is None:
        raise DefinitionError(problems)
    return workflow


def load_workflow(path: str | Path) -> Workflow:
    """Load and validate a definition file; raise :class:`DefinitionError` with every problem."""
    return _checked(load_file(path))


def load_workflow_text(text: str, file: str = "<text>", fmt: str | None = None) -> Workflow:
    """Like :func:`load_workflow`, for text already in memory (API bodies, tests)."""
    return _checked(parse_text(text, file, fmt=fmt))
