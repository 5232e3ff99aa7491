"""The infrastructure of the local runtime's compatibility layer (:mod:`relayflow.local.compat`):
the fixes that make the runtime work and are always applied (Lambda routing, client cache,
halt notification, scaled waits, termination hook), the one boto3 session and the
:data:`terminated` condition they share with the runtime.
"""

from __future__ import annotations

import datetime
import json
import threading
from collections.abc import Callable
from typing import Any

from relayflow.local.compat_registry import Patches, fix, iso_timestamp

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


@fix("lambda_routing_and_client_cache", "notes row 17, FN", infrastructure=True)
def _lambda_routing_and_client_cache(patches: Patches) -> None:
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


@fix("halt_notification", "notes rows 6, 12", infrastructure=True)
def _halt_notification(patches: Patches) -> None:
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


@fix("scaled_time", "notes rows 1, 6", infrastructure=True)
def _scaled_time(patches: Patches) -> None:
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


@fix("termination_hook", "runtime support", infrastructure=True)
def _termination_hook(patches: Patches) -> None:
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
