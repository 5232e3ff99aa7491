"""EventBridge's "Step Functions Execution Status Change" rule, locally: :class:`StatusRecorder`
watches the runtime's executions and calls ``functions/recorder``'s handler with the event the
rule would deliver (used by :mod:`relayflow.local.serve`)."""

from __future__ import annotations

import datetime
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from relayflow.local.lambda_endpoint import Handler, LambdaContext
from relayflow.local.runtime import LocalRuntime
from relayflow.naming import function_arn, function_name

_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})
_RECORDER_ATTEMPTS = 3


def _epoch_ms(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return int(value.timestamp() * 1000)
    return int(value)


def _state_machine_of(execution_arn: str) -> str:
    """``arn:…:execution:<machine>:<name>`` → ``arn:…:stateMachine:<machine>``."""
    parts = execution_arn.split(":")
    return ":".join([*parts[:5], "stateMachine", parts[6]])


def status_change_event(
    description: Mapping[str, Any], *, status: str | None = None, region: str, account: str
) -> dict[str, Any]:
    """The EventBridge event Step Functions sends when an execution changes status, built from
    a ``DescribeExecution`` answer. ``status="RUNNING"`` gives the start event of an execution
    that may have ended since (no stop date, output or error then)."""
    status = status or str(description["status"])
    running = status == "RUNNING"
    arn = str(description["executionArn"])
    output = None if running else description.get("output")
    detail: dict[str, Any] = {
        "executionArn": arn,
        "stateMachineArn": description.get("stateMachineArn") or _state_machine_of(arn),
        "name": description.get("name") or arn.rsplit(":", 1)[-1],
        "status": status,
        "startDate": _epoch_ms(description.get("startDate")),
        "stopDate": None if running else _epoch_ms(description.get("stopDate")),
        "input": description.get("input"),
        "output": output,
        "inputDetails": {"included": True},
        "outputDetails": {"included": True} if output is not None else None,
        "error": None if running else description.get("error"),
        "cause": None if running else description.get("cause"),
    }
    for optional in ("stateMachineVersionArn", "stateMachineAliasArn"):
        if description.get(optional):
            detail[optional] = description[optional]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "account": account,
        "time": now,
        "region": region,
        "resources": [arn],
        "detail": detail,
    }


class StatusRecorder:
    """Calls the recorder for every status change of the runtime's executions: RUNNING when
    one appears, then its end. Wakes when an execution terminates (the runtime's termination
    hook) or when :meth:`poke` is called, and polls every ``interval`` seconds otherwise."""

    def __init__(self, runtime: LocalRuntime, recorder: Handler, *, interval: float = 0.05) -> None:
        self._runtime = runtime
        self._recorder = recorder
        self._interval = interval
        self._reported: dict[str, str] = {}
        self._failures: dict[tuple[str, str], int] = {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="relayflow-recorder", daemon=True)
        self._idle = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self.poke()
        self._thread.join(timeout=5)

    def poke(self) -> None:
        """Look for changes now (after a request that may have started or stopped a run)."""
        from relayflow.local import compat_infrastructure

        with compat_infrastructure.terminated:
            compat_infrastructure.terminated.notify_all()

    def settle(self, timeout: float = 5.0) -> None:
        """Wait until one full pass found nothing left to report (tests)."""
        self._idle.clear()
        self.poke()
        self._idle.wait(timeout)

    def _run(self) -> None:
        from relayflow.local import compat_infrastructure

        while not self._stopping.is_set():
            try:
                pending = self.poll()
            except Exception as exc:  # the watcher must outlive one bad pass
                from relayflow.observability import logger

                logger.warning("status poll failed", extra={"reason": str(exc)})
                pending = True
            if not pending:
                self._idle.set()
            with compat_infrastructure.terminated:
                if not self._stopping.is_set():
                    compat_infrastructure.terminated.wait(self._interval)

    def poll(self) -> bool:
        """Report every change since the last pass; whether a report is still pending."""
        pending = False
        for arn in self._runtime.list_executions():
            reported = self._reported.get(arn)
            if reported in _TERMINAL:
                continue
            description = self._runtime.sfn_client.describe_execution(executionArn=arn)
            status = str(description["status"])
            if reported is None:
                if not self._deliver(arn, description, "RUNNING"):
                    pending = True
                    continue
                self._reported[arn] = "RUNNING"
            if status != "RUNNING":
                if self._deliver(arn, description, status):
                    self._reported[arn] = status
                else:
                    pending = True
        return pending

    def report(self, description: Mapping[str, Any]) -> None:
        """Call the recorder with the status change of ``description`` (a
        ``DescribeExecution`` answer), for an execution this watcher does not see (one kept
        from before a restart), retried as :meth:`poll` retries a change."""
        arn, status = str(description["executionArn"]), str(description["status"])
        while not self._deliver(arn, description, status):
            continue  # gives up after the attempts an asynchronous invocation has
        self._reported[arn] = status

    def _deliver(self, arn: str, description: Mapping[str, Any], status: str) -> bool:
        """Call the recorder; after repeated failures give up on this change (EventBridge
        retries an asynchronous invocation twice, then drops it)."""
        event = status_change_event(
            description, status=status, region=self._runtime.region, account=self._runtime.account
        )
        context = LambdaContext(
            function_name=function_name("recorder"),
            invoked_function_arn=function_arn("recorder", self._runtime.region),
        )
        try:
            self._recorder(event, context)
        except Exception as exc:
            from relayflow.observability import logger

            attempts = self._failures.get((arn, status), 0) + 1
            self._failures[(arn, status)] = attempts
            logger.warning(
                "recorder failed",
                extra={
                    "execution_arn": arn,
                    "status": status,
                    "attempt": attempts,
                    "reason": str(exc),
                },
            )
            return attempts >= _RECORDER_ATTEMPTS
        return True
