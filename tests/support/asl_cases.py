"""A valid state machine that uses every state type, and deliberately broken variants of it:
one or more for every rule of :mod:`relayflow.compiler.check`. The unit tests feed them to the
check; the local runtime's tests feed them to ``CreateStateMachine``.

Each case is ``(id, break_it, rule, state)``: ``break_it`` changes a fresh copy of
:func:`valid_machine` in place, and the check must report ``rule`` on ``state``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LAMBDA = "arn:aws:states:::lambda:invoke"


def valid_machine() -> dict[str, Any]:
    """A machine Step Functions accepts: every state type, a Parallel, a Map, Retry and
    Catch, payload templates with paths and intrinsics, timestamps and waits."""
    return {
        "Comment": "every state type",
        "QueryLanguage": "JSONPath",
        "StartAt": "prepare",
        "TimeoutSeconds": 3600,
        "States": {
            "prepare": {
                "Type": "Pass",
                "Parameters": {
                    "id.$": "$$.Execution.Id",
                    "name.$": "States.Format('order {} \\{x\\}', $.order.id)",
                    "items.$": "$.order.items",
                    "first.$": "$.order.items[0].sku",
                    "literal": {"nested": [1, 2, {"deep.$": "$.order['id']"}]},
                },
                "ResultPath": "$.prepared",
                "Next": "call",
            },
            "call": {
                "Type": "Task",
                "Resource": LAMBDA,
                "Parameters": {"FunctionName": "relayflow-tool", "Payload.$": "$"},
                "ResultSelector": {"output.$": "$.Payload", "status": "succeeded"},
                "ResultPath": "$.steps.call",
                "TimeoutSeconds": 300,
                "HeartbeatSeconds": 60,
                "Retry": [
                    {
                        "ErrorEquals": ["Relayflow.Transient"],
                        "IntervalSeconds": 2,
                        "MaxAttempts": 3,
                        "BackoffRate": 2.0,
                        "MaxDelaySeconds": 30,
                        "JitterStrategy": "FULL",
                    },
                    {"ErrorEquals": ["States.ALL"], "MaxAttempts": 0},
                ],
                "Catch": [
                    {"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "failed"},
                    {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "failed"},
                ],
                "Next": "route",
            },
            "route": {
                "Type": "Choice",
                "Choices": [
                    {
                        "And": [
                            {"Variable": "$.steps.call.output.ok", "BooleanEquals": True},
                            {"Not": {"Variable": "$.order.total", "NumericGreaterThan": 100}},
                        ],
                        "Next": "pause",
                    },
                    {
                        "Variable": "$.order.due",
                        "TimestampLessThan": "2030-01-01T09:00:00.123+02:00",
                        "Next": "fork",
                    },
                    {"Variable": "$.order.a", "StringEqualsPath": "$.order.b", "Next": "fork"},
                ],
                "Default": "done",
            },
            "pause": {"Type": "Wait", "Seconds": 5, "Next": "until"},
            "until": {"Type": "Wait", "Timestamp": "2030-01-01T09:00:00Z", "Next": "fork"},
            "fork": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "left", "States": {"left": {"Type": "Pass", "End": True}}},
                    {
                        "StartAt": "right",
                        "States": {
                            "right": {"Type": "Wait", "SecondsPath": "$.delay", "Next": "right.ok"},
                            "right.ok": {"Type": "Succeed"},
                        },
                    },
                ],
                "ResultSelector": {
                    "merged.$": "States.JsonMerge($[0], $[1], false)",
                },
                "ResultPath": "$.fork",
                "Next": "each",
            },
            "each": {
                "Type": "Map",
                "ItemsPath": "$.order.items",
                "MaxConcurrency": 4,
                "ItemSelector": {"item.$": "$$.Map.Item.Value", "index.$": "$$.Map.Item.Index"},
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "item",
                    "States": {"item": {"Type": "Pass", "End": True}},
                },
                "ResultPath": "$.each",
                "Next": "done",
            },
            "done": {"Type": "Succeed"},
            "failed": {"Type": "Fail", "Error": "Relayflow.Failed", "CausePath": "$.error.Cause"},
        },
    }


@dataclass(frozen=True)
class BrokenCase:
    id: str
    break_it: Callable[[dict[str, Any]], None]
    rule: str
    state: str | None

    def machine(self) -> dict[str, Any]:
        asl = valid_machine()
        self.break_it(asl)
        return asl


def _states(asl: dict[str, Any]) -> dict[str, Any]:
    return asl["States"]


def _set(state: str, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(asl: dict[str, Any]) -> None:
        _states(asl)[state].update(fields)

    return change


def _drop(state: str, *fields: str) -> Callable[[dict[str, Any]], None]:
    def change(asl: dict[str, Any]) -> None:
        for field in fields:
            _states(asl)[state].pop(field)

    return change


def _replace(state: str, old: str, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(asl: dict[str, Any]) -> None:
        _states(asl)[state].pop(old)
        _states(asl)[state].update(fields)

    return change


def _params(state: str, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(asl: dict[str, Any]) -> None:
        _states(asl)[state]["Parameters"].update(fields)

    return change


def _retry(index: int, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(asl: dict[str, Any]) -> None:
        _states(asl)["call"]["Retry"][index].update(fields)

    return change


def _rename(old: str, new: str) -> Callable[[dict[str, Any]], None]:
    """Rename a top-level state and every transition to it."""

    def change(asl: dict[str, Any]) -> None:
        states = _states(asl)
        states[new] = states.pop(old)
        for state in states.values():
            if state.get("Next") == old:
                state["Next"] = new
        for choice in states["route"]["Choices"]:
            if choice["Next"] == old:
                choice["Next"] = new

    return change


def _in_branch(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(asl: dict[str, Any]) -> None:
        change(_states(asl)["fork"]["Branches"][1])

    return apply


def _add(name: str, state: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def change(asl: dict[str, Any]) -> None:
        _states(asl)[name] = state

    return change


def _choice(index: int, rule: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def change(asl: dict[str, Any]) -> None:
        _states(asl)["route"]["Choices"][index] = rule

    return change


def _top(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(asl: dict[str, Any]) -> None:
        asl.update(fields)

    return change


def _nested_merge(calls: int) -> str:
    text = "$[0]"
    for _ in range(calls):
        text = f"States.JsonMerge({text}, $[1], false)"
    return text


def _too_big(asl: dict[str, Any]) -> None:
    _states(asl)["left_pad"] = {"Type": "Pass", "Result": "x" * 1_048_576, "End": True}
    _states(asl)["done"] = {"Type": "Pass", "Next": "left_pad"}


def _loop_forever(asl: dict[str, Any]) -> None:
    branch = _states(asl)["fork"]["Branches"][0]
    branch["States"] = {
        "left": {"Type": "Pass", "Next": "left.again"},
        "left.again": {"Type": "Pass", "Next": "left"},
    }


def _orphan_in_map(asl: dict[str, Any]) -> None:
    _states(asl)["each"]["ItemProcessor"]["States"]["item.orphan"] = {"Type": "Pass", "End": True}


BROKEN: list[BrokenCase] = [
    # StartAt and scopes
    BrokenCase("start-at-unknown", _top(StartAt="nowhere"), "start-at", None),
    BrokenCase(
        "branch-start-at-unknown",
        _in_branch(lambda b: b.update(StartAt="left")),
        "start-at",
        "fork.Branches[1]",
    ),
    BrokenCase("parallel-without-branches", _set("fork", Branches=[]), "scope", "fork"),
    BrokenCase("map-without-processor", _drop("each", "ItemProcessor"), "scope", "each"),
    BrokenCase("unknown-type", _set("pause", Type="Sleep"), "state-type", "pause"),
    # Next / End
    BrokenCase("next-and-end", _set("pause", End=True), "next-or-end", "pause"),
    BrokenCase("neither-next-nor-end", _drop("pause", "Next"), "next-or-end", "pause"),
    BrokenCase(
        "end-false",
        _in_branch(lambda b: b["States"]["right"].update(End=False)),
        "next-or-end",
        "fork.Branches[1].right",
    ),
    BrokenCase("choice-with-next", _set("route", Next="done"), "next-or-end", "route"),
    BrokenCase("succeed-with-end", _set("done", End=True), "next-or-end", "done"),
    # Transitions resolve in their own scope
    BrokenCase("next-unknown", _set("pause", Next="nowhere"), "next-resolves", "pause"),
    BrokenCase("default-unknown", _set("route", Default="nowhere"), "next-resolves", "route"),
    BrokenCase(
        "catch-next-unknown",
        lambda asl: _states(asl)["call"]["Catch"][0].update(Next="nowhere"),
        "next-resolves",
        "call",
    ),
    BrokenCase("next-into-a-branch", _set("pause", Next="left"), "next-resolves", "pause"),
    BrokenCase(
        "branch-next-out-of-its-scope",
        _in_branch(lambda b: b["States"]["right"].update(Next="done")),
        "next-resolves",
        "fork.Branches[1].right",
    ),
    # Reachability and termination
    BrokenCase("unreachable", _add("orphan", {"Type": "Pass", "End": True}), "reachable", "orphan"),
    BrokenCase("unreachable-in-map", _orphan_in_map, "reachable", "each.ItemProcessor.item.orphan"),
    BrokenCase("no-terminal-state", _loop_forever, "terminal", "fork.Branches[0]"),
    # Choice rules
    BrokenCase("choices-empty", _set("route", Choices=[]), "choice-rule", "route"),
    BrokenCase(
        "choice-without-operator",
        _choice(2, {"Variable": "$.a", "Next": "fork"}),
        "choice-rule",
        "route",
    ),
    BrokenCase(
        "choice-two-operators",
        _choice(2, {"Variable": "$.a", "StringEquals": "x", "IsPresent": True, "Next": "fork"}),
        "choice-rule",
        "route",
    ),
    BrokenCase(
        "nested-choice-with-next",
        _choice(0, {"Not": {"Variable": "$.a", "IsNull": True, "Next": "fork"}, "Next": "pause"}),
        "choice-rule",
        "route",
    ),
    BrokenCase(
        "numeric-compared-to-a-string",
        _choice(2, {"Variable": "$.a", "NumericEquals": "3", "Next": "fork"}),
        "choice-rule",
        "route",
    ),
    # Paths
    BrokenCase("input-path-not-a-path", _set("pause", InputPath="order"), "path-field", "pause"),
    BrokenCase("output-path-trailing-dot", _set("call", OutputPath="$.a."), "path-field", "call"),
    BrokenCase("result-path-wildcard", _set("call", ResultPath="$.steps[*]"), "path-field", "call"),
    BrokenCase(
        "result-path-context", _set("prepare", ResultPath="$$.Execution"), "path-field", "prepare"
    ),
    BrokenCase("items-path-deep-scan", _set("each", ItemsPath="$..items"), "path-field", "each"),
    BrokenCase(
        "seconds-path-filter",
        _replace("pause", "Seconds", SecondsPath="$.a[?(@.x > 1)]"),
        "path-field",
        "pause",
    ),
    BrokenCase(
        "choice-variable-not-a-path",
        _choice(2, {"Variable": "order.a", "StringEquals": "x", "Next": "fork"}),
        "path-field",
        "route",
    ),
    BrokenCase(
        "catch-result-path-slice",
        lambda asl: _states(asl)["call"]["Catch"][0].update(ResultPath="$.errors[0:2]"),
        "path-field",
        "call",
    ),
    # `.$` keys in payload templates
    BrokenCase(
        "dollar-key-with-text", _params("prepare", **{"note.$": "hello"}), "jsonpath", "prepare"
    ),
    BrokenCase("dollar-key-with-number", _params("prepare", **{"n.$": 5}), "jsonpath", "prepare"),
    BrokenCase(
        "dollar-key-nested-in-an-array",
        _params("prepare", literal={"rows": [{"user.$": "data"}]}),
        "jsonpath",
        "prepare",
    ),
    BrokenCase(
        "dollar-key-bad-path",
        lambda asl: _states(asl)["call"]["ResultSelector"].update({"x.$": "$.a b"}),
        "jsonpath",
        "call",
    ),
    BrokenCase(
        "item-selector-bad-path",
        lambda asl: _states(asl)["each"]["ItemSelector"].update({"x.$": "$[a]"}),
        "jsonpath",
        "each",
    ),
    BrokenCase(
        "fail-cause-path-not-a-path", _set("failed", CausePath="error"), "jsonpath", "failed"
    ),
    # Intrinsic functions, each in a `.$` field of prepare's Parameters
    *(
        BrokenCase(name, _params("prepare", **{"x.$": expression}), "intrinsic", "prepare")
        for name, expression in [
            ("unknown-intrinsic", "States.Nope($.a)"),
            ("unbalanced-intrinsic", "States.Array($.a, $.b"),
            ("intrinsic-bad-escape", "States.Format('a\\nb')"),
            ("intrinsic-unterminated-literal", "States.Format('abc)"),
            ("intrinsic-arity", "States.MathAdd(1)"),
            ("intrinsic-bad-path-argument", "States.ArrayLength($.a..)"),
        ]
    ),
    BrokenCase(
        "eleven-intrinsics-in-one-field",
        lambda asl: _states(asl)["fork"]["ResultSelector"].update({"merged.$": _nested_merge(11)}),
        "intrinsic-nesting",
        "fork",
    ),
    # Numeric ranges
    BrokenCase(
        "wait-seconds-too-big", _set("pause", Seconds=100_000_000), "numeric-range", "pause"
    ),
    BrokenCase("wait-seconds-negative", _set("pause", Seconds=-1), "numeric-range", "pause"),
    BrokenCase("wait-seconds-fraction", _set("pause", Seconds=1.5), "numeric-range", "pause"),
    BrokenCase("task-timeout-zero", _set("call", TimeoutSeconds=0), "numeric-range", "call"),
    BrokenCase(
        "heartbeat-not-below-timeout", _set("call", HeartbeatSeconds=300), "numeric-range", "call"
    ),
    BrokenCase("max-attempts-negative", _retry(0, MaxAttempts=-1), "numeric-range", "call"),
    BrokenCase("max-attempts-too-big", _retry(0, MaxAttempts=100_000_000), "numeric-range", "call"),
    BrokenCase("interval-zero", _retry(0, IntervalSeconds=0), "numeric-range", "call"),
    BrokenCase("backoff-below-one", _retry(0, BackoffRate=0.5), "numeric-range", "call"),
    BrokenCase("max-delay-too-big", _retry(0, MaxDelaySeconds=31_622_401), "numeric-range", "call"),
    BrokenCase(
        "max-concurrency-negative", _set("each", MaxConcurrency=-1), "numeric-range", "each"
    ),
    BrokenCase("machine-timeout-zero", _top(TimeoutSeconds=0), "numeric-range", None),
    BrokenCase("jitter-unknown", _retry(0, JitterStrategy="HALF"), "field-value", "call"),
    BrokenCase("task-without-resource", _drop("call", "Resource"), "field-value", "call"),
    # Timestamps, each as the Timestamp of the Wait state until
    *(
        BrokenCase(name, _set("until", Timestamp=timestamp), "timestamp", "until")
        for name, timestamp in [
            ("timestamp-impossible-date", "2030-02-30T09:00:00Z"),
            ("timestamp-hour-24", "2030-01-01T24:00:00Z"),
            ("timestamp-bad-offset", "2030-01-01T09:00:00+25:99"),
            ("timestamp-non-ascii-digits", "٢٠٣٠-01-01T09:00:00Z"),
            ("timestamp-lowercase-t", "2030-01-01t09:00:00Z"),
        ]
    ),
    BrokenCase(
        "choice-timestamp-not-rfc3339",
        _choice(1, {"Variable": "$.d", "TimestampEquals": "2030-01-01 09:00", "Next": "fork"}),
        "timestamp",
        "route",
    ),
    # State names
    BrokenCase("state-name-81-characters", _rename("pause", "p" * 81), "state-name", "p" * 81),
    BrokenCase(
        "state-name-control-character", _rename("pause", "pa\x07use"), "state-name", "pa\x07use"
    ),
    BrokenCase(
        "state-name-used-in-a-branch-and-at-the-top",
        _in_branch(lambda b: b["States"].update({"pause": {"Type": "Pass", "End": True}})),
        "duplicate-state",
        "fork.Branches[1].pause",
    ),
    # JSON values
    BrokenCase("nan", _params("prepare", literal=float("nan")), "non-finite", "prepare"),
    BrokenCase(
        "infinity-in-a-pass-result",
        _set("prepare", Result={"x": float("inf")}),
        "non-finite",
        "prepare",
    ),
    BrokenCase("not-a-json-value", _params("prepare", literal={1, 2}), "json-type", "prepare"),
    # Size
    BrokenCase("over-one-mebibyte", _too_big, "size", None),
    # Retry and Catch
    BrokenCase(
        "states-all-catcher-not-last",
        lambda asl: _states(asl)["call"]["Catch"].reverse(),
        "catch-order",
        "call",
    ),
    BrokenCase(
        "states-all-with-other-errors",
        _retry(1, ErrorEquals=["States.ALL", "Relayflow.Transient"]),
        "catch-order",
        "call",
    ),
    BrokenCase("error-equals-empty", _retry(0, ErrorEquals=[]), "error-equals", "call"),
    # Mutually exclusive fields
    BrokenCase(
        "wait-seconds-and-timestamp",
        _set("pause", Timestamp="2030-01-01T09:00:00Z"),
        "field-conflict",
        "pause",
    ),
    BrokenCase("wait-without-duration", _drop("pause", "Seconds"), "field-conflict", "pause"),
    BrokenCase(
        "timeout-and-timeout-path",
        _set("call", TimeoutSecondsPath="$.timeout"),
        "field-conflict",
        "call",
    ),
    BrokenCase("jsonata", _top(QueryLanguage="JSONata"), "query-language", None),
    # Fields Step Functions does not know
    BrokenCase("unknown-state-field", _set("pause", Secs=5), "unknown-field", "pause"),
    BrokenCase("result-on-a-task", _set("call", Result={}), "unknown-field", "call"),
    BrokenCase("unknown-machine-field", _top(Timeout=5), "unknown-field", None),
    BrokenCase("unknown-retrier-field", _retry(0, MaxRetries=3), "unknown-field", "call"),
    BrokenCase(
        "unknown-branch-field",
        _in_branch(lambda b: b.update(Name="right")),
        "unknown-field",
        "fork.Branches[1]",
    ),
]
