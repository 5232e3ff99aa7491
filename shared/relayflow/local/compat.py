"""Compatibility layer over moto's Step Functions interpreter (moto 5.2.5 only).

moto runs real ASL, but about 40 documented behaviours differ from AWS
(``notes/moto-asl.md``). Each function below restores one of them that compiled Relayflow ASL
can reach, names the finding and the AWS behaviour in its docstring, and has a test in
``tests/integration/local/`` that fails without it. The ASL itself never changes to suit moto.

Patches are process-wide, idempotent and reversible (:func:`apply` / :func:`revert`);
:class:`~relayflow.local.runtime.LocalRuntime` applies all of them on ``__enter__``. The
*infrastructure* patches (Lambda routing, client cache, scaled waits, halt notification,
termination hook) are what makes the runtime work and are always applied.

Every patch targets a private API of one exact moto version, so :func:`check_moto_version`
refuses any other version instead of patching it blindly.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import functools
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

MOTO_VERSION = "5.2.5"

# The ISO-8601 "extended offset date-time" AWS accepts in Wait Timestamp/TimestampPath.
_TIMESTAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$")
_HEARTBEAT_TIMEOUT = "States.HeartbeatTimeout"
# A JSON backslash escape left in an intrinsic literal by moto's parser: \\ or \/.
_JSON_BACKSLASH = re.compile(r"\\([\\/])")


class MotoVersionError(RuntimeError):
    """The installed moto is not the version this layer was written and tested against."""


def check_moto_version() -> None:
    """Fail loudly unless moto is exactly :data:`MOTO_VERSION`."""
    import moto

    if moto.__version__ != MOTO_VERSION:
        raise MotoVersionError(
            f"relayflow.local needs moto=={MOTO_VERSION} (its compatibility layer patches that "
            f"version's interpreter); found moto {moto.__version__}. "
            f"Install it with: pip install 'moto[stepfunctions]=={MOTO_VERSION}'"
        )


# --------------------------------------------------------------------------------------------
# Patch bookkeeping
# --------------------------------------------------------------------------------------------

_MISSING = object()


class _Patches:
    """Attribute replacements of one fix, kept so the fix can be reverted."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def set(self, owner: Any, attr: str, value: Any) -> None:
        self._saved.append((owner, attr, owner.__dict__.get(attr, _MISSING)))
        setattr(owner, attr, value)

    def set_everywhere(self, package: str, attr: str, original: Any, value: Any) -> None:
        """Replace ``attr`` in every loaded module of ``package`` that imported ``original``."""
        import sys

        for name, module in list(sys.modules.items()):
            if (
                module is not None
                and name.startswith(package)
                and getattr(module, attr, None) is original
            ):
                self.set(module, attr, value)

    def revert(self) -> None:
        for owner, attr, original in reversed(self._saved):
            if original is _MISSING:
                delattr(owner, attr)
            else:
                setattr(owner, attr, original)
        self._saved.clear()


@dataclass(frozen=True)
class Fix:
    """One compatibility fix: the finding it addresses and the function that applies it."""

    name: str
    finding: str
    install: Callable[[_Patches], None]
    infrastructure: bool = False


_FIXES: dict[str, Fix] = {}
_applied: dict[str, _Patches] = {}
_apply_lock = threading.RLock()


def _fix(name: str, finding: str, *, infrastructure: bool = False) -> Callable[..., Any]:
    def register(install: Callable[[_Patches], None]) -> Callable[[_Patches], None]:
        _FIXES[name] = Fix(name, finding, install, infrastructure)
        return install

    return register


def fixes() -> list[Fix]:
    """Every fix, in the order it is applied."""
    return list(_FIXES.values())


def apply(skip: Iterable[str] = ()) -> None:
    """Apply every fix except ``skip`` (infrastructure fixes cannot be skipped). Idempotent.

    ``skip`` exists so a test can show that a fix is needed; a skipped fix that was applied
    before is reverted.
    """
    check_moto_version()
    _import_interpreter()
    skipped = set(skip)
    unknown = skipped - set(_FIXES)
    if unknown:
        raise ValueError(f"unknown compat fixes: {sorted(unknown)}")
    with _apply_lock:
        for fix in _FIXES.values():
            wanted = fix.infrastructure or fix.name not in skipped
            if wanted and fix.name not in _applied:
                patches = _Patches()
                fix.install(patches)
                _applied[fix.name] = patches
            elif not wanted and fix.name in _applied:
                _applied.pop(fix.name).revert()


def revert() -> None:
    """Undo every fix (the interpreter is plain moto again)."""
    with _apply_lock:
        for name in reversed(list(_applied)):
            _applied.pop(name).revert()


def applied() -> list[str]:
    return list(_applied)


def _import_interpreter() -> None:
    """Import every interpreter module that a fix patches, so that name-level patches
    (``set_everywhere``) reach all of them."""
    import moto.stepfunctions.parser.asl.component.state.choice.comparison.operator.implementations.string_operators  # noqa: E501
    import moto.stepfunctions.parser.asl.component.state.exec.state_map.state_map
    import moto.stepfunctions.parser.asl.component.state.exec.state_parallel.state_parallel
    import moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task_factory
    import moto.stepfunctions.parser.asl.parse.asl_parser
    import moto.stepfunctions.parser.backend.execution
    import moto.stepfunctions.parser.models
    import moto.stepfunctions.responses  # noqa: F401


def _runtime_error(env: Any, cause: str, error: str = "States.Runtime") -> Exception:
    """A FailureEventException the interpreter handles like its own ``States.*`` failures."""
    from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
        StatesErrorName,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    return FailureEventException(
        failure_event=FailureEvent(
            env=env,
            error_name=StatesErrorName.from_name(error),
            event_type=HistoryEventType.TaskFailed,
            event_details=EventDetails(
                taskFailedEventDetails=TaskFailedEventDetails(error=error, cause=cause)
            ),
        )
    )


# --------------------------------------------------------------------------------------------
# Infrastructure: Lambda routing, client cache, halt notification, scaled time, termination
# --------------------------------------------------------------------------------------------

_lambda_endpoint_url: str | None = None
_clients: dict[tuple[str, str, str | None], Any] = {}
_clients_lock = threading.Lock()
#: Notified each time an execution terminates (see :func:`wait_for_termination`).
terminated = threading.Condition()
_session: Any = None
#: Guards :func:`boto3_session` and every ``.client()`` call on it.
session_lock = threading.RLock()


def boto3_session() -> Any:
    """One boto3 session for every client the local runtime creates: botocore then loads
    each service model once per process instead of once per client. Created after moto is
    imported, so moto's request stubber is among its handlers. Guard ``.client()`` calls
    with :data:`session_lock` (sessions are not thread-safe)."""
    global _session
    with session_lock:
        if _session is None:
            import boto3
            import moto.core.models  # noqa: F401 - registers moto's botocore stubber

            _session = boto3.session.Session(
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )
        return _session


def set_lambda_endpoint(url: str | None) -> None:
    """Route the interpreter's Lambda Invoke calls to ``url`` (None: back to moto's default)."""
    global _lambda_endpoint_url
    _lambda_endpoint_url = url
    clear_client_cache()


def clear_client_cache() -> None:
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()


