"""Compatibility fixes to moto's ASL interpreter: JSONPath, Choice rules, ``States.*``
errors and intrinsics, timestamps and the context object.

Registered through :mod:`relayflow.local.compat_registry` on import; applied in the order
:data:`relayflow.local.compat.FAMILIES` gives.
"""

from __future__ import annotations

import copy
import datetime
import functools
import re
import threading
import weakref
from typing import Any

from relayflow.local.compat_registry import Patches, fix, iso_timestamp, runtime_error

# The ISO-8601 "extended offset date-time" AWS accepts in Wait Timestamp/TimestampPath.
_TIMESTAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$")
# A JSON backslash escape left in an intrinsic literal by moto's parser: \\ or \/.
_JSON_BACKSLASH = re.compile(r"\\([\\/])")


def _is_definite(node: Any) -> bool:
    """Whether a parsed JSONPath selects at most one value (Jayway's "definite path")."""
    from jsonpath_ng.jsonpath import Child, Fields, Index, Root, This

    if isinstance(node, (Root, This)):
        return True
    if isinstance(node, Child):
        return _is_definite(node.left) and _is_definite(node.right)
    if isinstance(node, Fields):
        return len(node.fields) == 1 and node.fields[0] != "*"
    if isinstance(node, Index):
        return len(node.indices) == 1
    return False


_JSONPATH_PARSERS = threading.local()


@functools.lru_cache(maxsize=16384)
def _parse_jsonpath(path: str) -> tuple[Any, bool]:
    # jsonpath_ng's parse() builds a new parser (its yacc tables) per call, which costs
    # more than the parse; one parser per thread (a PLY parser keeps state while parsing).
    parser = getattr(_JSONPATH_PARSERS, "parser", None)
    if parser is None:
        from jsonpath_ng.ext.parser import ExtendedJsonPathParser

        parser = _JSONPATH_PARSERS.parser = ExtendedJsonPathParser()
    expression = parser.parse(path)
    return expression, _is_definite(expression)


@fix("jsonpath_definite_paths", "notes rows 5, 7b")
def _jsonpath_definite_paths(patches: Patches) -> None:
    """JSONPath results follow AWS (Jayway) semantics. moto returned ``["a"]`` for
    ``$.items[0].n`` and ``[6]`` for ``$[0].v`` (a side effect of its fix for moto#7825), in
    Parameters, ResultSelector, InputPath, OutputPath, ItemsPath and intrinsic arguments; and a
    scalar for ``$..x``. On AWS a *definite* path (only names and single indexes) yields the one
    value it selects, or fails when nothing is there; an *indefinite* path (``..``, ``*``,
    slices, filters, unions) always yields a list, possibly empty."""
    from moto.stepfunctions.parser.asl.utils import json_path

    original = json_path.extract_json

    def extract_json(path: str, data: Any) -> Any:
        expression, definite = _parse_jsonpath(path)
        matches = expression.find(data)
        if definite:
            if not matches:
                raise json_path.NoSuchJsonPathError(json_path=path, data=data)
            return matches[0].value
        return [match.value for match in matches]

    patches.set(json_path, "extract_json", extract_json)
    patches.set_everywhere("moto.stepfunctions.parser", "extract_json", original, extract_json)


def _states_error_name(error_name: str | None = None) -> Any:
    from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import (
        CustomErrorName,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
        StatesErrorName,
    )

    if error_name is not None and error_name.startswith("States."):
        try:
            return StatesErrorName.from_name(error_name)
        except ValueError:
            pass
    return CustomErrorName(error_name=error_name)


