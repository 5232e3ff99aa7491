"""The local runtime: compiled ASL run offline by moto's Step Functions interpreter.

Everything runs in this process: moto's mock of the AWS APIs (Step Functions with
``execute_state_machine``, DynamoDB, S3, EventBridge, Scheduler, …), an HTTP Lambda Invoke
endpoint on 127.0.0.1 that calls Python handlers, and the compatibility layer in
:mod:`relayflow.local.compat`. Wait and Retry sleeps are scaled by ``time_scale``.

    with LocalRuntime(handlers={"relayflow-condition": handler}) as runtime:
        record = runtime.run("order-triage", asl, {"trigger": {...}})
        assert record.status == "SUCCEEDED"
"""

from __future__ import annotations

import copy
import datetime
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import relayflow
from relayflow.adapters.aws import reset_clients
from relayflow.local import compat, compat_archive, compat_infrastructure, timescale
from relayflow.local.history import ExecutionRecord, build_state_runs
from relayflow.local.lambda_endpoint import Handler, HandlerRegistry, Invocation, LambdaEndpoint
from relayflow.local.lifecycle import ClosedOnExit
from relayflow.naming import LOCAL_ACCOUNT, LOCAL_REGION

#: Role every local state machine is created with (moto does not check it).
LOCAL_ROLE_ARN = f"arn:aws:iam::{LOCAL_ACCOUNT}:role/relayflow-local"
#: Credentials and settings for the mocked AWS APIs while a runtime is open.
_ENV_SET = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
}
#: Variables that would send boto3 clients elsewhere than moto (or to a real account); every
#: ``AWS_ENDPOINT_URL_<SERVICE>`` is cleared too.
_ENV_CLEARED = ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL")
_ON_EVENT_POLL_SECONDS = 0.05


class ExecutionWaitTimeout(TimeoutError):
    """An execution was still running when ``wait`` gave up; ``record`` is its state then."""

    def __init__(self, record: ExecutionRecord, timeout: float) -> None:
        super().__init__(f"execution {record.name} still {record.status} after {timeout:g}s")
        self.record = record


def _millisecond(value: datetime.datetime | None) -> datetime.datetime | None:
    """Step Functions reports times to the millisecond (as the history events are)."""
    if value is None:
        return None
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def default_functions_dir() -> Path:
    """The repository's ``functions/`` directory (``functions/<kind>/app.py``)."""
    return Path(relayflow.__file__).resolve().parents[2] / "functions"


def _service_client(service: str) -> property:
    """A read-only property: the runtime's client for ``service`` (:meth:`LocalRuntime.client`)."""
    return property(lambda runtime: runtime.client(service))