@_fix("lambda_routing_and_client_cache", "notes row 17, FN", infrastructure=True)
def _lambda_routing_and_client_cache(patches: _Patches) -> None:
    """moto's interpreter builds a new boto3 client for every Task (``boto_client_for``), which
    costs CPU under Map fan-out (row 17). This returns one cached client per service, and sends
    ``lambda`` to the runtime's Invoke endpoint explicitly (moto's mock only intercepts
    ``*.amazonaws.com`` URLs, so a 127.0.0.1 endpoint reaches the real server)."""
    from botocore.config import Config
    from moto.stepfunctions.parser.asl.utils import boto_client as boto_client_module

    original = boto_client_module.boto_client_for

    def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        endpoint = _lambda_endpoint_url if service == "lambda" else None
        key = (region, service, endpoint)
        client = _clients.get(key)
        if client is not None:
            return client
        with _clients_lock, session_lock:
            client = _clients.get(key)
            if client is None:
                client = boto3_session().client(
                    service_name=service,
                    region_name=region,
                    aws_access_key_id="ak",
                    aws_secret_access_key="sk",
                    endpoint_url=endpoint,
                    config=Config(
                        parameter_validation=False,
                        retries={"max_attempts": 0, "total_max_attempts": 1},
                        connect_timeout=60,
                        read_timeout=99999999,
                        max_pool_connections=256,
                        tcp_keepalive=True,
                    ),
                )
                _clients[key] = client
        return client

    patches.set_everywhere(
        "moto.stepfunctions.parser", "boto_client_for", original, boto_client_for
    )


