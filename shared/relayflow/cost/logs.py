"""What a run's state machine writes to CloudWatch Logs, in billed bytes.

Relayflow's machines log without execution data (``relayflow.executions.stepfunctions.
logging_configuration``): Express at level ``ALL`` (every history event: Express has no
execution history, its log is the only record of its states), Standard at ``ERROR`` (only the
events below: nothing for a run whose steps all succeed at their first attempt). A record is
what Step Functions writes for one history event (``relayflow.executions.history.log_record``,
AWS's shape); CloudWatch bills its message bytes plus
:data:`relayflow.cost.prices.LOGS_EVENT_OVERHEAD_BYTES`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from relayflow.cost import prices

LogLevel = Literal["ALL", "ERROR", "FATAL", "OFF"]

#: The history events Step Functions logs at level ``FATAL`` ...
FATAL_EVENTS = frozenset({"ExecutionAborted", "ExecutionFailed", "ExecutionTimedOut"})
#: ... and at level ``ERROR`` (https://docs.aws.amazon.com/step-functions/latest/dg/
#: cloudwatch-log-level.html): the failures, aborts and timeouts of executions, states, Task
#: attempts, Lambda invocations, Map iterations and Map Runs, and a ``Fail`` state entered.
ERROR_EVENTS = FATAL_EVENTS | frozenset(
    {
        "FailStateEntered",
        "LambdaFunctionFailed",
        "LambdaFunctionScheduleFailed",
        "LambdaFunctionStartFailed",
        "LambdaFunctionTimedOut",
        "MapIterationAborted",
        "MapIterationFailed",
        "MapRunAborted",
        "MapRunFailed",
        "MapStateAborted",
        "MapStateFailed",
        "ParallelStateAborted",
        "ParallelStateFailed",
        "TaskFailed",
        "TaskStartFailed",
        "TaskStateAborted",
        "TaskSubmitFailed",
        "TaskTimedOut",
        "WaitStateAborted",
    }
)

#: The account and the stage a deployed execution ARN is modelled with, and a tenant id of
#: the length Relayflow gives them: the ARN is in every record, so its length counts.
_ACCOUNT_PREFIX = "arn:aws:states:us-east-1:123456789012"
_MODEL_TENANT = "t-0123456789"
_MODEL_STAGE = "prod"
#: The UUID Step Functions appends to an Express execution's ARN.
_EXPRESS_SUFFIX = "00000000-0000-0000-0000-000000000000"


def logged(event_type: str, level: LogLevel) -> bool:
    """Whether Step Functions logs a history event of ``event_type`` at ``level``."""
    if level == "ALL":
        return True
    if level == "ERROR":
        return event_type in ERROR_EVENTS
    if level == "FATAL":
        return event_type in FATAL_EVENTS
    return False


def deployed_execution_arn(workflow_id: str, execution_name: str, *, express: bool) -> str:
    """The ARN a deployed execution of ``workflow_id`` named ``execution_name`` (a run id)
    would have: ``…:execution:<machine>:<name>`` on Standard, ``…:express:<machine>:<name>:
    <uuid>`` on Express, the machine named as the control plane names it."""
    from relayflow.executions.stepfunctions import state_machine_name

    machine = state_machine_name(_MODEL_STAGE, _MODEL_TENANT, workflow_id)
    if express:
        return f"{_ACCOUNT_PREFIX}:express:{machine}:{execution_name}:{_EXPRESS_SUFFIX}"
    return f"{_ACCOUNT_PREFIX}:execution:{machine}:{execution_name}"


def record_bytes(record: Mapping[str, Any]) -> int:
    """Billed bytes of one log record: its compact JSON message plus the per-event overhead."""
    message = json.dumps(record, separators=(",", ":"), ensure_ascii=False)
    return len(message.encode()) + prices.LOGS_EVENT_OVERHEAD_BYTES


def execution_log_bytes(
    events: Iterable[Mapping[str, Any]], execution_arn: str, level: LogLevel
) -> int:
    """Billed bytes an execution with these history ``events`` (oldest first) writes to
    CloudWatch Logs at ``level``, every record naming ``execution_arn``."""
    from relayflow.executions.history import log_record

    total = 0
    for event in events:
        if not logged(str(event.get("type", "")), level):
            continue
        total += record_bytes(log_record(event, execution_arn))
    return total


def logs_dollars(log_bytes: float) -> float:
    """What ``log_bytes`` cost at the vended-logs rate: delivery, plus one month of storage
    (the stack's default retention is 30 days, ``LogRetentionDays``; counted at the bytes
    delivered, an upper bound: CloudWatch stores them compressed)."""
    gigabytes = log_bytes / 2**30
    return gigabytes * (prices.LOGS_INGESTION_PER_GB + prices.LOGS_STORAGE_PER_GB_MONTH)