class LocalRuntime(ClosedOnExit):
    """Runs Step Functions ASL locally; a context manager.

    One runtime may be open per process at a time (moto's mock and the interpreter patches
    are process-wide); opening a second one raises. Runtimes may be opened one after another.

    ``handlers`` maps a Lambda function name (``relayflow-condition``) to a Python handler
    ``(event, context) -> result``; names not in it are served from
    ``functions_dir/<kind>/app.py``. ``function_tags`` tags functions by name (a tool step
    invokes only one tagged ``relayflow-tenant=<its tenant>``). ``time_scale`` multiplies
    Wait and Retry sleeps (0.01: a 300 s Wait takes 3 s; 1.0 is real time). Task and
    state-machine ``TimeoutSeconds`` are real seconds. ``compat_skip`` names compatibility
    fixes to leave out, only to show that a fix is still needed (all fixes are applied
    otherwise, and a later runtime re-applies them).
    """

    def __init__(
        self,
        handlers: Mapping[str, Handler] | None = None,
        *,
        function_tags: Mapping[str, Mapping[str, str]] | None = None,
        time_scale: float = timescale.DEFAULT_TIME_SCALE,
        functions_dir: Path | None = None,
        region: str = LOCAL_REGION,
        compat_skip: Iterable[str] = (),
    ) -> None:
        if time_scale < 0:
            raise ValueError(f"time_scale must be >= 0, got {time_scale}")
        #: Handlers by function name; read at each Invoke (see :meth:`register_handler`).
        self.handlers: dict[str, Handler] = dict(handlers or {})
        #: Tags of the functions by name (``relayflow-tenant`` scopes one to a tenant's steps);
        #: the Lambda endpoint's ListTags answers them.
        self.function_tags: dict[str, dict[str, str]] = {
            name: dict(tags) for name, tags in (function_tags or {}).items()
        }
        self._time_scale = time_scale
        self.functions_dir = functions_dir or default_functions_dir()
        self.region = region
        self.account = LOCAL_ACCOUNT
        #: Compatibility fixes to leave out (to show a fix is still needed); see compat.apply.
        self.compat_skip = tuple(compat_skip)
        #: Every Invoke the Lambda endpoint served, in completion order.
        self.invocations: list[Invocation] = []
        self._invocations_lock = threading.Lock()
        self._clients: dict[str, Any] = {}
        self._clients_lock = threading.Lock()
        self._saved_env: dict[str, str | None] = {}
        self._endpoint: LambdaEndpoint | None = None
        self._mock: Any = None
        #: The state-machine log group setting while the runtime is open (see provision).
        self._log_settings: Any = None

    # -- lifecycle ------------------------------------------------------------------------

    _open: LocalRuntime | None = None
    _open_lock = threading.Lock()

    @classmethod
    def current(cls) -> LocalRuntime | None:
        """The runtime open in this process, if any (to share it instead of opening one)."""
        return cls._open

    def __enter__(self) -> LocalRuntime:
        with LocalRuntime._open_lock:
            if LocalRuntime._open is not None:
                raise RuntimeError(
                    "another LocalRuntime is open in this process; close it first "
                    "(or share it, e.g. through a module- or session-scoped fixture)"
                )
            LocalRuntime._open = self
        return self.opened_by(self._open_runtime)

    def _open_runtime(self) -> None:
        # Environment first: importing moto builds boto3 sessions, which must not see a
        # real profile or endpoint.
        self._set_env({**_ENV_SET, "AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region})
        compat.apply(skip=self.compat_skip)
        timescale.set_time_scale(self._time_scale)
        registry = HandlerRegistry(
            self.handlers,
            self.functions_dir,
            region=self.region,
            account=self.account,
            tags=self.function_tags,
        )
        self._endpoint = LambdaEndpoint(registry, on_invocation=self._record_invocation)
        self._endpoint.start()
        self._set_env({"AWS_ENDPOINT_URL_LAMBDA": self._endpoint.url})
        compat_infrastructure.set_lambda_endpoint(self._endpoint.url)
        from moto import mock_aws

        self._mock = mock_aws(config={"stepfunctions": {"execute_state_machine": True}})
        self._mock.start()
        reset_clients()
        self.provision()

    def provision(self) -> None:
        """Create, in moto, the resources every function expects to exist: the payload bucket
        for offloaded outputs, the Relayflow table (flow-control leases, breakers, runs) and
        the approval signing key, and the state machines' log groups. Idempotent."""
        from relayflow.dal import create_table
        from relayflow.settings import get_settings

        bucket = get_settings().payload_bucket
        s3 = self.s3_client
        if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
            s3.create_bucket(Bucket=bucket)
        create_table(self.dynamodb_client)
        self._provision_approval_key()
        self._provision_state_machine_logs()

    def _provision_state_machine_logs(self) -> None:
        """The log groups the stack gives state machines (``StateMachineLogGroup``,
        ``StepEventsLogGroup`` in template.yaml), so that local machines log like deployed
        ones (the ``execution_logs`` compat fix writes the records). Unless a state-machine
        log group is configured already, the local one is, for as long as the runtime is
        open: Express machines then log ``ALL`` and Standard ones ``ERROR``, as on AWS."""
        from relayflow.settings import get_settings, override_settings

        settings = get_settings()
        if not settings.state_machine_log_group_arn and self._log_settings is None:
            name = f"/aws/vendedlogs/states/relayflow-{settings.stage}"
            arn = f"arn:aws:logs:{self.region}:{self.account}:log-group:{name}:*"
            self._log_settings = override_settings(state_machine_log_group_arn=arn)
            self._log_settings.__enter__()
            settings = get_settings()
        logs = self.client("logs")
        for arn in (settings.state_machine_log_group_arn, settings.step_events_log_group_arn):
            name = (arn or "").split(":log-group:")[-1].removesuffix(":*")
            found = logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"] if arn else []
            if arn and name not in {group["logGroupName"] for group in found}:
                logs.create_log_group(logGroupName=name)

    def _provision_approval_key(self) -> None:
        """The guest-link signing key (template.yaml generates it in AWS): a random value,
        created once per runtime."""
        import secrets

        from relayflow.approvals.links import signing_secret_name

        name = signing_secret_name()
        manager = self.client("secretsmanager")
        try:
            manager.describe_secret(SecretId=name)
        except manager.exceptions.ResourceNotFoundException:
            manager.create_secret(Name=name, SecretString=secrets.token_urlsafe(48))

    def close(self) -> None:
        """Stop the endpoint and moto and forget the process-wide state (what leaving the
        ``with`` block does)."""
        if self._log_settings is not None:
            self._log_settings.__exit__(None, None, None)
            self._log_settings = None
        if self._mock is not None:
            self._stop_running_executions()
            self._mock.stop()
            self._mock = None
        compat_infrastructure.set_lambda_endpoint(None)
        compat_infrastructure.prune_threads()
        compat_archive.forget()
        reset_clients()
        with self._clients_lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
        if self._endpoint is not None:
            self._endpoint.stop()
            self._endpoint = None
        self._restore_env()
        timescale.set_time_scale(timescale.DEFAULT_TIME_SCALE)
        with LocalRuntime._open_lock:
            if LocalRuntime._open is self:
                LocalRuntime._open = None

    def _set_env(self, values: Mapping[str, str]) -> None:
        cleared = [
            *_ENV_CLEARED,
            *(key for key in os.environ if key.startswith("AWS_ENDPOINT_URL_")),
        ]
        for key in (*values, *cleared):
            self._saved_env.setdefault(key, os.environ.get(key))
        for key in cleared:
            os.environ.pop(key, None)
        os.environ.update(values)

    def _restore_env(self) -> None:
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()

    def _stop_running_executions(self) -> None:
        """Abort what is still running, so no worker outlives the mock it runs against."""
        stopped = []
        for state_machine in list(self._backend().state_machines):
            for execution in list(state_machine.executions):
                if execution.exec_worker is not None and execution.status == "RUNNING":
                    execution.stop(stop_date=None, error="LocalRuntime.Closed", cause=None)
                    stopped.append(execution)
        if stopped:
            compat_infrastructure.wait_for_termination(
                lambda: all(e.status != "RUNNING" for e in stopped), timeout=5.0
            )

    def _require_open(self) -> None:
        if self._mock is None:
            raise RuntimeError("LocalRuntime is not open: use it as a context manager")

    @property
    def time_scale(self) -> float:
        """Factor applied to Wait and Retry sleeps; settable while the runtime is open."""
        return self._time_scale

    @time_scale.setter
    def time_scale(self, value: float) -> None:
        if value < 0:
            raise ValueError(f"time_scale must be >= 0, got {value}")
        self._time_scale = value
        if self._mock is not None:
            timescale.set_time_scale(value)

    @property
    def duplicate_invocations(self) -> bool:
        """At-least-once simulation (what Express may do): while true, every Lambda Invoke
        runs its handler twice with the same payload and the state machine gets the second
        result. Both show in :attr:`invocations`."""
        return self._endpoint is not None and self._endpoint.duplicate_invocations

    @duplicate_invocations.setter
    def duplicate_invocations(self, value: bool) -> None:
        self._require_open()
        assert self._endpoint is not None
        self._endpoint.duplicate_invocations = value

    def register_handler(
        self, function_name: str, handler: Handler, *, tags: Mapping[str, str] | None = None
    ) -> None:
        """Serve ``function_name`` with ``handler`` from now on (also while open), tagged
        ``tags`` when given (``{"relayflow-tenant": "<tenant>"}`` gives it to a tenant)."""
        self.handlers[function_name] = handler
        if tags is not None:
            self.function_tags[function_name] = dict(tags)

    # -- clients ----------------------------------------------------------------------------

    def client(self, service: str) -> Any:
        """The boto3 client for ``service`` against the mocked APIs (one per service)."""
        self._require_open()
        with self._clients_lock:
            client = self._clients.get(service)
            if client is None:
                with compat_infrastructure.session_lock:
                    client = compat_infrastructure.boto3_session().client(
                        service, region_name=self.region
                    )
                self._clients[service] = client
            return client

    sfn_client = _service_client("stepfunctions")
    dynamodb_client = _service_client("dynamodb")
    s3_client = _service_client("s3")
    events_client = _service_client("events")
    scheduler_client = _service_client("scheduler")

    @property
    def lambda_endpoint_url(self) -> str:
        self._require_open()
        assert self._endpoint is not None
        return self._endpoint.url

    # -- executions ---------------------------------------------------------------------------

    def create_state_machine(
        self,
        name: str,
        asl: Mapping[str, Any],
        *,
        role_arn: str = LOCAL_ROLE_ARN,
        type: str = "STANDARD",
    ) -> str:
        """Create the state machine ``name``, or update its definition; returns its ARN."""
        import json

        self._require_open()
        definition = json.dumps(asl)
        arn = f"arn:aws:states:{self.region}:{self.account}:stateMachine:{name}"
        existing = {sm.arn for sm in self._backend().state_machines}
        if arn in existing:
            self.sfn_client.update_state_machine(
                stateMachineArn=arn, definition=definition, roleArn=role_arn
            )
            return arn
        response = self.sfn_client.create_state_machine(
            name=name, definition=definition, roleArn=role_arn, type=type
        )
        return str(response["stateMachineArn"])

    def start_execution(
        self, state_machine_arn: str, input: Any = None, name: str | None = None
    ) -> str:
        """Start an execution (always named: a uuid when ``name`` is None); returns its ARN."""
        import json

        self._require_open()
        response = self.sfn_client.start_execution(
            stateMachineArn=state_machine_arn,
            name=name or uuid.uuid4().hex,
            input=json.dumps({} if input is None else input),
        )
        return str(response["executionArn"])

    def stop_execution(
        self, execution_arn: str, *, error: str | None = None, cause: str | None = None
    ) -> None:
        """Abort a running execution (ABORTED at once, even while a Task is blocked)."""
        self._require_open()
        params = {"executionArn": execution_arn}
        if error is not None:
            params["error"] = error
        if cause is not None:
            params["cause"] = cause
        self.sfn_client.stop_execution(**params)

    def wait(
        self,
        execution_arn: str,
        timeout: float = 60,
        *,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> ExecutionRecord:
        """Block until the execution ends and return its record.

        ``on_event`` is called with each new history event (JSON-serialisable) while it runs.
        Raises :class:`ExecutionWaitTimeout` (a ``TimeoutError``) after ``timeout`` seconds.
        """
        self._require_open()
        execution = self._backend().describe_execution(execution_arn)
        deadline = time.monotonic() + timeout
        seen = 0

        def done() -> bool:
            return str(execution.status) != "RUNNING"

        while True:
            remaining = deadline - time.monotonic()
            if on_event is None:
                compat_infrastructure.wait_for_termination(done, max(0.0, remaining))
            else:
                compat_infrastructure.wait_for_termination(
                    done, max(0.0, min(remaining, _ON_EVENT_POLL_SECONDS))
                )
                for event in self._events(execution, start=seen):
                    seen += 1
                    on_event(event)
            if done():
                record = self.describe(execution_arn)
                if on_event is not None:
                    for event in record.events[seen:]:
                        on_event(event)
                return record
            if time.monotonic() >= deadline:
                raise ExecutionWaitTimeout(self.describe(execution_arn), timeout)

    def run(
        self,
        name: str,
        asl: Mapping[str, Any],
        input: Any = None,
        *,
        execution_name: str | None = None,
        timeout: float = 60,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> ExecutionRecord:
        """Create (or update) the state machine, start one execution and wait for its end."""
        arn = self.create_state_machine(name, asl)
        execution_arn = self.start_execution(arn, input, name=execution_name)
        return self.wait(execution_arn, timeout=timeout, on_event=on_event)

    def describe(self, execution_arn: str) -> ExecutionRecord:
        """The execution as it is now (it may still be running)."""
        self._require_open()
        execution = self._backend().describe_execution(execution_arn)
        status = str(getattr(execution.status, "value", execution.status))
        events = list(self._events(execution))
        error, cause = execution.error, execution.cause
        if status in ("ABORTED", "TIMED_OUT") and error is None:
            for event in reversed(events):
                details = event.get("executionAbortedEventDetails") or event.get(
                    "executionTimedOutEventDetails"
                )
                if details:
                    error, cause = details.get("error") or None, details.get("cause") or None
                    break
        return ExecutionRecord(
            execution_arn=execution_arn,
            name=execution.name,
            state_machine_arn=execution.state_machine_arn,
            status=status,
            input=copy.deepcopy(execution.input_data),
            output=copy.deepcopy(execution.output) if status == "SUCCEEDED" else None,
            error=error,
            cause=cause,
            started_at=_millisecond(execution.start_date),
            stopped_at=_millisecond(execution.stop_date),
            events=events,
            states=build_state_runs(events, status),
        )

    def list_executions(self, state_machine_arn: str | None = None) -> list[str]:
        """ARNs of every execution started in this runtime (optionally of one machine, or of
        one version or alias ARN: the executions started through it)."""
        self._require_open()
        return [
            execution.execution_arn
            for state_machine in self._backend().state_machines
            for execution in state_machine.executions
            if state_machine_arn
            in (
                None,
                state_machine.arn,
                getattr(execution, "state_machine_version_arn", None),
                getattr(execution, "state_machine_alias_arn", None),
            )
        ]

    def invocations_of(self, function_name: str) -> list[Invocation]:
        with self._invocations_lock:
            return [i for i in self.invocations if i.function_name == function_name]

    def reset_invocations(self) -> None:
        with self._invocations_lock:
            self.invocations.clear()

    # -- internals ----------------------------------------------------------------------------

    def _record_invocation(self, invocation: Invocation) -> None:
        with self._invocations_lock:
            self.invocations.append(invocation)

    def _backend(self) -> Any:
        from moto.stepfunctions.parser.models import stepfunctions_parser_backends

        return stepfunctions_parser_backends[self.account][self.region]

    @property
    def sfn_backend(self) -> Any:
        """moto's Step Functions backend of this runtime (its state machines, versions and
        executions as objects: what ``serve --state`` saves and restores)."""
        self._require_open()
        return self._backend()

    @staticmethod
    def _events(execution: Any, start: int = 0) -> Iterator[dict[str, Any]]:
        worker = execution.exec_worker
        env = worker.env if worker is not None else None
        if env is None:
            return iter(())
        raw = env.event_manager._history_event_list[start:]
        return iter(compat_infrastructure.to_jsonable(raw))
