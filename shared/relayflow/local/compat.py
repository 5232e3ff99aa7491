"""Compatibility layer over moto's Step Functions interpreter (moto 5.2.5 only).

moto runs real ASL, but about 40 documented behaviours differ from AWS
(``notes/moto-asl.md``). Each fix restores one of them that compiled Relayflow ASL can reach,
names the finding and the AWS behaviour in its docstring, and has a test in
``tests/integration/local/`` that fails without it. The ASL itself never changes to suit moto.
This module holds the registry and the infrastructure fixes; the behaviour fixes live in one
module per finding family (``compat_interpreter``, ``compat_callbacks``, ``compat_api``,
``compat_versions``, ``compat_sync``, ``compat_definition``, ``compat_distributed``,
``compat_express``, ``compat_logs``), imported at the end of this module in the order they apply.

Patches are process-wide, idempotent and reversible (:func:`apply` / :func:`revert`);
:class:`~relayflow.local.runtime.LocalRuntime` applies all of them on ``__enter__``. The
*infrastructure* patches (Lambda routing, client cache, scaled waits, halt notification,
termination hook) are what makes the runtime work and are always applied.

Every patch targets a private API of one exact moto version, so :func:`check_moto_version`
refuses any other version instead of patching it blindly.
"""

from __future__ import annotations

import datetime
import json
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

MOTO_VERSION = "5.2.5"

# The ISO-8601 "extended offset date-time" AWS accepts in Wait Timestamp/TimestampPath.
_TIMESTAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$")
HEARTBEAT_TIMEOUT = "States.HeartbeatTimeout"
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


def _aws_error(code: str, message: str) -> Exception:
    """A Step Functions error that reaches the boto3 caller as ``ClientError(code)``."""
    from moto.core.exceptions import AWSError

    return AWSError(message, exception_type=code)


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


def iso_timestamp(value: datetime.datetime) -> str:
    """``2026-11-05T10:00:00.123Z``: the form Step Functions uses for context timestamps."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    utc = value.astimezone(datetime.UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


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
# The fixes, by finding family, in the order they are applied: each module registers its fixes
# through these public names when imported, which happens here so that every fix is known to
# apply().
# --------------------------------------------------------------------------------------------

fix = _fix
Patches = _Patches

from relayflow.local import (  # noqa: E402, F401, I001  (their fixes, in this order)
    compat_interpreter,
    compat_callbacks,
    compat_api,
    compat_versions,
    compat_sync,
    compat_definition,
    compat_distributed,
    compat_express,
    compat_logs,
)