@fix("map_parallel_states_errors", "notes row 4")
def _map_parallel_states_errors(patches: Patches) -> None:
    """A ``States.*`` error that ends a Map iteration or a Parallel branch (``States.Timeout``,
    ``States.TaskFailed``, ``States.Runtime``…) reaches the Map/Parallel state under its own
    name. moto re-wrapped it as a custom error name, which rejects the ``States.`` prefix, so it
    surfaced as ``States.Runtime`` ("Custom Error Names MUST NOT begin with the prefix
    'States.'") and a Catch for ``States.Timeout`` on the Map never fired."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import (
        iteration_worker,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_parallel import branches_decl

    patches.set(iteration_worker, "CustomErrorName", _states_error_name)
    patches.set(branches_decl, "CustomErrorName", _states_error_name)


#: Map run (its job pool) → (the Map state's input, the one deep copy of it its items share).
_MAP_INPUTS: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()
_MAP_INPUTS_LOCK = threading.Lock()


def map_input_copy(job_pool: Any, map_input: Any) -> Any:
    """One deep copy of a Map state's input per Map run (``job_pool``), made by the first
    item that asks. Nothing writes into ``$states.input`` in place (readers get copies), so
    the items of one run can share it."""
    with _MAP_INPUTS_LOCK:
        kept = _MAP_INPUTS.get(job_pool)
        if kept is None or kept[0] is not map_input:
            kept = _MAP_INPUTS[job_pool] = (map_input, copy.deepcopy(map_input))
        return kept[1]


@fix("map_input_copied_once", "local runtime: a Map over items from its input is quadratic")
def _map_input_copied_once(patches: Patches) -> None:
    """A Map's ``ItemSelector`` (or ``Parameters``) sees the Map state's input as ``$`` and as
    ``$states.input`` for every item, as on AWS. moto deep-copied the whole input into each
    item's ``$states.input`` before evaluating the selector, so a Map over ``n`` items taken
    from its own input (``ItemsPath``) copied the ``n`` items ``n`` times: 10,000 items cost
    77 times what 1,000 did. The items of one Map run now share one copy."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor import (  # noqa: E501
        inline_item_processor_worker as worker_module,
    )

    worker = worker_module.InlineItemProcessorWorker

    def _eval_input(self: Any, env_frame: Any) -> None:
        if not self._parameters and not self._item_selector:
            return
        map_state_input = self._env.stack[-1]
        states = env_frame.states
        # What States.reset does, with the run's shared copy in place of a copy per item.
        states._states_data["input"] = map_input_copy(self._job_pool, map_state_input)
        states._states_data["result"] = None
        states._states_data["errorOutput"] = None
        env_frame.stack.append(map_state_input)
        if self._item_selector:
            self._item_selector.eval(env_frame)
        elif self._parameters:
            self._parameters.eval(env_frame)
        states.reset(input_value=env_frame.stack[-1])

    patches.set(worker, "_eval_input", _eval_input)


@fix("fail_state_states_errors", "notes row 4: the same re-wrap in a Fail state")
def _fail_state_states_errors(patches: Patches) -> None:
    """A ``Fail`` state whose ``ErrorPath`` resolves to a ``States.*`` name (a Catch that
    rethrows the error it caught: ``States.Runtime``, ``States.Timeout``…) fails with that
    name and cause, as on AWS. moto built a custom error name from it, which rejects the
    ``States.`` prefix, so the run failed with ``States.Runtime`` and the cause "Custom Error
    Names MUST NOT begin with the prefix 'States.'" instead of the error it rethrew."""
    from moto.stepfunctions.parser.asl.component.state.fail import state_fail

    patches.set(state_fail, "CustomErrorName", _states_error_name)


@fix("choice_no_match", "notes row 3")
def _choice_no_match(patches: Patches) -> None:
    """A Choice state whose rules all evaluate false and that has no ``Default`` fails with
    ``States.NoChoiceMatched`` on AWS. moto raised a Python ``RuntimeError``, reported as
    ``States.Runtime``, so a Catch/handler keyed on ``States.NoChoiceMatched`` never saw it."""
    from moto.stepfunctions.parser.asl.component.state.choice.state_choice import StateChoice

    def eval_state(self: Any, env: Any) -> None:
        for rule in self.choices_decl.rules:
            rule.eval(env)
            if env.stack.pop() is True:
                env.stack.append(rule.next_stmt.name)
                return
        if self.default_state is None:
            raise runtime_error(
                env,
                f"No Choice Rules matched in state '{self.name}' and no Default is specified.",
                error="States.NoChoiceMatched",
            )
        env.stack.append(self.default_state.state_name)

    patches.set(StateChoice, "_eval_state", eval_state)