@_fix("halt_notification", "notes rows 6, 12", infrastructure=True)
def _halt_notification(patches: _Patches) -> None:
    """moto signals a stop by pulsing ``program_state_event`` (set, then clear at once), which a
    thread that is not already waiting never sees. Every change of program state now also wakes
    the waits registered through :mod:`relayflow.local.timescale` on that environment."""
    from moto.stepfunctions.parser.asl.eval.environment import Environment

    from relayflow.local import timescale

    for name in ("set_ended", "set_error", "set_timed_out", "set_stop"):
        original = getattr(Environment, name)

        def notifying(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> None:
            _original(self, *args, **kwargs)
            timescale.notify_halted(self)

        patches.set(Environment, name, notifying)


@_fix("scaled_time", "notes rows 1, 6", infrastructure=True)
def _scaled_time(patches: _Patches) -> None:
    """Wait states and Retry back-off sleeps take real time in moto (row 6: ``Seconds: 2`` took
    2.03 s). Both now sleep ``seconds * time_scale`` and wake at once when the execution stops.
    Fractional seconds are kept (moto rounds the waited time down to whole seconds)."""
    from moto.stepfunctions.parser.asl.component.common.retry.max_attempts_decl import (
        MaxAttemptsOutcome,
    )
    from moto.stepfunctions.parser.asl.component.common.retry.retrier_decl import (
        RetrierDecl,
        RetrierOutcome,
    )
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import (
        WaitFunction,
    )

    from relayflow.local import timescale

    def wait_eval_body(self: Any, env: Any) -> None:
        timescale.sleep(env, float(self._get_wait_seconds(env=env)))

    def retrier_eval_body(self: Any, env: Any) -> None:
        self.error_equals.eval(env)
        if not env.stack.pop():
            env.stack.append(RetrierOutcome.Skipped)
            return
        self.max_attempts.eval(env=env)
        if env.stack.pop() == MaxAttemptsOutcome.EXHAUSTED:
            env.stack.append(RetrierOutcome.Failed)
            return
        self.interval_seconds.eval(env=env)
        self.backoff_rate.eval(env=env)
        self.max_delay_seconds.eval(env=env)
        self.jitter_strategy.eval(env=env)
        timescale.sleep(env, float(env.stack.pop()))
        env.stack.append(RetrierOutcome.Executed)

    patches.set(WaitFunction, "_eval_body", wait_eval_body)
    patches.set(RetrierDecl, "_eval_body", retrier_eval_body)


@_fix("termination_hook", "runtime support", infrastructure=True)
def _termination_hook(patches: _Patches) -> None:
    """Notify :data:`terminated` when an execution ends, so waiting for one needs no polling.
    An ABORTED execution also keeps the ``error``/``cause`` given to ``StopExecution`` (row 12:
    moto dropped them), as ``DescribeExecution`` reports them on AWS."""
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped
    from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication

    original = BaseExecutionWorkerCommunication.terminated

    def notifying_terminated(self: Any) -> None:
        original(self)
        state = self.execution.exec_worker.env.program_state()
        if isinstance(state, ProgramStopped):
            self.execution.error = state.error or None
            self.execution.cause = state.cause or None
        with terminated:
            terminated.notify_all()

    patches.set(BaseExecutionWorkerCommunication, "terminated", notifying_terminated)


# --------------------------------------------------------------------------------------------
# Behaviour fixes, one per finding
# --------------------------------------------------------------------------------------------


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


@_fix("jsonpath_definite_paths", "notes rows 5, 7b")
def _jsonpath_definite_paths(patches: _Patches) -> None:
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


@_fix("map_parallel_states_errors", "notes row 4")
def _map_parallel_states_errors(patches: _Patches) -> None:
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


@_fix("choice_no_match", "notes row 3")
def _choice_no_match(patches: _Patches) -> None:
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
            raise _runtime_error(
                env,
                f"No Choice Rules matched in state '{self.name}' and no Default is specified.",
                error="States.NoChoiceMatched",
            )
        env.stack.append(self.default_state.state_name)

    patches.set(StateChoice, "_eval_state", eval_state)


@_fix("choice_missing_variable", "notes row 3")
def _choice_missing_variable(patches: _Patches) -> None:
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
            raise _runtime_error(
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


@_fix("string_matches", "notes row 3")
def _string_matches(patches: _Patches) -> None:
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


@_fix("states_format_escapes", "notes row 7")
def _states_format_escapes(patches: _Patches) -> None:
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


@_fix("timestamp_waits", "notes row 6")
def _timestamp_waits(patches: _Patches) -> None:
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


@_fix("choice_timestamp_formats", "notes rows 3, 6")
def _choice_timestamp_formats(patches: _Patches) -> None:
    """Choice ``Timestamp*`` comparisons and ``IsTimestamp`` accept every RFC 3339 timestamp,
    with fractional seconds and numeric offsets, and compare instants. moto parsed only
    ``%Y-%m-%dT%H:%M:%SZ``, so ``2026-11-05T10:00:00.123Z`` (the form Step Functions and
    Relayflow's ``run.started_at`` use) or ``+02:00`` counted as not a timestamp and every
    comparison with it was false."""
    from moto.stepfunctions.parser.asl.component.state.choice.comparison.operator.implementations.is_operator import (  # noqa: E501
        IsTimestamp,
    )

    patches.set(IsTimestamp, "string_to_timestamp", staticmethod(parse_timestamp))


def iso_timestamp(value: datetime.datetime) -> str:
    """``2026-11-05T10:00:00.123Z``: the form Step Functions uses for context timestamps."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    utc = value.astimezone(datetime.UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


@_fix("context_start_time_iso", "notes row 7b")
def _context_start_time_iso(patches: _Patches) -> None:
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


class _HeartbeatTimeoutMarker:
    """Mixin marking the error name of a missed heartbeat (see ``heartbeat_timeout_catch``)."""


@_fix("heartbeat_timeout_catch", "notes row 9")
def _heartbeat_timeout_catch(patches: _Patches) -> None:
    """A missed heartbeat is matched by ``States.HeartbeatTimeout`` in Retry and Catch (AWS
    error-handling docs: the name "is only available inside the Catch and Retry fields") and
    still by ``States.Timeout``, which AWS documents as covering missed heartbeats; the error
    reported stays ``States.Timeout``. moto's ``States.HeartbeatTimeout`` catcher never
    matched."""
    from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import (
        ErrorEqualsDecl,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
        StatesErrorName,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task import (
        StateTask,
    )
    from moto.stepfunctions.parser.asl.eval.callback.callback import HeartbeatTimeoutError

    class HeartbeatTimeoutName(_HeartbeatTimeoutMarker, StatesErrorName):
        def __init__(self) -> None:
            super().__init__(typ=StatesErrorNameType.StatesTimeout)

    original_from_error = StateTask._from_error
    original_matches = ErrorEqualsDecl._eval_body

    def from_error(self: Any, env: Any, ex: Exception) -> Any:
        if isinstance(ex, HeartbeatTimeoutError):
            failure_event = self._get_timed_out_failure_event(env)
            failure_event.error_name = HeartbeatTimeoutName()
            return failure_event
        return original_from_error(self, env, ex)

    def error_equals(self: Any, env: Any) -> None:
        error_name = env.stack[-1]
        original_matches(self, env)
        if (
            env.stack[-1] is False
            and isinstance(error_name, _HeartbeatTimeoutMarker)
            and any(name.error_name == _HEARTBEAT_TIMEOUT for name in self.error_names)
        ):
            env.stack[-1] = True

    patches.set(StateTask, "_from_error", from_error)
    patches.set(ErrorEqualsDecl, "_eval_body", error_equals)


@_fix("send_task_failure_cause", "notes row 9")
def _send_task_failure_cause(patches: _Patches) -> None:
    """``SendTaskFailure`` passes its ``cause`` on to the failed Task (and so to a Catch's
    ``Cause``), as on AWS. moto's response handler dropped ``cause``, leaving it null."""
    from moto.core.responses import EmptyResult
    from moto.stepfunctions.responses import StepFunctionResponse

    def send_task_failure(self: Any) -> Any:
        self.stepfunction_backend.send_task_failure(
            self._get_param("taskToken"),
            error=self._get_param("error"),
            cause=self._get_param("cause"),
        )
        return EmptyResult()

    patches.set(StepFunctionResponse, "send_task_failure", send_task_failure)


@_fix("task_token_per_attempt", "notes row 9")
def _task_token_per_attempt(patches: _Patches) -> None:
    """Each attempt of a ``.waitForTaskToken`` Task gets a new task token (AWS issues one per
    attempt, so a retry waits for a fresh callback). moto made the token once per state entry:
    the retry reused it and failed at once with the failure already stored for it."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import (
        ResourceCondition,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (  # noqa: E501
        StateTaskServiceCallback,
    )

    original_eval_execution = StateTaskServiceCallback._eval_execution

    def uses_token(self: Any) -> bool:
        return (
            self._is_integration_pattern()
            and ResourceCondition.WaitForTaskToken in self._supported_integration_patterns
        )

    def eval_body(self: Any, env: Any) -> None:
        if uses_token(self):
            self._assert_integration_pattern_is_supported()
        super(StateTaskServiceCallback, self)._eval_body(env=env)
        env.states.context_object.context_object_data.pop("Task", None)

    def eval_execution(self: Any, env: Any) -> None:
        if uses_token(self):
            env.callback_pool_manager.add(env.states.context_object.update_task_token())
        original_eval_execution(self, env)

    patches.set(StateTaskServiceCallback, "_eval_body", eval_body)
    patches.set(StateTaskServiceCallback, "_eval_execution", eval_execution)


@_fix("stop_blocked_task", "notes rows 10, 12")
def _stop_blocked_task(patches: _Patches) -> None:
    """``StopExecution`` aborts an execution at once even while a Task is blocked (a running
    Lambda, a ``.waitForTaskToken`` callback): status ABORTED, an ``ExecutionAborted`` event with
    the given ``error``/``cause``, and later callbacks are refused. moto waited for the Task's
    own timeout (99999999 s by default), so the execution stayed RUNNING; it also dropped the
    stop's ``error``/``cause`` (row 12).

    The same blocked wait made the state machine's ``TimeoutSeconds`` set TIMED_OUT without the
    ``ExecutionTimedOut`` event, which the worker only wrote once the Task returned (row 10).
    The worker now wakes on the timeout and is given a moment to record the event before the
    status changes."""
    from moto.core.responses import ActionResult
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
    from moto.stepfunctions.parser.asl.component.program.program import Program
    from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
    from moto.stepfunctions.parser.utils import TMP_THREADS
    from moto.stepfunctions.responses import StepFunctionResponse

    from relayflow.local import timescale

    def evaluate_with_timeout(self: Any, env: Any) -> None:
        from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import (
            EvalTimeoutError,
        )

        self.timeout.eval(env=env)
        timeout_seconds = env.stack.pop()

        frame = env.open_frame()
        frame.states.reset(input_value=env.states.get_input())
        frame.stack = copy.deepcopy(env.stack)
        outputs: list[Any] = []
        exceptions: list[Exception | None] = [None]
        done = threading.Event()

        def exec_and_notify() -> None:
            try:
                self._eval_execution(frame)
                outputs.extend(frame.stack)
            except Exception as ex:
                exceptions.append(ex)
            done.set()

        thread = threading.Thread(target=exec_and_notify, daemon=True)
        TMP_THREADS.append(thread)
        thread.start()

        # A park's timeout is scaled like a Wait (timescale.task_timeout).
        limit = timescale.task_timeout(self.name, timeout_seconds)
        finished_on_time = timescale.wait_event(env, done, limit)
        frame.set_ended()
        env.close_frame(frame)
        if not env.is_running():
            # Stopped, timed out or failed elsewhere: abandon the attempt; the caller sees a
            # non-running program and leaves the state without output.
            return

        exception = exceptions.pop()
        if exception:
            raise exception
        if not finished_on_time:
            raise EvalTimeoutError()

        output = outputs.pop()
        env.stack.append(output)
        if not self._is_language_query_jsonpath():
            env.states.set_result(output)
        if self.assign_decl:
            self.assign_decl.eval(env=env)
        if self.result_selector:
            self.result_selector.eval(env=env)
        if self.result_path:
            self.result_path.eval(env)
        else:
            env.states.reset(input_value=env.stack.pop())

    def stop_execution(self: Any) -> Any:
        arn = self._get_param("executionArn")
        execution = self.stepfunction_backend.describe_execution(arn)
        now = datetime.datetime.now(datetime.UTC)
        if execution.exec_worker is not None and execution.status == "RUNNING":
            execution.stop(
                stop_date=now, error=self._get_param("error"), cause=self._get_param("cause")
            )
        return ActionResult({"stopDate": execution.stop_date or now})

    def program_eval(self: Any, env: Any) -> None:
        timeout = self.timeout_seconds.timeout_seconds if self.timeout_seconds else None
        env.next_state_name = self.start_at.start_at_name
        worker = threading.Thread(target=EvalComponent.eval, args=(self, env), daemon=True)
        TMP_THREADS.append(worker)
        worker.start()
        worker.join(timeout=timeout)
        if worker.is_alive():
            env.set_timed_out()
            worker.join(timeout=2.0)

    patches.set(ExecutionState, "_evaluate_with_timeout", evaluate_with_timeout)
    patches.set(Program, "eval", program_eval)
    patches.set(StepFunctionResponse, "stop_execution", stop_execution)


@_fix("history_paging", "notes row 13")
def _history_paging(patches: _Patches) -> None:
    """``GetExecutionHistory`` honours ``maxResults`` (default 100, at most 1000),
    ``nextToken`` and ``reverseOrder``, as the AWS API does. moto ignored all three."""
    from moto.core.responses import ActionResult
    from moto.stepfunctions.responses import StepFunctionResponse

    def get_execution_history(self: Any) -> Any:
        arn = self._get_param("executionArn")
        history = self.stepfunction_backend.get_execution_history(arn)
        events = list(history["events"])
        if self._get_param("reverseOrder"):
            events.reverse()
        page_size = min(int(self._get_param("maxResults") or 100), 1000)
        token = self._get_param("nextToken")
        try:
            start = int(token) if token else 0
        except ValueError as exc:
            raise _aws_error("InvalidToken", f"Invalid Token: '{token}'") from exc
        response: dict[str, Any] = {"events": events[start : start + page_size]}
        if start + page_size < len(events):
            response["nextToken"] = str(start + page_size)
        return ActionResult(response)

    patches.set(StepFunctionResponse, "get_execution_history", get_execution_history)


@_fix("unnamed_start_execution", "notes row 11")
def _unnamed_start_execution(patches: _Patches) -> None:
    """``StartExecution`` without a ``name`` gets a generated UUID name on AWS. moto named the
    execution literally ``None``, so a second unnamed start raised ``ExecutionAlreadyExists``.
    (:meth:`LocalRuntime.start_execution` always passes a name as well.)"""
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    original = StepFunctionsParserBackend.start_execution

    def start_execution(
        self: Any,
        state_machine_arn: str,
        name: str | None = None,
        execution_input: str | None = None,
        trace_header: str | None = None,
    ) -> Any:
        return original(
            self, state_machine_arn, name or str(uuid.uuid4()), execution_input, trace_header
        )

    patches.set(StepFunctionsParserBackend, "start_execution", start_execution)


@_fix("dynamodb_atomic_requests", "local runtime: concurrent handlers")
def _dynamodb_atomic_requests(patches: _Patches) -> None:
    """DynamoDB applies each request to an item atomically: a conditional write checks and
    writes as one step, and a read sees an item before or after a write. moto's handler does
    neither under threads (the local runtime runs Map iterations, the recorder and API
    requests in threads): it checks a condition, then writes, and turns an item into its
    response while another thread changes the same dict, which raised ``RuntimeError:
    dictionary changed size during iteration`` as a 500 in ``relayflow serve``. One lock
    around each DynamoDB request makes every request atomic (requests to other items wait a
    little too; throughput is not what the local runtime measures)."""
    from moto.dynamodb.responses import DynamoHandler

    lock = threading.RLock()
    original = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        with lock:
            return original(self)

    patches.set(DynamoHandler, "call_action", call_action)


@_fix("parse_cache", "notes row 18")
def _parse_cache(patches: _Patches) -> None:
    """moto re-parses the ASL (ANTLR, about 1 ms per state) on every create and every
    execution, and re-parses each ``ResultPath`` JSONPath on every use. Parsed programs are
    now cached by definition text; they are already shared between concurrent Map iterations,
    so sharing them between executions is safe once the lazily created ``heap_key`` of a
    component is made thread-safe."""
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.utils import long_uid

    original_parse = AmazonStateLanguageParser.parse
    heap_lock = threading.Lock()
    attr = "_EvalComponent__heap_key"

    @functools.lru_cache(maxsize=256)
    def cached_parse(definition: str) -> Any:
        return original_parse(definition)

    def heap_key(self: Any) -> str:
        key = self.__dict__.get(attr)
        if key is None:
            with heap_lock:
                key = self.__dict__.get(attr)
                if key is None:
                    key = long_uid()
                    self.__dict__[attr] = key
        return key

    @functools.lru_cache(maxsize=4096)
    def cached_jsonpath_parse(path: str) -> Any:
        from jsonpath_ng import parse

        return parse(path)

    patches.set(AmazonStateLanguageParser, "parse", staticmethod(cached_parse))
    patches.set(EvalComponent, "heap_key", property(heap_key))
    patches.set(result_path, "parse", cached_jsonpath_parse)


# --------------------------------------------------------------------------------------------
# Versions and aliases (notes row 15)
# --------------------------------------------------------------------------------------------

#: AWS quota: versions per state machine.
_MAX_VERSIONS = 1000
#: AWS pattern for an alias name: letters, digits, ``_ - .``, and not only digits.
_ALIAS_NAME = re.compile(r"^(?=.*[a-zA-Z_\-.])[a-zA-Z0-9_\-.]+$")


def _aws_error(code: str, message: str) -> Exception:
    """A Step Functions error that reaches the boto3 caller as ``ClientError(code)``."""
    from moto.core.exceptions import AWSError

    return AWSError(message, exception_type=code)


def split_qualified_arn(arn: str) -> tuple[str, str | None]:
    """``(state machine ARN, qualifier)`` of a state machine ARN; the qualifier (a version
    number or an alias name) is None for an unqualified ARN."""
    parts = arn.split(":")
    if len(parts) == 8 and parts[5] == "stateMachine":
        return ":".join(parts[:7]), parts[7]
    return arn, None


def _base_state_machine(backend: Any, arn: str, missing: str = "StateMachineDoesNotExist") -> Any:
    """The (unqualified) state machine ``arn``; raises ``missing`` when there is none."""
    backend._validate_machine_arn(arn)
    for state_machine in backend.state_machines:
        if state_machine.arn == arn:
            return state_machine
    message = {
        "StateMachineDoesNotExist": f"State Machine Does Not Exist: '{arn}'",
        "InvalidArn": f"Invalid arn: '{arn}'",
    }.get(missing, f"Resource not found: '{arn}'")
    raise _aws_error(missing, message)


def _version_of(state_machine: Any, qualifier: str | None) -> Any:
    if qualifier is None or not qualifier.isdigit():
        return None
    return state_machine.versions.get(int(qualifier))


def _routes_to(alias: Any, version_arn: str) -> bool:
    return any(r["stateMachineVersionArn"] == version_arn for r in alias.routing_configuration)


def _page(
    items: list[Any], key: Callable[[Any], str], max_results: Any, token: str | None
) -> tuple[list[Any], str | None]:
    """One page of ``items`` (``maxResults``: default 100, at most 1000). The token names the
    last item returned, so items added meanwhile do not shift the pages."""
    import base64

    size = min(int(max_results or 100), 1000)
    start = 0
    if token:
        keys = [key(item) for item in items]
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode()
            start = keys.index(after) + 1
        except ValueError as exc:  # bad base64/UTF-8, or an item no longer listed
            raise _aws_error("InvalidToken", f"Invalid Token: '{token}'") from exc
    page = items[start : start + size]
    if start + size < len(items):
        return page, base64.urlsafe_b64encode(key(page[-1]).encode()).decode()
    return page, None


def _same_definition(current: Any, new: Any) -> bool:
    try:
        return bool(json.loads(current) == json.loads(new))
    except (TypeError, ValueError):
        return bool(current == new)


@_fix("state_machine_versions", "notes row 15")
def _state_machine_versions(patches: _Patches) -> None:
    """Versions are immutable snapshots of one *revision* of a state machine (AWS versions
    docs). ``UpdateStateMachine`` makes a new revision when the definition, role or a
    configuration changes, and returns its ``revisionId``, which ``DescribeStateMachine`` also
    reports (the first revision has none). Publishing (``publish=True`` on create/update, or
    ``PublishStateMachineVersion``) makes version N+1 from the current revision, or returns the
    version already published from it (idempotent); ``revisionId`` on ``PublishStateMachineVersion``
    must name the current revision (``INITIAL`` for the first one) or it fails with
    ``ConflictException``; at most 1000 versions. ``ListStateMachineVersions`` lists them newest
    first; ``DeleteStateMachineVersion`` refuses, with ``ConflictException``, a version that an
    alias routes to, and version numbers are never reused.

    moto raised ``NotImplementedError`` for ``PublishStateMachineVersion``,
    ``ListStateMachineVersions`` and ``DeleteStateMachineVersion``, had no revision IDs, and
    published a new version on every ``publish=True`` update, even an unchanged one. (Each
    version already kept its own definition.)"""
    from moto.core.responses import ActionResult, EmptyResult
    from moto.core.utils import utcnow
    from moto.stepfunctions.models import StateMachine, StateMachineInstance, StateMachineVersion
    from moto.stepfunctions.responses import StepFunctionResponse

    original_describe = StepFunctionResponse.describe_state_machine
    original_update = StepFunctionResponse.update_state_machine

    def update(self: Any, **kwargs: Any) -> None:
        changed = False
        for key, value in kwargs.items():
            if value is None:
                continue
            current = getattr(self, key, None)
            same = _same_definition(current, value) if key == "definition" else current == value
            changed = changed or not same
            setattr(self, key, value)
        self.update_date = utcnow()
        if changed:
            self.revision_id = str(uuid.uuid4())

    def publish(self: Any, description: str | None) -> None:
        for version in self.versions.values():
            if version.revision_id == self.revision_id:
                self.latest_version = version
                return
        if len(self.versions) >= _MAX_VERSIONS:
            raise _aws_error(
                "ServiceQuotaExceededException",
                f"The maximum number of versions ({_MAX_VERSIONS}) has been reached for "
                f"'{self.arn}'",
            )
        number = self.latest_version_number + 1
        version = StateMachineVersion(source=self, version=number, description=description)
        version.revision_id = self.revision_id
        self.versions[number] = version
        self.latest_version = version
        self.latest_version_number = number

    def with_revision_id(result: Any, state_machine: Any) -> Any:
        if state_machine.revision_id:
            result.result["revisionId"] = state_machine.revision_id
        return result

    def describe_state_machine(self: Any) -> Any:
        result = original_describe(self)
        arn = self._get_param("stateMachineArn")
        return with_revision_id(result, self.stepfunction_backend.describe_state_machine(arn))

    def update_state_machine(self: Any) -> Any:
        result = original_update(self)
        arn = self._get_param("stateMachineArn")
        return with_revision_id(result, self.stepfunction_backend.describe_state_machine(arn))

    def publish_state_machine_version(self: Any) -> Any:
        state_machine = _base_state_machine(
            self.stepfunction_backend, self._get_param("stateMachineArn")
        )
        revision_id = self._get_param("revisionId")
        current = state_machine.revision_id or "INITIAL"
        if revision_id is not None and revision_id != current:
            raise _aws_error(
                "ConflictException",
                f"Failed to publish the State Machine version for revision {revision_id}. "
                f"The current State Machine revision is {current}.",
            )
        state_machine.publish(self._get_param("description"))
        version = state_machine.latest_version
        return ActionResult(
            {"creationDate": version.creation_date, "stateMachineVersionArn": version.arn}
        )

    def list_state_machine_versions(self: Any) -> Any:
        state_machine = _base_state_machine(
            self.stepfunction_backend, self._get_param("stateMachineArn"), missing="InvalidArn"
        )
        versions = sorted(state_machine.versions.values(), key=lambda v: v.version, reverse=True)
        page, token = _page(
            versions,
            lambda v: v.arn,
            self._get_param("maxResults"),
            self._get_param("nextToken"),
        )
        response: dict[str, Any] = {
            "stateMachineVersions": [
                {"stateMachineVersionArn": v.arn, "creationDate": v.creation_date} for v in page
            ]
        }
        if token:
            response["nextToken"] = token
        return ActionResult(response)

    def delete_state_machine_version(self: Any) -> Any:
        backend = self.stepfunction_backend
        arn = self._get_param("stateMachineVersionArn")
        backend._validate_machine_arn(arn)
        base_arn, qualifier = split_qualified_arn(arn)
        if qualifier is None or not qualifier.isdigit():
            raise _aws_error("ValidationException", f"Invalid version ARN: '{arn}'")
        state_machine = next((sm for sm in backend.state_machines if sm.arn == base_arn), None)
        version = _version_of(state_machine, qualifier) if state_machine else None
        if version is None:
            return EmptyResult()
        referencing = [a.name for a in state_machine.aliases.values() if _routes_to(a, arn)]
        if referencing:
            raise _aws_error(
                "ConflictException",
                "Version to be deleted must not be referenced by an alias. Current list of "
                f"aliases referencing this version: [{', '.join(referencing)}]",
            )
        del state_machine.versions[version.version]
        if state_machine.latest_version is version:
            state_machine.latest_version = max(
                state_machine.versions.values(), key=lambda v: v.version, default=None
            )
        return EmptyResult()

    patches.set(StateMachineInstance, "revision_id", None)
    patches.set(StateMachine, "update", update)
    patches.set(StateMachine, "publish", publish)
    patches.set(StepFunctionResponse, "describe_state_machine", describe_state_machine)
    patches.set(StepFunctionResponse, "update_state_machine", update_state_machine)
    patches.set(
        StepFunctionResponse, "publish_state_machine_version", publish_state_machine_version
    )
    patches.set(StepFunctionResponse, "list_state_machine_versions", list_state_machine_versions)
    patches.set(StepFunctionResponse, "delete_state_machine_version", delete_state_machine_version)


def _start_qualified_execution(
    backend: Any, arn: str, name: str | None, execution_input: str
) -> Any:
    """Start ``arn`` (a version or alias ARN) as the parser backend starts a state machine, on
    a snapshot of the version; the execution belongs to the state machine."""
    import random

    from moto.stepfunctions.exceptions import InvalidExecutionInput
    from moto.stepfunctions.parser.backend.execution import Execution

    base_arn, qualifier = split_qualified_arn(arn)
    state_machine = _base_state_machine(backend, base_arn)
    alias = None
    if qualifier is not None and not qualifier.isdigit():
        alias = state_machine.aliases.get(qualifier)
        if alias is None:
            raise _aws_error("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{arn}'")
        routes = alias.routing_configuration
        chosen = random.choices(
            [route["stateMachineVersionArn"] for route in routes],
            weights=[route["weight"] for route in routes],
        )[0]
        qualifier = split_qualified_arn(chosen)[1]
    version = _version_of(state_machine, qualifier)
    if version is None:
        raise _aws_error("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{arn}'")

    name = name or str(uuid.uuid4())
    backend._validate_name(name)
    existing = state_machine._handle_name_input_idempotency(name, execution_input)
    if existing is not None:
        return existing
    try:
        json.loads(execution_input)
    except ValueError as exc:
        raise InvalidExecutionInput(f"Invalid State Machine Execution Input: '{exc}'") from exc

    snapshot = copy.deepcopy(version)
    execution = Execution(
        name=name,
        sm_type=snapshot.sm_type,
        role_arn=snapshot.roleArn,
        exec_arn=(
            f"arn:{backend.partition}:states:{backend.region_name}:{backend.account_id}:"
            f"execution:{state_machine.name}:{name}"
        ),
        account_id=backend.account_id,
        region_name=backend.region_name,
        state_machine=snapshot,
        start_date=datetime.datetime.now(tz=datetime.UTC),
        cloud_watch_logging_session=None,
        input_data=execution_input,
        activity_store={},
    )
    execution.state_machine_arn = state_machine.arn
    execution.state_machine_version_arn = version.arn
    execution.state_machine_alias_arn = alias.arn if alias is not None else None
    state_machine.executions.append(execution)
    execution.start()
    return execution


@_fix("version_alias_executions", "notes row 15")
def _version_alias_executions(patches: _Patches) -> None:
    """``StartExecution`` accepts a version ARN (runs that version's definition) or an alias ARN
    (runs the version the alias routes to; with two routes, picked at random by weight), as on
    AWS. The execution belongs to the state machine: its ARN is
    ``…:execution:<state machine>:<name>``, names are unique per state machine (same name and
    input while running returns it again; otherwise ``ExecutionAlreadyExists``), and stop,
    history and task callbacks work as for any execution. ``DescribeExecution`` and
    ``ListExecutions`` items give the base ``stateMachineArn`` with ``stateMachineVersionArn``
    and, when started through an alias, ``stateMachineAliasArn``; so does the
    ``ExecutionStarted`` history event. ``ListExecutions`` takes the state machine ARN (every
    execution), a version ARN or an alias ARN (the executions started through it).
    ``DescribeStateMachineForExecution`` gives the definition the execution ran.

    moto raised ``AttributeError`` ('StateMachineVersion' object has no attribute
    '_handle_name_input_idempotency') on a version ARN and ``StateMachineDoesNotExist`` on an
    alias ARN, listed nothing for a version ARN, and described the state machine's current
    definition for any execution."""
    from moto.core.responses import ActionResult
    from moto.stepfunctions.parser.api import (
        ExecutionStartedEventDetails,
        HistoryEventExecutionDataDetails,
        HistoryEventType,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
    from moto.stepfunctions.parser.asl.utils.encoding import to_json_str
    from moto.stepfunctions.parser.backend.execution import Execution
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
    from moto.stepfunctions.responses import StepFunctionResponse

    original_start = StepFunctionResponse.start_execution
    original_describe = StepFunctionResponse.describe_execution
    original_list = StepFunctionResponse.list_executions

    def start_execution(self: Any) -> Any:
        arn = self._get_param("stateMachineArn")
        if split_qualified_arn(arn)[1] is None:
            return original_start(self)
        execution = _start_qualified_execution(
            self.stepfunction_backend,
            arn,
            self._get_param("name"),
            self._get_param("input", if_none="{}"),
        )
        return ActionResult(
            {"executionArn": execution.execution_arn, "startDate": execution.start_date}
        )

    def associations(execution: Any) -> dict[str, str]:
        out = {}
        if execution.state_machine_version_arn:
            out["stateMachineVersionArn"] = execution.state_machine_version_arn
        if execution.state_machine_alias_arn:
            out["stateMachineAliasArn"] = execution.state_machine_alias_arn
        return out

    def describe_execution(self: Any) -> Any:
        result = original_describe(self)
        execution = self.stepfunction_backend.describe_execution(self._get_param("executionArn"))
        result.result.update(associations(execution))
        return result

    def list_executions(self: Any) -> Any:
        arn = self._get_param("stateMachineArn")
        if not arn:
            return original_list(self)
        base_arn, qualifier = split_qualified_arn(arn)
        state_machine = _base_state_machine(self.stepfunction_backend, base_arn)
        if qualifier is not None:
            exists = (
                _version_of(state_machine, qualifier) is not None
                if qualifier.isdigit()
                else qualifier in state_machine.aliases
            )
            if not exists:
                raise _aws_error(
                    "StateMachineDoesNotExist", f"State Machine Does Not Exist: '{arn}'"
                )
        status = self._get_param("statusFilter")
        executions = [
            e
            for e in state_machine.executions
            if (
                qualifier is None or arn in (e.state_machine_version_arn, e.state_machine_alias_arn)
            )
            and (not status or e.status == status)
        ]
        executions.sort(key=lambda e: e.start_date, reverse=True)
        page, token = _page(
            executions,
            lambda e: e.execution_arn,
            self._get_param("maxResults"),
            self._get_param("nextToken"),
        )
        items = []
        for execution in page:
            item = {
                "executionArn": execution.execution_arn,
                "stateMachineArn": state_machine.arn,
                "name": execution.name,
                "status": execution.status,
                "startDate": execution.start_date,
                **associations(execution),
            }
            if execution.status != "RUNNING" and execution.stop_date is not None:
                item["stopDate"] = execution.stop_date
            items.append(item)
        response: dict[str, Any] = {"executions": items}
        if token:
            response["nextToken"] = token
        return ActionResult(response)

    def describe_state_machine_for_execution(self: Any) -> Any:
        execution = self.stepfunction_backend.describe_execution(self._get_param("executionArn"))
        snapshot = execution.state_machine
        response = {
            "stateMachineArn": execution.state_machine_arn,
            "name": snapshot.name,
            "definition": snapshot.definition,
            "roleArn": snapshot.roleArn,
            "updateDate": snapshot.update_date,
            "loggingConfiguration": snapshot.loggingConfiguration,
            "tracingConfiguration": snapshot.tracingConfiguration,
            "encryptionConfiguration": snapshot.encryptionConfiguration,
        }
        if getattr(snapshot, "revision_id", None):
            response["revisionId"] = snapshot.revision_id
        return ActionResult(response)

    def execution_logic(self: Any) -> None:
        # ExecutionWorker._execution_logic, with the version/alias in ExecutionStarted.
        program = self._get_evaluation_entrypoint()
        self.env = self._get_evaluation_environment()
        details = ExecutionStartedEventDetails(
            input=to_json_str(self._evaluation_details.execution_details.inpt),
            inputDetails=HistoryEventExecutionDataDetails(truncated=False),
            roleArn=self._evaluation_details.aws_execution_details.role_arn,
        )
        execution = getattr(self._execution_communication, "execution", None)
        if isinstance(execution, Execution):
            details.update(associations(execution))
        self.env.event_manager.add_event(
            context=self.env.event_history_context,
            event_type=HistoryEventType.ExecutionStarted,
            event_details=EventDetails(executionStartedEventDetails=details),
            update_source_event_id=False,
        )
        program.eval(self.env)
        self._execution_communication.terminated()

    patches.set(Execution, "state_machine_version_arn", None)
    patches.set(Execution, "state_machine_alias_arn", None)
    patches.set(StepFunctionResponse, "start_execution", start_execution)
    patches.set(StepFunctionResponse, "describe_execution", describe_execution)
    patches.set(StepFunctionResponse, "list_executions", list_executions)
    patches.set(
        StepFunctionResponse,
        "describe_state_machine_for_execution",
        describe_state_machine_for_execution,
    )
    patches.set(ExecutionWorker, "_execution_logic", execution_logic)


def _routed_state_machine(backend: Any, routing: Any) -> Any:
    """The state machine whose versions ``routingConfiguration`` names, validated as AWS does:
    1 or 2 distinct version ARNs of one state machine, weights 0-100 summing to 100, and every
    version existing (``ResourceNotFound`` otherwise)."""
    if not isinstance(routing, list) or not 1 <= len(routing) <= 2:
        raise _aws_error(
            "ValidationException",
            "1 validation error detected: Value at 'routingConfiguration' failed to satisfy "
            "constraint: Member must have length between 1 and 2",
        )
    arns = [route["stateMachineVersionArn"] for route in routing]
    listed = f"[{', '.join(arns)}]"
    if len(set(arns)) < len(arns):
        raise _aws_error(
            "ValidationException",
            f"Routing configuration must contain distinct state machine version ARNs. "
            f"Received: {listed}",
        )
    weights = [route["weight"] for route in routing]
    for i, weight in enumerate(weights, start=1):
        if not 0 <= weight <= 100:
            raise _aws_error(
                "ValidationException",
                f"Invalid value for parameter routingConfiguration[{i}].weight, value: "
                f"{weight}, valid range: 0-100",
            )
    if sum(weights) != 100:
        raise _aws_error(
            "ValidationException",
            f"Sum of routing configuration weights must equal 100. Received: {weights}",
        )
    qualified = [split_qualified_arn(arn) for arn in arns]
    if any(q is None or not q.isdigit() for _, q in qualified):
        raise _aws_error(
            "ValidationException",
            f"Routing configuration must contain state machine version ARNs. Received: {listed}",
        )
    if len({base for base, _ in qualified}) > 1:
        raise _aws_error(
            "ValidationException",
            f"Routing configuration must contain versions of one state machine. Received: {listed}",
        )
    state_machine = _base_state_machine(backend, qualified[0][0], missing="ResourceNotFound")
    for arn, (_, qualifier) in zip(arns, qualified, strict=True):
        if _version_of(state_machine, qualifier) is None:
            raise _aws_error("ResourceNotFound", f"Resource not found: '{arn}'")
    return state_machine


def _routing_key(routing: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return sorted((route["stateMachineVersionArn"], route["weight"]) for route in routing)


@_fix("state_machine_aliases", "notes row 15")
def _state_machine_aliases(patches: _Patches) -> None:
    """Aliases are validated as on AWS: the name matches ``[a-zA-Z0-9_.-]+`` with at least one
    non-digit (at most 80 characters), the routing names 1 or 2 distinct *versions* of one state
    machine with weights 0-100 summing to 100, and every version exists (``ResourceNotFound``),
    on create and on update. ``CreateStateMachineAlias`` is idempotent: the same name,
    description and routing return the alias again, a different one fails with
    ``ConflictException``. ``UpdateStateMachineAlias`` on a missing alias fails with
    ``ResourceNotFound``. ``ListStateMachineAliases`` lists newest first, and given a version ARN
    lists the aliases that route to that version.

    moto checked only that the *first* routed version exists (raising
    ``StateMachineDoesNotExist``), accepted any name, silently replaced an existing alias on
    create, did not check the versions on update, listed oldest first and rejected a version
    ARN in ``ListStateMachineAliases``."""
    from moto.core.responses import ActionResult
    from moto.stepfunctions.models import StateMachineAlias
    from moto.stepfunctions.responses import StepFunctionResponse

    def create_state_machine_alias(self: Any) -> Any:
        name = self._get_param("name")
        routing = self._get_param("routingConfiguration")
        description = self._get_param("description")
        if not isinstance(name, str) or len(name) > 80 or not _ALIAS_NAME.match(name):
            raise _aws_error(
                "ValidationException",
                f"1 validation error detected: Value '{name}' at 'name' failed to satisfy "
                "constraint: Member must satisfy regular expression pattern: "
                r"^(?=.*[a-zA-Z_\-\.])[a-zA-Z0-9_\-\.]+$",
            )
        state_machine = _routed_state_machine(self.stepfunction_backend, routing)
        alias = state_machine.aliases.get(name)
        if alias is not None:
            if (alias.description, _routing_key(alias.routing_configuration)) != (
                description,
                _routing_key(routing),
            ):
                raise _aws_error(
                    "ConflictException",
                    "Failed to create alias because an alias with the same name and a "
                    "different routing configuration already exists.",
                )
        else:
            alias = StateMachineAlias(name, state_machine.arn, copy.deepcopy(routing), description)
            state_machine.aliases[name] = alias
        return ActionResult(
            {"stateMachineAliasArn": alias.arn, "creationDate": alias.creation_date}
        )

    def find_alias(backend: Any, arn: str) -> Any:
        base_arn, qualifier = split_qualified_arn(arn)
        backend._validate_machine_arn(arn)
        state_machine = next((sm for sm in backend.state_machines if sm.arn == base_arn), None)
        alias = state_machine.aliases.get(qualifier) if state_machine and qualifier else None
        if alias is None:
            raise _aws_error("ResourceNotFound", f"Resource not found: '{arn}'")
        return alias

    def update_state_machine_alias(self: Any) -> Any:
        arn = self._get_param("stateMachineAliasArn")
        description = self._get_param("description")
        routing = self._get_param("routingConfiguration")
        if description is None and routing is None:
            raise _aws_error(
                "ValidationException",
                "You must provide at least one of routingConfiguration or description",
            )
        alias = find_alias(self.stepfunction_backend, arn)
        if routing is not None:
            state_machine = _routed_state_machine(self.stepfunction_backend, routing)
            if state_machine.arn != alias.statemachine_arn:
                raise _aws_error(
                    "ValidationException",
                    "Routing configuration must contain versions of the alias's state machine.",
                )
            alias.update(routing_configuration=copy.deepcopy(routing))
        if description is not None:
            alias.update(description=description)
        return ActionResult({"updateDate": alias.update_date})

    def list_state_machine_aliases(self: Any) -> Any:
        arn = self._get_param("stateMachineArn")
        base_arn, qualifier = split_qualified_arn(arn)
        state_machine = _base_state_machine(self.stepfunction_backend, base_arn)
        aliases = list(reversed(state_machine.aliases.values()))
        if qualifier is not None:
            if _version_of(state_machine, qualifier) is None:
                raise _aws_error("ResourceNotFound", f"Resource not found: '{arn}'")
            aliases = [alias for alias in aliases if _routes_to(alias, arn)]
        page, token = _page(
            aliases,
            lambda a: a.arn,
            self._get_param("maxResults"),
            self._get_param("nextToken"),
        )
        response: dict[str, Any] = {
            "stateMachineAliases": [
                {"stateMachineAliasArn": a.arn, "creationDate": a.creation_date} for a in page
            ]
        }
        if token:
            response["nextToken"] = token
        return ActionResult(response)

    patches.set(StepFunctionResponse, "create_state_machine_alias", create_state_machine_alias)
    patches.set(StepFunctionResponse, "update_state_machine_alias", update_state_machine_alias)
    patches.set(StepFunctionResponse, "list_state_machine_aliases", list_state_machine_aliases)


# --------------------------------------------------------------------------------------------
# Nested executions: startExecution.sync:2 (a sub_workflow step)
# --------------------------------------------------------------------------------------------

#: How often a parent waiting on a child re-checks whether it was stopped itself (a child's
#: end wakes it at once through :data:`terminated`).
_CHILD_POLL_SECONDS = 0.05


def _epoch_millis(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return int(value.timestamp() * 1000)
    return value


def sync2_execution_output(described: dict[str, Any]) -> dict[str, Any]:
    """A ``DescribeExecution`` response in the shape a ``startExecution.sync:2`` Task returns
    on AWS: PascalCase keys (``ExecutionArn``, ``Status``, ``Output``…), dates as epoch
    milliseconds, and ``Input``/``Output`` as JSON values rather than strings."""

    def pascal(value: Any) -> Any:
        if isinstance(value, dict):
            return {k[:1].upper() + k[1:]: pascal(v) for k, v in value.items()}
        return _epoch_millis(value)

    shaped = pascal({k: v for k, v in described.items() if k != "ResponseMetadata"})
    for key in ("Input", "Output"):
        if isinstance(shaped.get(key), str):
            with contextlib.suppress(ValueError):
                shaped[key] = json.loads(shaped[key])
    return shaped


class _ChildExecution:
    """The sync resolver of one child execution: ``None`` while it runs, its sync:2 output
    once it succeeded; raises ``States.TaskFailed`` (Cause: that output as JSON) otherwise."""

    def __init__(self, task: Any, env: Any, client: Any, execution_arn: str) -> None:
        self.task, self.env, self.client, self.execution_arn = task, env, client, execution_arn

    def __call__(self) -> Any:
        from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
        from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
            FailureEvent,
            FailureEventException,
        )
        from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
            StatesErrorName,
        )
        from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (  # noqa: E501
            StatesErrorNameType,
        )
        from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

        described = dict(self.client.describe_execution(executionArn=self.execution_arn))
        if described["status"] == "RUNNING":
            return None
        output = sync2_execution_output(described)
        if described["status"] == "SUCCEEDED":
            return output
        error = StatesErrorNameType.StatesTaskFailed.to_name()
        raise FailureEventException(
            FailureEvent(
                env=self.env,
                error_name=StatesErrorName(typ=StatesErrorNameType.StatesTaskFailed),
                event_type=HistoryEventType.TaskFailed,
                event_details=EventDetails(
                    taskFailedEventDetails=TaskFailedEventDetails(
                        resource=self.task._get_sfn_resource(),
                        resourceType=self.task._get_sfn_resource_type(),
                        error=error,
                        cause=json.dumps(output, separators=(",", ":")),
                    )
                ),
            )
        )

    def stop(self) -> None:
        """Stop the child (its parent stopped or its Task timed out), as AWS does."""
        from botocore.exceptions import ClientError

        with contextlib.suppress(ClientError):  # it ended on its own meanwhile
            self.client.stop_execution(
                executionArn=self.execution_arn,
                error="States.Aborted",
                cause="The parent execution's Task that started this execution ended",
            )


@_fix("start_execution_sync", "notes: startExecution.sync:2 does not run")
def _start_execution_sync(patches: _Patches) -> None:
    """A ``arn:aws:states:::states:startExecution.sync:2`` Task starts the child execution
    (``StateMachineArn`` may be a version or alias ARN), waits for it to end, and then succeeds
    with the child's ``DescribeExecution`` in the AWS sync:2 shape (``Output`` as JSON) or fails
    with ``States.TaskFailed`` whose Cause is that description as JSON (``Status``, ``Error``,
    ``Cause``, ``ExecutionArn``, ``Name``…). When the parent stops (or the Task times out) the
    child is stopped. moto failed the Task at once with ``States.Runtime`` (``KeyError:
    'StateMachineArn'``: it sent the ASL parameter names to boto3 unchanged), read the response
    with the wrong casing, and polled every 0.5 s."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn import (  # noqa: E501
        StateTaskServiceSfn,
    )
    from moto.stepfunctions.parser.asl.utils import boto_client as boto_client_module

    original_eval_service_task = StateTaskServiceSfn._eval_service_task
    original_build_sync2 = StateTaskServiceSfn._build_sync2_resolver

    def is_start_execution(task: Any) -> bool:
        return bool(task._get_boto_service_action() == "start_execution")

    def sfn_client(resource_runtime_part: Any, state_credentials: Any) -> Any:
        return boto_client_module.boto_client_for(
            region=resource_runtime_part.region,
            service="stepfunctions",
            state_credentials=state_credentials,
        )

    def eval_service_task(
        self: Any,
        env: Any,
        resource_runtime_part: Any,
        normalised_parameters: dict[str, Any],
        state_credentials: Any,
    ) -> None:
        if not is_start_execution(self):
            original_eval_service_task(
                self, env, resource_runtime_part, normalised_parameters, state_credentials
            )
            return
        request = {
            "stateMachineArn": normalised_parameters["StateMachineArn"],
            "input": normalised_parameters.get("Input") or "{}",
        }
        if normalised_parameters.get("Name"):
            request["name"] = normalised_parameters["Name"]
        client = sfn_client(resource_runtime_part, state_credentials)
        response = client.start_execution(**request)
        env.stack.append(
            {
                "ExecutionArn": response["executionArn"],
                "StartDate": _epoch_millis(response["startDate"]),
            }
        )

    def build_sync2_resolver(
        self: Any,
        env: Any,
        resource_runtime_part: Any,
        normalised_parameters: dict[str, Any],
        state_credentials: Any,
    ) -> Any:
        if not is_start_execution(self):
            return original_build_sync2(
                self, env, resource_runtime_part, normalised_parameters, state_credentials
            )
        submitted = env.stack.pop()
        client = sfn_client(resource_runtime_part, state_credentials)
        return _ChildExecution(self, env, client, submitted["ExecutionArn"])

    def eval_sync(
        self: Any,
        env: Any,
        sync_resolver: Any,
        timeout_seconds: Any,
        callback_endpoint: Any,
        heartbeat_endpoint: Any,
    ) -> Any:
        # Woken by the end of any execution (the termination hook); re-checks the parent's own
        # state every _CHILD_POLL_SECONDS.
        with terminated:
            while env.is_running():
                result = sync_resolver()
                if result is not None:
                    return result
                terminated.wait(_CHILD_POLL_SECONDS)
        if isinstance(sync_resolver, _ChildExecution):
            sync_resolver.stop()
        return None

    patches.set(StateTaskServiceSfn, "_eval_service_task", eval_service_task)
    patches.set(StateTaskServiceSfn, "_build_sync2_resolver", build_sync2_resolver)
    patches.set(StateTaskServiceSfn, "_eval_sync", eval_sync)


def prune_threads() -> None:
    """Forget finished interpreter threads (moto keeps every thread it starts in a list)."""
    from moto.stepfunctions.parser.utils import TMP_THREADS

    TMP_THREADS[:] = [thread for thread in TMP_THREADS if thread.is_alive()]


def wait_for_termination(is_done: Callable[[], bool], timeout: float) -> bool:
    """Block until ``is_done()`` holds or ``timeout`` seconds pass; returns ``is_done()``."""
    import time

    deadline = time.monotonic() + timeout
    with terminated:
        while not is_done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            terminated.wait(remaining)
    return True


def to_jsonable(value: Any) -> Any:
    """``value`` with datetimes as ISO strings and enums as plain strings (for history events)."""
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return iso_timestamp(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# --------------------------------------------------------------------------------------------
# Fixes that live in their own modules (compat.py is big enough): they register through these
# public names when imported, which happens here so that every fix is known to apply().
# --------------------------------------------------------------------------------------------

fix = _fix
Patches = _Patches

from relayflow.local import (  # noqa: E402, F401  (their fixes)
    compat_definition,
    compat_distributed,
    compat_express,
)
