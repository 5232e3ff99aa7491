"""Compatibility fix: nested executions, ``startExecution.sync:2`` (a sub_workflow step).

Registered through :mod:`relayflow.local.compat_registry` on import; applied in the order
:data:`relayflow.local.compat.FAMILIES` gives.
"""

from __future__ import annotations

import contextlib
import datetime
import json
from typing import Any

from relayflow.local.compat_infrastructure import terminated
from relayflow.local.compat_registry import Patches, fix

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


@fix("start_execution_sync", "notes: startExecution.sync:2 does not run")
def _start_execution_sync(patches: Patches) -> None:
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