@fix("choice_missing_variable", "notes row 3")
def _choice_missing_variable(patches: Patches) -> None:
    """A Choice rule whose ``Variable`` path is not in the input fails the state with
    ``States.Runtime`` ("Invalid path ... The choice state's condition path references an invalid
    value.") on AWS; only ``IsPresent`` may test a missing path. moto evaluated the comparison
    to false silently and took the Default branch."""
    from moto.stepfunctions.parser.asl.component.state.choice.comparison.comparison_operator_type import (  # noqa: E501
        ComparisonOperatorType,
    )
    from moto.stepfunctions.parser.asl.component.state.choice.comparison.comparison_variable import (  # noqa: E501
        ComparisonVariable,
    )
    from moto.stepfunctions.parser.asl.component.state.choice.comparison.variable import (
        NoSuchVariable,
    )

    def eval_body(self: Any, env: Any) -> None:
        self.variable.eval(env)
        operator = getattr(self.comparison_function, "operator_type", None)
        if (
            isinstance(env.stack[-1], NoSuchVariable)
            and operator != ComparisonOperatorType.IsPresent
        ):
            path = self.variable.string_sampler.literal_value
            raise runtime_error(
                env,
                f"Invalid path '{path}': The choice state's condition path references an "
                "invalid value.",
            )
        self.comparison_function.eval(env)

    patches.set(ComparisonVariable, "_eval_body", eval_body)


def string_matches(value: str, pattern: str) -> bool:
    """ASL ``StringMatches``: ``*`` matches any run of characters, ``\\`` escapes the next
    character (``\\*`` is a literal asterisk); everything else, ``?`` and ``[`` included, is
    literal."""
    parts: list[str] = []
    escaped = False
    for char in pattern:
        if escaped:
            parts.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "*":
            parts.append(".*")
        else:
            parts.append(re.escape(char))
    if escaped:
        parts.append(re.escape("\\"))
    return re.fullmatch("".join(parts), value, flags=re.DOTALL) is not None


@fix("string_matches", "notes row 3")
def _string_matches(patches: Patches) -> None:
    """``StringMatches`` treats only ``*`` as a wildcard and ``\\*`` as an escaped literal
    asterisk (AWS Choice rules docs). moto used ``fnmatch``, where ``?`` and ``[...]`` are
    wildcards too and ``\\*`` cannot escape."""
    from moto.stepfunctions.parser.asl.component.state.choice.comparison.operator.implementations.string_operators import (  # noqa: E501
        StringMatches,
    )

    def compare(variable: Any, comparison_value: Any) -> bool:
        return isinstance(variable, str) and string_matches(variable, comparison_value)

    patches.set(StringMatches, "_compare", staticmethod(compare))


def format_template(template: str, values: list[str]) -> str:
    """``States.Format``: each ``{}`` takes the next value; ``\\{``, ``\\}``, ``\\\\`` and
    ``\\'`` are the literal characters; any other brace is literal text."""
    out: list[str] = []
    index = 0
    i = 0
    while i < len(template):
        char = template[i]
        if char == "\\" and i + 1 < len(template):
            out.append(template[i + 1])
            i += 2
            continue
        if char == "{" and template.startswith("{}", i):
            if index >= len(values):
                raise ValueError(
                    f"States.Format template '{template}' has more placeholders than arguments"
                )
            out.append(values[index])
            index += 1
            i += 2
            continue
        out.append(char)
        i += 1
    if index != len(values):
        raise ValueError(
            f"States.Format template '{template}' has {index} placeholders but received "
            f"{len(values)} arguments"
        )
    return "".join(out)


@fix("states_format_escapes", "notes row 7")
def _states_format_escapes(patches: Patches) -> None:
    """``States.Format`` honours the intrinsic escapes ``\\{``, ``\\}`` and ``\\\\`` and keeps
    any other brace as text. moto used Python ``str.format``: ``\\{ \\}`` failed with
    ``KeyError``, ``\\\\`` stayed doubled, and a template read from a path that contained
    ``{name}`` failed. moto also hands a literal template over with the JSON escaping of the
    definition still in it (``\\\\`` for one backslash), which is undone first.
    (``\\'`` still breaks moto's intrinsic lexer: not fixed.)"""
    from moto.stepfunctions.parser.asl.component.intrinsic.argument.argument import (
        ArgumentLiteral,
    )
    from moto.stepfunctions.parser.asl.component.intrinsic.function.statesfunction.generic.string_format import (  # noqa: E501
        StringFormat,
    )

    def eval_body(self: Any, env: Any) -> None:
        self.argument_list.eval(env=env)
        args = env.stack.pop()
        template = args[0]
        if isinstance(self.argument_list.arguments[0], ArgumentLiteral):
            template = _JSON_BACKSLASH.sub(lambda m: m.group(1), template)
        values = [StringFormat._to_str_repr(value) for value in args[1:]]
        env.stack.append(format_template(template, values))

    patches.set(StringFormat, "_eval_body", eval_body)


