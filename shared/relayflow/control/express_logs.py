"""An Express run's steps from its state machine's CloudWatch Logs.

An Express machine logs every state's entry and exit at level ``ALL`` without execution data
(:func:`relayflow.control.stepfunctions.logging_configuration`), to the stack's
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
2. :func:`log_steps` folds the records with the same fold that turns them into per-step
   lifecycle events (:func:`relayflow.control.step_events.fold`), then those events into one
   :class:`~relayflow.control.timeline.StepRun` per step execution: status, attempts, start,
   end, duration and error, never an output or a cause (those are execution data). A step's
   main state is its key; ``<key>.<suffix>`` states belong to it; the native recording's
   ``_run``, ``_record.*``, ``_succeeded`` and ``_failed`` states are no steps.

Statuses are the Standard timeline's: ``succeeded``; ``caught`` (its last attempt failed and a
Catch took the error), ``fallback`` when the Catch went to the step's ``on_error`` fallback;
``failed`` when the run ended in the step; ``running`` while it has not exited.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from relayflow.control.step_events import LogRecord, StepEvent, Traces, fold
from relayflow.control.timeline import StepRun
from relayflow.observability import logger

#: Pages of ``FilterLogEvents`` one read follows at most (each up to 10,000 records or 1 MB;
#: an Express run of the 300 s limit logs a few thousand at most).
MAX_PAGES = 10
#: Records that end an execution.
EXECUTION_END = frozenset(
    {"ExecutionSucceeded", "ExecutionFailed", "ExecutionTimedOut", "ExecutionAborted"}
)
#: The auxiliary state a Catch enters for ``on_error: {action: continue}`` (its fallback).
_FALLBACK_SUFFIX = ".fallback"


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


def _iso_ms(at_ms: int) -> str:
    moment = datetime.fromtimestamp(at_ms / 1000.0, tz=UTC)
    return moment.isoformat(timespec="milliseconds")


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


class ExecutionLogs:
    """Reads executions' records from CloudWatch Logs. ``client`` is a boto3 ``logs`` client
    (default: ``adapters.aws.client("logs")``, looked up at each read)."""

    def __init__(self, client: Any | None = None, *, max_pages: int = MAX_PAGES) -> None:
        self._client = client
        self.max_pages = max_pages

    @property
    def client(self) -> Any:
        if self._client is not None:
            return self._client
        from relayflow.adapters.aws import client

        return client("logs")

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


def log_steps(
    step_types: Mapping[str, str],
    step_runners: Mapping[str, str],
    records: Iterable[LogRecord],
) -> list[StepRun]:
    """One entry per step execution in ``records`` (one execution's, any order), in the order
    the steps started (see the module docstring for the statuses)."""
    ordered = sorted(records, key=lambda record: record.id)
    ending = {record.id for record in ordered if record.type in EXECUTION_END}
    fallbacks = _fallback_entries(ordered)
    items = _item_indexes(ordered)
    steps: list[StepRun] = []
    running: dict[str, list[tuple[int, StepRun]]] = {}
    for event in fold(ordered, Traces({})):
        if event.step not in step_types:
            continue
        if event.kind == "started":
            index = items.get(event.event_id)
            entry = StepRun(
                key=event.step if index is None else f"{event.step}[{index}]",
                type=step_types[event.step],
                status="running",
                attempts=1,
                started_at=_iso_ms(event.at_ms),
                ended_at=None,
                duration_ms=None,
                runner=step_runners.get(event.step, "native"),
            )
            steps.append(entry)
            running.setdefault(event.step, []).append((event.at_ms, entry))
        elif event.kind in ("succeeded", "failed"):
            entry = _ending_entry(event, running, steps)
            if entry is None:
                continue
            entry.attempts = max(event.attempt, 1)
            entry.ended_at = _iso_ms(event.at_ms)
            started = datetime.fromisoformat(entry.started_at or entry.ended_at)
            elapsed = datetime.fromisoformat(entry.ended_at) - started
            entry.duration_ms = round(elapsed.total_seconds() * 1000, 3)
            entry.error = event.error
            if event.kind == "succeeded":
                entry.status = "succeeded"
            elif event.event_id in ending:
                entry.status = "failed"  # the run ended in it
            else:
                entry.status = "fallback" if (event.step, event.event_id) in fallbacks else "caught"
        elif event.kind == "retrying":
            entry = _open_entry(event.step, running, steps)
            if entry is not None:
                entry.attempts = event.attempt
    return steps


def _ending_entry(
    event: StepEvent, running: dict[str, list[tuple[int, StepRun]]], steps: Sequence[StepRun]
) -> StepRun | None:
    """The entry a step's exit ends: the running one that started ``duration_ms`` before it
    (for_each items run side by side), else the oldest running one, else (a linear retry's
    next attempt, which starts no entry) the step's latest."""
    opened = running.get(event.step) or []
    if opened:
        began = event.at_ms - (event.duration_ms or 0)
        index = next((i for i, (at, _) in enumerate(opened) if at == began), 0)
        return opened.pop(index)[1]
    return next((step for step in reversed(steps) if _base(step.key) == event.step), None)


def _open_entry(
    key: str, running: dict[str, list[tuple[int, StepRun]]], steps: Sequence[StepRun]
) -> StepRun | None:
    opened = running.get(key) or []
    if opened:
        return opened[-1][1]
    return next((step for step in reversed(steps) if _base(step.key) == key), None)


def _base(label: str) -> str:
    """``price[2]`` → ``price``."""
    return label.split("[", 1)[0]


def _item_indexes(records: Sequence[LogRecord]) -> dict[int, int]:
    """The for_each item index of each state entry that begins an item: the entry follows its
    iteration's ``MapIterationStarted``, which carries the index."""
    started = {
        record.id: int(record.details["index"])
        for record in records
        if record.type == "MapIterationStarted" and str(record.details.get("index", "")).isdigit()
    }
    return {
        record.id: started[record.previous_id]
        for record in records
        if record.type.endswith("StateEntered") and record.previous_id in started
    }


def _fallback_entries(records: Sequence[LogRecord]) -> set[tuple[str, int]]:
    """``(step, exit record id)`` of each failed main-state exit whose next state was the
    step's ``on_error`` fallback (the fallback's entry follows the exit)."""
    exits = {
        record.id: record.name
        for record in records
        if record.type.endswith("StateExited") and record.name
    }
    found: set[tuple[str, int]] = set()
    for record in records:
        name = record.name or ""
        if record.type.endswith("StateEntered") and name.endswith(_FALLBACK_SUFFIX):
            key = name.removesuffix(_FALLBACK_SUFFIX)
            if exits.get(record.previous_id) == key:
                found.add((key, record.previous_id))
    return found
