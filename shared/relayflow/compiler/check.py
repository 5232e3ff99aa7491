"""The post-compile check: every compiled state machine must be one Step Functions accepts.

Pure: an ASL dict in, a list of :class:`Violation` out (no I/O). The rules come from the Amazon
States Language specification and the Step Functions quotas; ``docs/compiler.md`` lists each
with its source. A violation is a compiler bug, never something a user fixes in a definition
(but ``size``: callers first report it as the definition's ``compiled-size``, see
:mod:`relayflow.compiler.quotas`). :func:`assert_valid_machine` raises
:class:`CompiledMachineInvalid` before ``relayflow compile``, ``relayflow run``, ``relayflow
deploy`` or ``PUT /workflows`` use a machine, and the local runtime refuses the same machines
at ``CreateStateMachine`` / ``UpdateStateMachine`` (:mod:`relayflow.local.compat_definition`).

States are named by their *state path*: the state's name, prefixed inside a Parallel branch or a
Map's item processor by the enclosing state and ``Branches[i]`` / ``ItemProcessor``
(``fork.Branches[1].right``). Machine-wide violations (size, the top-level ``StartAt``) have no
state.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from relayflow.compiler.asl_syntax import (
    MAX_INTRINSICS_PER_FIELD,
    intrinsic_problem,
    path_problem,
    timestamp_problem,
)

#: Step Functions quota: "Maximum size of state machine definition: 1 MB" (a hard quota).
MAX_DEFINITION_BYTES = 1_048_576
#: Longest state name (ASL specification; AWS: ``INVALID_STATE_NAME … 80-character limit``).
MAX_STATE_NAME = 80
#: Upper bound of Wait ``Seconds``, Task ``TimeoutSeconds``/``HeartbeatSeconds`` and the
#: retrier's ``IntervalSeconds``/``MaxAttempts``.
MAX_SECONDS = 99_999_999
#: The retrier's ``MaxDelaySeconds`` "must be greater than 0 and less than 31622401".
MAX_DELAY_SECONDS = 31_622_400
STATE_TYPES = frozenset({"Task", "Pass", "Choice", "Wait", "Succeed", "Fail", "Parallel", "Map"})
_FLOWING = frozenset({"Task", "Pass", "Wait", "Parallel", "Map"})
_TERMINAL_TYPES = frozenset({"Succeed", "Fail"})
_PAYLOAD_TEMPLATES = {
    "Task": ("Parameters", "ResultSelector", "Credentials"),
    "Pass": ("Parameters",),
    "Parallel": ("Parameters", "ResultSelector"),
    "Map": ("Parameters", "ItemSelector", "ResultSelector"),
}
_REFERENCE_PATH_FIELDS = {
    "Task": ("TimeoutSecondsPath", "HeartbeatSecondsPath"),
    "Wait": ("SecondsPath", "TimestampPath"),
    "Map": (
        "ItemsPath",
        "MaxConcurrencyPath",
        "ToleratedFailurePercentagePath",
        "ToleratedFailureCountPath",
    ),
}
_RESULT_PATH_TYPES = frozenset({"Task", "Pass", "Parallel", "Map"})
_EXCLUSIVE = {
    "Task": (
        ("TimeoutSeconds", "TimeoutSecondsPath"),
        ("HeartbeatSeconds", "HeartbeatSecondsPath"),
    ),
    "Fail": (("Error", "ErrorPath"), ("Cause", "CausePath")),
    "Map": (
        ("ItemProcessor", "Iterator"),
        ("ItemSelector", "Parameters"),
        ("MaxConcurrency", "MaxConcurrencyPath"),
    ),
}
_COMMON = ("Type", "Comment", "QueryLanguage")
_FLOW = ("Next", "End", "InputPath", "OutputPath", "Assign")
#: The fields each state type may have in the JSONPath query language; Step Functions refuses
#: any other ("SCHEMA_VALIDATION_FAILED: … is not supported").
_ALLOWED_FIELDS: dict[str, frozenset[str]] = {
    kind: frozenset((*_COMMON, *fields))
    for kind, fields in {
        "Pass": (*_FLOW, "ResultPath", "Parameters", "Result"),
        "Task": (
            *_FLOW,
            *("Resource", "ResultPath", "Parameters", "ResultSelector", "Retry", "Catch"),
            *("TimeoutSeconds", "TimeoutSecondsPath", "HeartbeatSeconds"),
            *("HeartbeatSecondsPath", "Credentials"),
        ),
        "Choice": ("Choices", "Default", "InputPath", "OutputPath", "Assign"),
        "Wait": (*_FLOW, "Seconds", "SecondsPath", "Timestamp", "TimestampPath"),
        "Succeed": ("InputPath", "OutputPath"),
        "Fail": ("Error", "ErrorPath", "Cause", "CausePath"),
        "Parallel": (
            *_FLOW,
            *("Branches", "ResultPath", "Parameters", "ResultSelector", "Retry", "Catch"),
        ),
        "Map": (
            *_FLOW,
            *("ItemProcessor", "Iterator", "ItemsPath", "ItemSelector", "Parameters"),
            *("ItemReader", "ItemBatcher", "ResultWriter", "Label", "ResultPath"),
            *("ResultSelector", "Retry", "Catch", "MaxConcurrency", "MaxConcurrencyPath"),
            *("ToleratedFailurePercentage", "ToleratedFailurePercentagePath"),
            *("ToleratedFailureCount", "ToleratedFailureCountPath"),
        ),
    }.items()
}
_MACHINE_FIELDS = frozenset(
    {"Comment", "StartAt", "States", "Version", "TimeoutSeconds", "QueryLanguage"}
)
_SCOPE_FIELDS = frozenset({"Comment", "StartAt", "States", "ProcessorConfig", "QueryLanguage"})
_RETRIER_FIELDS = frozenset(
    {"ErrorEquals", "IntervalSeconds", "MaxAttempts", "BackoffRate", "MaxDelaySeconds"}
    | {"JitterStrategy", "Comment"}
)
_CATCHER_FIELDS = frozenset({"ErrorEquals", "Next", "ResultPath", "Comment", "Assign"})
_WAIT_FIELDS = ("Seconds", "Timestamp", "SecondsPath", "TimestampPath")
# Characters no name in Step Functions may hold (beside controls and surrogates).
_NONCHAR = frozenset({0xFFFE, 0xFFFF})
_JITTER_STRATEGIES = frozenset({"FULL", "NONE"})
_EXECUTION_TYPES = frozenset({"STANDARD", "EXPRESS"})
_READER_INPUT_TYPES = frozenset({"CSV", "JSON", "JSONL", "MANIFEST", "PARQUET"})
#: Map fields that only a ``Mode: DISTRIBUTED`` item processor honours.
_DISTRIBUTED_ONLY = (
    *("ItemReader", "ItemBatcher", "ResultWriter", "Label"),
    *("ToleratedFailureCount", "ToleratedFailureCountPath"),
    *("ToleratedFailurePercentage", "ToleratedFailurePercentagePath"),
)
_COMBINATORS = ("And", "Or", "Not")
_COMPARATORS: dict[str, str] = {
    **{f"String{op}": "string" for op in ("Equals", "LessThan", "GreaterThan")},
    **{f"String{op}": "string" for op in ("LessThanEquals", "GreaterThanEquals", "Matches")},
    **{f"Numeric{op}": "number" for op in ("Equals", "LessThan", "GreaterThan")},
    **{f"Numeric{op}": "number" for op in ("LessThanEquals", "GreaterThanEquals")},
    **{f"Timestamp{op}": "timestamp" for op in ("Equals", "LessThan", "GreaterThan")},
    **{f"Timestamp{op}": "timestamp" for op in ("LessThanEquals", "GreaterThanEquals")},
    "BooleanEquals": "boolean",
    **{test: "boolean" for test in ("IsNull", "IsPresent", "IsNumeric", "IsString")},
    **{test: "boolean" for test in ("IsBoolean", "IsTimestamp")},
}
_COMPARATORS.update(
    {
        f"{name}Path": "path"
        for name in list(_COMPARATORS)
        if not name.startswith("Is") and name != "StringMatches"
    }
)


@dataclass(frozen=True)
class Violation:
    """One broken rule: a stable ``rule`` id (see ``docs/compiler.md``), the state path it
    concerns (``None`` for the machine as a whole) and a sentence saying what is wrong."""

    rule: str
    state: str | None
    message: str

    def __str__(self) -> str:
        where = f"state {self.state!r}" if self.state is not None else "the state machine"
        return f"[{self.rule}] {where}: {self.message}"


class CompiledMachineInvalid(Exception):
    """A compiled state machine breaks ASL rules or Step Functions quotas: a compiler bug.
    ``str()`` names every rule and state."""

    def __init__(self, violations: Iterable[Violation]) -> None:
        self.violations = list(violations)
        lines = "; ".join(str(v) for v in self.violations)
        super().__init__(
            f"the compiled state machine breaks {len(self.violations)} ASL rule(s): {lines}"
        )


def check_machine(asl: Mapping[str, Any]) -> list[Violation]:
    """Every rule ``asl`` breaks, in document order (empty when Step Functions would accept
    it as far as these rules tell). Never raises for a malformed document: malformation is
    reported as violations."""
    checker = _Checker()
    checker.machine(asl)
    return checker.violations


def assert_valid_machine(asl: Mapping[str, Any]) -> None:
    """Raise :class:`CompiledMachineInvalid` unless ``asl`` passes :func:`check_machine`."""
    violations = check_machine(asl)
    if violations:
        raise CompiledMachineInvalid(violations)


def definition_size(asl: Mapping[str, Any]) -> int:
    """Bytes of ``asl`` as compact JSON, the form Relayflow sends to Step Functions."""
    return len(json.dumps(asl, separators=(",", ":"), default=str).encode())


# --------------------------------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _state_path(scope: str | None, name: str) -> str:
    return f"{scope}.{name}" if scope else name


def _name_problem(name: str) -> str | None:
    # Counted in UTF-16 code units, as Step Functions (a Java service) counts a string's length;
    # a character outside the BMP counts twice, which is the stricter reading.
    length = len(name.encode("utf-16-le")) // 2
    if not 1 <= length <= MAX_STATE_NAME:
        return f"a state name has 1 to {MAX_STATE_NAME} characters, this one {length}"
    for char in name:
        code = ord(char)
        if code <= 0x1F or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF or code in _NONCHAR:
            return f"a state name cannot contain the control or invalid character U+{code:04X}"
    return None


class _Checker:
    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self._seen_names: dict[str, str] = {}

    def add(self, rule: str, state: str | None, message: str) -> None:
        self.violations.append(Violation(rule, state, message))

    # -- the machine -------------------------------------------------------------------------

    def machine(self, asl: Mapping[str, Any]) -> None:
        if not isinstance(asl, Mapping):
            self.add("start-at", None, "a state machine definition is a JSON object")
            return
        self._json_values(asl, [])
        size = definition_size(asl)
        if size > MAX_DEFINITION_BYTES:
            self.add("size", None, self._size_message(asl, size))
        language = asl.get("QueryLanguage", "JSONPath")
        if language != "JSONPath":
            self.add(
                "query-language",
                None,
                f"QueryLanguage {language!r}: these rules and Relayflow's compiler are JSONPath",
            )
        if "TimeoutSeconds" in asl:
            self._seconds(None, "TimeoutSeconds", asl["TimeoutSeconds"], low=1)
        self._unknown(asl, _MACHINE_FIELDS, None, "the state machine")
        self.scope(asl, None)

    def _size_message(self, asl: Mapping[str, Any], size: int) -> str:
        states = asl.get("States") if isinstance(asl.get("States"), Mapping) else {}
        sizes = {name: definition_size({"s": state}) - 6 for name, state in states.items()}
        biggest = sorted(sizes.items(), key=lambda item: item[1], reverse=True)[:5]
        by_type: dict[str, list[int]] = {}
        for name, bytes_ in sizes.items():
            state = states[name]
            kind = state.get("Type") if isinstance(state, Mapping) else None
            by_type.setdefault(str(kind), []).append(bytes_)
        types = sorted(by_type.items(), key=lambda item: sum(item[1]), reverse=True)
        return (
            f"the definition is {size:,} bytes as compact JSON; Step Functions accepts at most "
            f"{MAX_DEFINITION_BYTES:,} bytes. Biggest states: "
            + ", ".join(f"{name!r} {bytes_:,} bytes" for name, bytes_ in biggest)
            + f". By type ({len(states)} top-level states): "
            + ", ".join(f"{kind} {sum(b):,} bytes in {len(b)}" for kind, b in types)
        )

    def _json_values(self, value: Any, pointer: list[str | int]) -> None:
        """Non-finite numbers and values JSON cannot hold, anywhere in the document."""
        if isinstance(value, float) and not math.isfinite(value):
            self.add(
                "non-finite",
                _state_of(pointer),
                f"{value} at {_pointer(pointer)} is not a JSON number",
            )
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    self.add(
                        "json-type",
                        _state_of(pointer),
                        f"key {key!r} at {_pointer(pointer)} is not a string",
                    )
                self._json_values(item, [*pointer, str(key)])
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self._json_values(item, [*pointer, index])
        elif value is not None and not isinstance(value, str | int | float | bool):
            self.add(
                "json-type",
                _state_of(pointer),
                f"{type(value).__name__} at {_pointer(pointer)} is not a JSON value",
            )

    # -- one scope (the machine, a Parallel branch, a Map item processor) ---------------------

    def scope(self, scope: Any, where: str | None) -> None:
        if not isinstance(scope, Mapping):
            self.add("scope", where, "a branch or item processor is a JSON object")
            return
        states = scope.get("States")
        if not isinstance(states, Mapping) or not states:
            self.add("scope", where, "States must be a non-empty object")
            return
        if where is not None:
            self._unknown(scope, _SCOPE_FIELDS, where, "a branch or item processor")
        start = scope.get("StartAt")
        if not isinstance(start, str) or start not in states:
            self.add("start-at", where, f"StartAt {start!r} does not name a state of this scope")
        edges: dict[str, list[str]] = {}
        terminal = False
        for name, state in states.items():
            path = _state_path(where, str(name))
            self._name(str(name), path)
            if not isinstance(state, Mapping):
                self.add("state-type", path, "a state is a JSON object")
                continue
            kind = state.get("Type")
            if kind not in STATE_TYPES:
                self.add("state-type", path, f"Type {kind!r} is not a state type")
                continue
            edges[name] = self.transitions(state, kind, path, states)
            terminal = terminal or kind in _TERMINAL_TYPES or state.get("End") is True
            self.fields(state, kind, path)
        if not terminal:
            self.add("terminal", where, "no state ends the execution (End, Succeed or Fail)")
        if isinstance(start, str) and start in states:
            reached = _reachable(start, edges)
            for name in states:
                if name not in reached:
                    self.add(
                        "reachable",
                        _state_path(where, str(name)),
                        f"no path from StartAt {start!r} reaches this state",
                    )

    def _name(self, name: str, path: str) -> None:
        problem = _name_problem(name)
        if problem:
            self.add("state-name", path, problem)
        first = self._seen_names.setdefault(name, path)
        if first != path:
            self.add(
                "duplicate-state",
                path,
                f"the name {name!r} is already used by {first!r}: state names are unique across "
                "the whole state machine, branches and item processors included",
            )

    # -- transitions ---------------------------------------------------------------------------

    def transitions(
        self, state: Mapping[str, Any], kind: str, path: str, states: Mapping[str, Any]
    ) -> list[str]:
        """Check Next/End/Default/Catch and return the names this state can move to."""
        targets: list[str] = []

        def target(value: Any, field: str) -> None:
            if isinstance(value, str) and value in states:
                targets.append(value)
            else:
                self.add(
                    "next-resolves",
                    path,
                    f"{field} {value!r} does not name a state in the same scope",
                )

        has_next, has_end = "Next" in state, "End" in state
        if kind in _FLOWING:
            if has_next == has_end:
                self.add(
                    "next-or-end",
                    path,
                    "has both Next and End" if has_next else "has neither Next nor End",
                )
            elif has_end and state["End"] is not True:
                self.add("next-or-end", path, f"End must be true, not {state['End']!r}")
            if has_next:
                target(state["Next"], "Next")
        elif has_next or has_end:
            fields = " and ".join(f for f in ("Next", "End") if f in state)
            self.add("next-or-end", path, f"a {kind} state cannot have {fields}")
        if kind == "Choice":
            self._choice(state, path, target)
        for index, catcher in enumerate(_list(state.get("Catch"))):
            if isinstance(catcher, Mapping) and "Next" in catcher:
                target(catcher["Next"], f"Catch[{index}].Next")
            else:
                self.add("next-resolves", path, f"Catch[{index}] has no Next")
        return targets

    def _choice(
        self, state: Mapping[str, Any], path: str, target: Callable[[Any, str], None]
    ) -> None:
        choices = state.get("Choices")
        if not isinstance(choices, list) or not choices:
            self.add("choice-rule", path, "Choices must be a non-empty array")
            choices = []
        for index, rule in enumerate(choices):
            where = f"Choices[{index}]"
            self._choice_rule(rule, path, where, top=True)
            if isinstance(rule, Mapping) and "Next" in rule:
                target(rule["Next"], f"{where}.Next")
        if "Default" in state:
            target(state["Default"], "Default")

    def _choice_rule(self, rule: Any, path: str, where: str, *, top: bool) -> None:
        if not isinstance(rule, Mapping):
            self.add("choice-rule", path, f"{where} must be an object")
            return
        if top and "Next" not in rule:
            self.add("choice-rule", path, f"{where} has no Next")
        if not top and "Next" in rule:
            self.add("choice-rule", path, f"{where} is nested: only top-level rules have Next")
        combinators = [key for key in _COMBINATORS if key in rule]
        comparators = [key for key in _COMPARATORS if key in rule]
        if combinators:
            if len(combinators) + len(comparators) > 1 or "Variable" in rule:
                self.add("choice-rule", path, f"{where} mixes {combinators + comparators}")
            for key in combinators:
                nested = rule[key]
                if key == "Not":
                    self._choice_rule(nested, path, f"{where}.Not", top=False)
                elif not isinstance(nested, list) or not nested:
                    self.add("choice-rule", path, f"{where}.{key} must be a non-empty array")
                else:
                    for i, item in enumerate(nested):
                        self._choice_rule(item, path, f"{where}.{key}[{i}]", top=False)
            return
        if len(comparators) != 1:
            self.add(
                "choice-rule",
                path,
                f"{where} needs exactly one comparison operator, has {comparators or 'none'}",
            )
        problem = path_problem(rule.get("Variable"))
        if problem:
            self.add("path-field", path, f"{where}.Variable {problem}")
        for key in comparators:
            self._comparison(key, rule[key], path, f"{where}.{key}")

    def _comparison(self, key: str, value: Any, path: str, where: str) -> None:
        expected = _COMPARATORS[key]
        if expected == "path":
            problem = path_problem(value)
            if problem:
                self.add("path-field", path, f"{where} {problem}")
        elif expected == "timestamp":
            problem = timestamp_problem(value)
            if problem:
                self.add("timestamp", path, f"{where} {problem}")
        elif not {
            "string": isinstance(value, str),
            "number": _is_number(value),
            "boolean": isinstance(value, bool),
        }[expected]:
            self.add("choice-rule", path, f"{where} must be a {expected}, not {value!r}")

    # -- fields ----------------------------------------------------------------------------------

    def _unknown(
        self, value: Mapping[str, Any], allowed: frozenset[str], path: str | None, what: str
    ) -> None:
        unknown = sorted(str(key) for key in value if key not in allowed)
        if unknown:
            self.add("unknown-field", path, f"{what} cannot have {', '.join(unknown)}")

    def fields(self, state: Mapping[str, Any], kind: str, path: str) -> None:
        self._unknown(state, _ALLOWED_FIELDS[kind], path, f"a {kind} state")
        language = state.get("QueryLanguage", "JSONPath")
        if language != "JSONPath":
            self.add("query-language", path, f"QueryLanguage {language!r}: JSONPath only")
        for field in ("InputPath", "OutputPath"):
            if field in state and state[field] is not None:
                self._path(path, field, state[field])
        if kind in _RESULT_PATH_TYPES and state.get("ResultPath") is not None:
            self._path(path, "ResultPath", state["ResultPath"], reference=True, context=False)
        for field in _REFERENCE_PATH_FIELDS.get(kind, ()):
            if field in state:
                self._path(path, field, state[field], reference=True)
        for field in _PAYLOAD_TEMPLATES.get(kind, ()):
            if field in state:
                self._template(state[field], path, field)
        for first, second in _EXCLUSIVE.get(kind, ()):
            if first in state and second in state:
                self.add("field-conflict", path, f"{first} and {second} cannot both be set")
        if kind == "Task":
            self._task(state, path)
        elif kind == "Wait":
            self._wait(state, path)
        elif kind == "Fail":
            for field in ("ErrorPath", "CausePath"):
                if field in state:
                    self._path_or_intrinsic(state[field], path, field)
        elif kind == "Parallel":
            branches = state.get("Branches")
            if not isinstance(branches, list) or not branches:
                self.add("scope", path, "Branches must be a non-empty array")
            else:
                for index, branch in enumerate(branches):
                    self.scope(branch, f"{path}.Branches[{index}]")
        elif kind == "Map":
            self._map(state, path)
        if kind in ("Task", "Parallel", "Map"):
            self._retry(state.get("Retry"), path)
            self._catch(state.get("Catch"), path)

    def _path(
        self, path: str, field: str, value: Any, *, reference: bool = False, context: bool = True
    ) -> None:
        problem = path_problem(value, reference=reference, context=context)
        if problem:
            self.add("path-field", path, f"{field} {problem}")

    def _path_or_intrinsic(self, value: Any, path: str, field: str) -> None:
        if isinstance(value, str) and value.startswith("States."):
            self._intrinsic(value, path, field)
        elif isinstance(value, str) and value.startswith("$"):
            problem = path_problem(value)
            if problem:
                self.add("jsonpath", path, f"{field}: {problem}")
        else:
            self.add(
                "jsonpath",
                path,
                f"{field} must be a JSONPath ($…) or an intrinsic function call (States.…), "
                f"not {value!r}",
            )

    def _intrinsic(self, value: str, path: str, field: str) -> None:
        problem, calls = intrinsic_problem(value)
        if problem:
            self.add("intrinsic", path, f"{field}: {problem}")
        if calls > MAX_INTRINSICS_PER_FIELD:
            self.add(
                "intrinsic-nesting",
                path,
                f"{field} holds {calls} intrinsic functions; Step Functions allows at most "
                f"{MAX_INTRINSICS_PER_FIELD} in one field",
            )

    def _template(self, value: Any, path: str, where: str) -> None:
        """A payload template: every key ending in ``.$`` is evaluated by Step Functions, so
        its value must be a string holding a valid path or intrinsic call."""
        if isinstance(value, Mapping):
            for key, item in value.items():
                inner = f"{where}.{key}"
                if isinstance(key, str) and key.endswith(".$"):
                    if isinstance(item, str):
                        self._path_or_intrinsic(item, path, inner)
                    else:
                        self.add(
                            "jsonpath",
                            path,
                            f"{inner} ends in '.$', so its value must be a path or intrinsic "
                            f"string, not {type(item).__name__}",
                        )
                else:
                    self._template(item, path, inner)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self._template(item, path, f"{where}[{index}]")

    def _seconds(
        self, path: str | None, field: str, value: Any, *, low: int, high: int = MAX_SECONDS
    ) -> None:
        if not _is_int(value) or not low <= value <= high:
            self.add(
                "numeric-range",
                path,
                f"{field} must be an integer from {low:,} to {high:,}, not {value!r}",
            )

    def _task(self, state: Mapping[str, Any], path: str) -> None:
        resource = state.get("Resource")
        if not isinstance(resource, str) or not resource:
            self.add("field-value", path, "a Task needs a Resource string")
        timeout = state.get("TimeoutSeconds", MAX_SECONDS)
        if "TimeoutSeconds" in state:
            self._seconds(path, "TimeoutSeconds", timeout, low=1)
        if "HeartbeatSeconds" in state:
            heartbeat = state["HeartbeatSeconds"]
            self._seconds(path, "HeartbeatSeconds", heartbeat, low=1)
            if _is_int(heartbeat) and _is_int(timeout) and 1 <= timeout <= heartbeat:
                self.add(
                    "numeric-range",
                    path,
                    f"HeartbeatSeconds {heartbeat} must be less than TimeoutSeconds {timeout}",
                )

    def _wait(self, state: Mapping[str, Any], path: str) -> None:
        present = [field for field in _WAIT_FIELDS if field in state]
        if len(present) != 1:
            self.add(
                "field-conflict",
                path,
                f"a Wait needs exactly one of {', '.join(_WAIT_FIELDS)}; has {present or 'none'}",
            )
        if "Seconds" in state:
            self._seconds(path, "Seconds", state["Seconds"], low=0)
        if "Timestamp" in state:
            problem = timestamp_problem(state["Timestamp"])
            if problem:
                self.add("timestamp", path, f"Timestamp {problem}")

    def _map(self, state: Mapping[str, Any], path: str) -> None:
        processor = state.get("ItemProcessor", state.get("Iterator"))
        if processor is None:
            self.add("scope", path, "a Map needs an ItemProcessor (or Iterator)")
        else:
            self.scope(processor, f"{path}.ItemProcessor")
        if "MaxConcurrency" in state:
            self._seconds(path, "MaxConcurrency", state["MaxConcurrency"], low=0)
        if "ToleratedFailureCount" in state:
            self._seconds(path, "ToleratedFailureCount", state["ToleratedFailureCount"], low=0)
        if "ToleratedFailurePercentage" in state:
            # An integer: AWS's schema (and its language service) refuse 2.5.
            self._seconds(
                path,
                "ToleratedFailurePercentage",
                state["ToleratedFailurePercentage"],
                low=0,
                high=100,
            )
        config = processor.get("ProcessorConfig") if isinstance(processor, Mapping) else None
        mode = config.get("Mode", "INLINE") if isinstance(config, Mapping) else "INLINE"
        if mode == "DISTRIBUTED":
            self._distributed(state, config or {}, path)
        elif mode != "INLINE":
            self.add("field-value", path, f"ProcessorConfig.Mode {mode!r}: INLINE or DISTRIBUTED")
        else:
            for field in _DISTRIBUTED_ONLY:
                if field in state:
                    self.add("field-value", path, f"{field} needs a DISTRIBUTED item processor")

    def _distributed(self, state: Mapping[str, Any], config: Mapping[str, Any], path: str) -> None:
        """A Distributed Map: its child executions' type, and the S3 integrations that read
        its items and write its results (a Resource, and Parameters as a payload template)."""
        if config.get("ExecutionType") not in _EXECUTION_TYPES:
            self.add(
                "field-value", path, "a DISTRIBUTED Map's ExecutionType is STANDARD or EXPRESS"
            )
        for field in ("ItemReader", "ResultWriter"):
            integration = state.get(field, {"Resource": ""})
            if not isinstance(integration, Mapping) or not isinstance(
                integration.get("Resource"), str
            ):
                self.add("field-value", path, f"{field} needs a Resource string")
            else:
                self._template(integration.get("Parameters"), path, f"{field}.Parameters")
        reader = state.get("ItemReader")
        reader_config = reader.get("ReaderConfig", {}) if isinstance(reader, Mapping) else {}
        input_type = (
            reader_config.get("InputType", "JSON") if isinstance(reader_config, Mapping) else None
        )
        if input_type not in _READER_INPUT_TYPES:
            self.add(
                "field-value",
                path,
                f"ItemReader InputType {input_type!r} is not one of {sorted(_READER_INPUT_TYPES)}",
            )

    def _retry(self, retriers: Any, path: str) -> None:
        if retriers is None:
            return
        items = self._error_handlers(retriers, path, "Retry")
        for index, retrier in items:
            where = f"Retry[{index}]"
            self._unknown(retrier, _RETRIER_FIELDS, path, where)
            if "MaxAttempts" in retrier:
                self._seconds(path, f"{where}.MaxAttempts", retrier["MaxAttempts"], low=0)
            if "IntervalSeconds" in retrier:
                self._seconds(path, f"{where}.IntervalSeconds", retrier["IntervalSeconds"], low=1)
            if "MaxDelaySeconds" in retrier:
                self._seconds(
                    path,
                    f"{where}.MaxDelaySeconds",
                    retrier["MaxDelaySeconds"],
                    low=1,
                    high=MAX_DELAY_SECONDS,
                )
            rate = retrier.get("BackoffRate", 2.0)
            if not _is_number(rate) or rate < 1.0:
                self.add(
                    "numeric-range",
                    path,
                    f"{where}.BackoffRate must be a number of at least 1.0, not {rate!r}",
                )
            jitter = retrier.get("JitterStrategy", "NONE")
            if jitter not in _JITTER_STRATEGIES:
                self.add(
                    "field-value", path, f"{where}.JitterStrategy must be FULL or NONE: {jitter!r}"
                )

    def _catch(self, catchers: Any, path: str) -> None:
        if catchers is None:
            return
        for index, catcher in self._error_handlers(catchers, path, "Catch"):
            self._unknown(catcher, _CATCHER_FIELDS, path, f"Catch[{index}]")
            if catcher.get("ResultPath") is not None:
                self._path(
                    path,
                    f"Catch[{index}].ResultPath",
                    catcher["ResultPath"],
                    reference=True,
                    context=False,
                )

    def _error_handlers(
        self, handlers: Any, path: str, field: str
    ) -> Iterator[tuple[int, Mapping[str, Any]]]:
        """Yield the well-formed retriers or catchers after checking ``ErrorEquals`` and
        where ``States.ALL`` stands."""
        if not isinstance(handlers, list):
            self.add("error-equals", path, f"{field} must be an array")
            return
        for index, handler in enumerate(handlers):
            where = f"{field}[{index}]"
            if not isinstance(handler, Mapping):
                self.add("error-equals", path, f"{where} must be an object")
                continue
            errors = handler.get("ErrorEquals")
            if (
                not isinstance(errors, list)
                or not errors
                or not all(isinstance(e, str) and e for e in errors)
            ):
                self.add(
                    "error-equals", path, f"{where}.ErrorEquals must be a non-empty string array"
                )
            elif "States.ALL" in errors:
                if len(errors) != 1:
                    self.add(
                        "catch-order",
                        path,
                        f"{where}: States.ALL must be the only error name in its ErrorEquals",
                    )
                if index != len(handlers) - 1:
                    self.add(
                        "catch-order",
                        path,
                        f"{where}: a States.ALL {'retrier' if field == 'Retry' else 'catcher'} "
                        "must be the last one",
                    )
            yield index, handler


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _reachable(start: str, edges: Mapping[str, list[str]]) -> set[str]:
    seen, pending = {start}, [start]
    while pending:
        for target in edges.get(pending.pop(), ()):
            if target not in seen:
                seen.add(target)
                pending.append(target)
    return seen


def _pointer(pointer: list[str | int]) -> str:
    escaped = (str(p).replace("~", "~0").replace("/", "~1") for p in pointer)
    return "/" + "/".join(escaped)


def _state_of(pointer: list[str | int]) -> str | None:
    """The state path a JSON pointer falls inside (None for machine-level fields)."""
    state: str | None = None
    scope: str | None = None
    i = 0
    while i + 1 < len(pointer) and pointer[i] == "States":
        state = _state_path(scope, str(pointer[i + 1]))
        rest = pointer[i + 2 :]
        if len(rest) >= 3 and rest[0] == "Branches" and isinstance(rest[1], int):
            scope, i = f"{state}.Branches[{rest[1]}]", i + 4
        elif len(rest) >= 2 and rest[0] in ("ItemProcessor", "Iterator"):
            scope, i = f"{state}.ItemProcessor", i + 3
        else:
            break
    return state
