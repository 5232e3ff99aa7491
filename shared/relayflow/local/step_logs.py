"""Per-step lifecycle events on the local runtime: execution history as CloudWatch Logs.

moto's Step Functions does not deliver execution logs. :class:`StepLogShipper` stands in for
CloudWatch Logs and its subscription filter: for each execution of a state machine whose
logging configuration sends level ``ALL`` to the step-events log group (the configuration the
control plane gives a workflow with ``events: {steps: true}``), it turns the history events it
has not shipped yet into the records Step Functions would log without execution data
(:func:`log_record`), wraps them as a subscription delivery, and calls the step-events
function with it. The same code as on AWS then publishes ``relayflow.step.*`` on the bus.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from relayflow.control.step_events import encode_subscription
from relayflow.executions.history import aws_log_record, epoch_millis, log_record
from relayflow.local.lambda_endpoint import Handler
from relayflow.local.runtime import LocalRuntime

#: Moved to the deployed package (the recorder and the cost counts read histories too).
__all__ = ["aws_log_record", "epoch_millis", "log_record", "logs_step_events", "with_step_events"]


def logs_step_events(logging: Mapping[str, Any] | None, log_group_arn: str) -> bool:
    """Whether a state machine's ``loggingConfiguration`` sends every event to the
    step-events log group."""
    if not logging or logging.get("level") != "ALL":
        return False
    for destination in logging.get("destinations") or []:
        group = (destination.get("cloudWatchLogsLogGroup") or {}).get("logGroupArn", "")
        if group.removesuffix(":*") == log_group_arn.removesuffix(":*"):
            return True
    return False


def with_step_events(runtime: LocalRuntime, recorder: Handler) -> Handler:
    """``recorder`` (the status-change handler ``relayflow serve`` calls), followed by
    shipping the execution's new log records to the step-events function: locally, step
    events are published when a run starts and when it ends, in order, rather than as each
    step runs."""
    from relayflow.local.lambda_endpoint import HandlerRegistry
    from relayflow.naming import function_name
    from relayflow.settings import get_settings

    registry = HandlerRegistry(runtime.handlers, runtime.functions_dir, region=runtime.region)
    handler = registry.resolve(function_name("step_events"))
    group = get_settings().step_events_log_group_arn
    if handler is None or not group:
        return recorder
    shipper = StepLogShipper(runtime, handler, log_group_arn=group)

    def record_and_ship(event: dict[str, Any], context: Any) -> Any:
        answer = recorder(event, context)
        arn = (event.get("detail") or {}).get("executionArn")
        try:
            if arn:
                shipper.ship([str(arn)])
        except Exception as exc:  # the run is recorded; its next status change ships again
            from relayflow.observability import logger

            logger.warning("step events not shipped", extra={"reason": str(exc)})
        return answer

    return record_and_ship


class StepLogShipper:
    """Ships the runtime's execution histories to ``handler`` (the step-events function's,
    called as the subscription filter would call it)."""

    def __init__(
        self,
        runtime: LocalRuntime,
        handler: Callable[[dict[str, Any], Any], Any],
        *,
        log_group_arn: str,
    ) -> None:
        self._runtime = runtime
        self._handler = handler
        self._group = log_group_arn
        self._shipped: dict[str, int] = {}
        self._logging: dict[str, bool] = {}

    def _logged(self, execution_arn: str) -> bool:
        parts = execution_arn.split(":")
        machine = ":".join([*parts[:5], "stateMachine", parts[6]])
        if machine not in self._logging:
            described = self._runtime.sfn_client.describe_state_machine(stateMachineArn=machine)
            self._logging[machine] = logs_step_events(
                described.get("loggingConfiguration"), self._group
            )
        return self._logging[machine]

    def ship(self, execution_arns: Iterable[str] | None = None) -> int:
        """Deliver every history event not delivered yet of the given executions (default: all
        of the runtime's) whose machine logs step events; returns how many records went."""
        sent = 0
        arns = self._runtime.list_executions() if execution_arns is None else execution_arns
        for arn in arns:
            if not self._logged(arn):
                continue
            history = self._runtime.sfn_client.get_execution_history(
                executionArn=arn, maxResults=1000
            )["events"]
            done = self._shipped.get(arn, 0)
            fresh = [log_record(e, arn) for e in history if int(e["id"]) > done]
            if not fresh:
                continue
            machine = arn.split(":")[6]
            delivery = encode_subscription(
                fresh, log_group=self._group.split(":log-group:")[-1], log_stream=machine
            )
            self._handler(delivery, None)
            self._shipped[arn] = max(int(r["id"]) for r in fresh)
            sent += len(fresh)
        return sent