def parse_timestamp(value: str) -> datetime.datetime | None:
    """An ASL timestamp (RFC 3339: ``T``, ``Z`` or a numeric offset, optional fraction) as an
    aware datetime, or None when it is not one."""
    if not isinstance(value, str) or not _TIMESTAMP_RE.match(value):
        return None
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    head, _, rest = text.partition(".")
    if rest:
        # Keep microseconds: Python parses at most six fractional digits.
        digits = re.match(r"\d+", rest)
        assert digits is not None
        text = f"{head}.{digits.group()[:6].ljust(6, '0')}{rest[digits.end() :]}"
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        return None


@fix("timestamp_waits", "notes row 6")
def _timestamp_waits(patches: Patches) -> None:
    """Wait ``Timestamp``/``TimestampPath`` waits until that instant. moto compared the UTC time
    with the naive *local* ``datetime.now()`` (no wait at all east of UTC, hours too long west
    of it), dropped fractional seconds (fired up to 1-2 s early) and rejected ``+02:00``
    offsets with ``States.Runtime``. AWS accepts any RFC 3339 offset and fractional seconds."""
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.timestamp import (
        Timestamp,
    )

    def get_wait_seconds(self: Any, env: Any) -> float:
        from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
            FailureEventException,
        )

        self.string.eval(env=env)
        timestamp_str = env.stack.pop()
        timestamp = parse_timestamp(timestamp_str)
        if timestamp is None:
            raise FailureEventException(self._create_failure_event(env, str(timestamp_str)))
        now = datetime.datetime.now(datetime.UTC)
        return max(0.0, (timestamp - now).total_seconds())

    patches.set(Timestamp, "_from_timestamp_string", staticmethod(parse_timestamp))
    patches.set(Timestamp, "_get_wait_seconds", get_wait_seconds)


@fix("choice_timestamp_formats", "notes rows 3, 6")
def _choice_timestamp_formats(patches: Patches) -> None:
    """Choice ``Timestamp*`` comparisons and ``IsTimestamp`` accept every RFC 3339 timestamp,
    with fractional seconds and numeric offsets, and compare instants. moto parsed only
    ``%Y-%m-%dT%H:%M:%SZ``, so ``2026-11-05T10:00:00.123Z`` (the form Step Functions and
    Relayflow's ``run.started_at`` use) or ``+02:00`` counted as not a timestamp and every
    comparison with it was false."""
    from moto.stepfunctions.parser.asl.component.state.choice.comparison.operator.implementations.is_operator import (  # noqa: E501
        IsTimestamp,
    )

    patches.set(IsTimestamp, "string_to_timestamp", staticmethod(parse_timestamp))


@fix("context_start_time_iso", "notes row 7b")
def _context_start_time_iso(patches: Patches) -> None:
    """``$$.Execution.StartTime`` is an ISO-8601 string (``...T10:00:00.123Z``) on AWS. moto put
    a ``datetime`` in the context object, so reading it into the state (``$$``, or the field)
    made ``describe_execution`` raise ``TypeError: Object of type datetime is not JSON
    serializable`` in the caller's process."""
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    original = ExecutionWorker._get_evaluation_environment

    def get_evaluation_environment(self: Any) -> Any:
        env = original(self)
        execution = env.states.context_object.context_object_data["Execution"]
        if isinstance(execution.get("StartTime"), datetime.datetime):
            execution["StartTime"] = iso_timestamp(execution["StartTime"])
        return env

    patches.set(ExecutionWorker, "_get_evaluation_environment", get_evaluation_environment)
