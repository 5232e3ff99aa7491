"""An Express run's steps from its state machine's CloudWatch Logs.

An Express machine logs every state's entry and exit at level ``ALL`` without execution data
(:func:`relayflow.executions.stepfunctions.logging_configuration`), to the stack's
``StateMachineLogGroup`` (or, for a workflow with ``events: {steps: true}``, to the step-events
log group). Those records are the only account of an Express run's steps besides what the steps
recorded themselves; this module reads one execution's records and folds them into timeline
entries:

1. :class:`ExecutionLogs` calls ``FilterLogEvents`` on the log group with the execution ARN as
   a quoted term (the only filter moto supports besides plain terms, and exact on AWS), in a
   window from the run's start to its end (or its deadline), following ``nextToken`` for at
   most :data:`MAX_PAGES` pages. The term also matches the ARNs it is a prefix of (a DLQ
   retry's ``<run id>_r2``), so each parsed record's ``execution_arn`` is checked too. It never
   raises: a log group that is missing, a refused or throttled call, all end in a
   :class:`LogRead` that says why nothing (or not everything) was read.
2. :func:`log_steps` turns the records back into the history events they are (a record at
   level ``ALL`` is one history event: id, type, ``previous_event_id``, time, and the details
   that are not execution data) and folds them with the fold of a Standard run's history
   (:func:`relayflow.control.timeline.history_steps`): one
   :class:`~relayflow.control.timeline.StepRun` per step execution with its status, attempts,
   refusals, start, end, duration and error, never an output or a cause (those are execution
   data). So an Express timeline's statuses are a Standard one's by construction. The native
   recording's ``_run``, ``_record.*``, ``_succeeded`` and ``_failed`` states are no steps.

One difference stays: without execution data a fallback is known by its ``<key>.fallback``
state having run, not by the record it wrote.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from relayflow.adapters.port import AwsPort
from relayflow.control.step_events import LogRecord
from relayflow.control.timeline import StepRun, history_steps
from relayflow.observability import logger

#: Pages of ``FilterLogEvents`` one read follows at most (each up to 10,000 records or 1 MB;
#: an Express run of the 300 s limit logs a few thousand at most).
MAX_PAGES = 10
#: Records that end an execution.
EXECUTION_END = frozenset(
    {"ExecutionSucceeded", "ExecutionFailed", "ExecutionTimedOut", "ExecutionAborted"}
)


@dataclass
class LogRead:
    """One execution's log records, and how the read went."""

    records: list[LogRecord] = field(default_factory=list)
    #: Every page was read (``False``: stopped at :data:`MAX_PAGES`, or a call failed midway).
    complete: bool = True
    #: Why the read found nothing or stopped early (``None``: it did not).
    problem: str | None = None

    @property
    def ended(self) -> bool:
        """Whether the records hold the execution's end."""
        return any(record.type in EXECUTION_END for record in self.records)


def parse_record(message: str) -> LogRecord | None:
    """The record in one log event's message: AWS's shape (``event_timestamp`` in epoch
    milliseconds, as a string) or an ISO-8601 time; ``None`` when it is not a record."""
    record = LogRecord.parse(message)
    if record is not None:
        return record
    try:
        raw = json.loads(message)
        moment = datetime.fromisoformat(str(raw["event_timestamp"]).replace("Z", "+00:00"))
    except (ValueError, KeyError, TypeError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    raw["event_timestamp"] = int(moment.timestamp() * 1000)
    return LogRecord.parse(json.dumps(raw))


def log_group_name(log_group_arn: str) -> str:
    """``arn:…:log-group:<name>[:*]`` → ``<name>``."""
    return log_group_arn.split(":log-group:", 1)[-1].removesuffix(":*")


class ExecutionLogs(AwsPort):
    """Reads executions' records from CloudWatch Logs. ``client`` is a boto3 ``logs`` client
    (default: ``adapters.aws.client("logs")``, looked up at each read)."""

    service = "logs"

    def __init__(self, client: Any | None = None, *, max_pages: int = MAX_PAGES) -> None:
        super().__init__(client)
        self.max_pages = max_pages

    def read(self, log_group_arn: str, execution_arn: str, start_ms: int, end_ms: int) -> LogRead:
        """The records of ``execution_arn`` logged between ``start_ms`` and ``end_ms`` (epoch
        milliseconds), oldest first. Never raises (see the module docstring)."""
        from botocore.exceptions import BotoCoreError, ClientError

        params: dict[str, Any] = {
            "logGroupName": log_group_name(log_group_arn),
            "filterPattern": json.dumps(execution_arn),
            "startTime": start_ms,
            "endTime": end_ms,
        }
        found: dict[int, LogRecord] = {}
        read = LogRead()
        for page in range(self.max_pages):
            try:
                response = self.client.filter_log_events(**params)
            except ClientError as exc:
                # The code only: the message of a refusal names the account and the role,
                # and the problem reaches the API's caller (timeline_note).
                code = exc.response.get("Error", {}).get("Code")
                read.problem, read.complete = f"FilterLogEvents: {code}", False
                logger.warning("express run logs not read", extra={"reason": str(exc)})
                break
            except BotoCoreError as exc:
                read.problem, read.complete = f"FilterLogEvents: {type(exc).__name__}", False
                logger.warning("express run logs not read", extra={"reason": str(exc)})
                break
            for event in response.get("events") or []:
                record = parse_record(str(event.get("message", "")))
                if record is not None and record.execution_arn == execution_arn:
                    found[record.id] = record  # pages may overlap: ids are unique
            token = response.get("nextToken")
            if not token:
                break
            params["nextToken"] = token
            if page == self.max_pages - 1:
                read.complete = False
                read.problem = f"stopped after {self.max_pages} pages of FilterLogEvents"
        read.records = [found[key] for key in sorted(found)]
        if read.problem and read.records:
            logger.warning("express run logs not fully read", extra={"reason": read.problem})
        return read


def history_events(records: Iterable[LogRecord]) -> list[dict[str, Any]]:
    """``records`` (one execution's, any order) as the ``GetExecutionHistory`` events they log,
    oldest first: the same ids, ``previousEventId`` chain, times and (execution-data-free)
    details."""
    return [
        {
            "id": record.id,
            "type": record.type,
            "previousEventId": record.previous_id,
            "timestamp": datetime.fromtimestamp(record.at_ms / 1000.0, tz=UTC),
            "loggedEventDetails": dict(record.details),
        }
        for record in sorted(records, key=lambda record: record.id)
    ]


def log_steps(
    step_types: Mapping[str, str],
    step_runners: Mapping[str, str],
    records: Iterable[LogRecord],
) -> list[StepRun]:
    """One entry per step execution in ``records`` (one execution's, any order), in the order
    the steps started: the records are the execution's history events without execution
    data, folded by the fold of a Standard run's history
    (:func:`relayflow.control.timeline.history_steps`), so both engines show the same
    statuses, attempts, refusals, times and errors. Outputs and causes stay empty."""
    return history_steps(step_types, step_runners, history_events(records))
