"""Per-step lifecycle events from a state machine's CloudWatch Logs.

A workflow with ``events: {steps: true}`` has its state machine log every history event
(level ``ALL``, execution data off) to the step-events log group, whose subscription filter
sends the records to the step-events function. For each batch the function

1. decodes the payload (base64 of gzip of ``{"messageType", "logEvents": [...]}``);
2. reads each record's execution ARN: the state machine's name says the tenant and the
   workflow (``relayflow-<stage>-<tenant>_<workflow>``), the execution's name the run
   (``<run id>`` or, restarted from the DLQ, ``<run id>_r<attempt>``); records of machines
   outside the stage are skipped;
3. folds the records, oldest first, over the execution's open *step traces* (one per state
   entry, :mod:`relayflow.dal.step_trace`, loaded once per execution and batch) into events:

   ================================  ======================================================
   record                            event
   ================================  ======================================================
   a step's main state entered       ``relayflow.step.started`` (attempt 1)
   a Task attempt scheduled          ``relayflow.step.retrying`` from the second attempt on,
                                     with the error of the attempt before
   a callback Task scheduled, a      ``relayflow.step.waiting``
   Wait state entered
   ``<key>.park`` entered            ``relayflow.step.parked``
   the main state exited             ``relayflow.step.succeeded``, or ``.failed`` when its
                                     last attempt failed (a Catch took the error)
   the execution failed, timed out   ``relayflow.step.failed`` for each step still open
   or was aborted
   ================================  ======================================================

   A step's main state is the state named by its key (``[a-z][a-z0-9_]*``, see
   :mod:`relayflow.compiler.compile`); auxiliary states (``<key>.<suffix>``) only add to it. A
   record without a state name (``TaskScheduled``, ``TaskFailed``, …) belongs to the trace
   whose last event it follows (``previous_event_id``: every event of a state moves its trace
   on, so concurrent for_each items stay apart), else to the one open Task. The subscription
   therefore takes every record (no filter pattern);
4. puts the events on the Relayflow bus, at most 10 per ``PutEvents``, then stores the
   traces. A failed put raises before anything is stored, so the redelivered batch publishes
   the same events again: delivery is at least once, and ``detail.event_id`` (execution name
   and history event id) is stable for deduplication. A batch redelivered after its traces
   were stored changes no open step (its records are older than the traces); the events of
   states it saw exit are published again.

The local runtime has no CloudWatch Logs: :mod:`relayflow.local.step_logs` turns execution
history into the same records and calls the same function.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from relayflow.control.timeline import REFUSAL_ERRORS
from relayflow.executions.history import ATTEMPT_EVENTS, FAILURE_EVENTS
from relayflow.observability import logger

#: Source and detail-type prefix of the events on the Relayflow bus.
SOURCE = "relayflow"
DETAIL_TYPE_PREFIX = "relayflow.step."
KINDS = ("started", "succeeded", "failed", "retrying", "parked", "waiting")
#: EventBridge takes at most this many entries per PutEvents.
PUT_EVENTS_BATCH = 10
#: How long a trace is kept at most (a Standard execution runs for a year at most).
TRACE_LIFETIME = timedelta(days=366)
_STEP_KEY = re.compile(r"^[a-z][a-z0-9_]*$")
#: The history's failure events less the Map/Parallel *Aborted* ones, which this fold has never
#: taken for a step's failure (a stopped run ends through :data:`_EXECUTION_END`).
_FAILURE = FAILURE_EVENTS - {"MapStateAborted", "ParallelStateAborted"}
_EXECUTION_END = frozenset({"ExecutionFailed", "ExecutionTimedOut", "ExecutionAborted"})
_END_ERRORS = {"ExecutionTimedOut": "States.Timeout", "ExecutionAborted": "States.Aborted"}
#: Records about a Map or Parallel as a whole (its failure, its success, …).
_COMPOSITE_PREFIXES = ("MapState", "ParallelState")
#: Composite records chained after the state's own entry (not after a child's last event).
_COMPOSITE_OWN = frozenset({"MapStateStarted", "ParallelStateStarted"})
_PARK_SUFFIX = ".park"
_RETRY_WAIT_SUFFIX = ".retry_wait"
#: The trace that carries a linear-retry step's attempt count across its Catch → Wait loop.
_CARRY = "@carry"


class StepEventsNotPublished(Exception):
    """The Relayflow bus did not take every step event (the batch is redelivered)."""


@dataclass(frozen=True)
class LogRecord:
    """One Step Functions log record (the JSON of a CloudWatch Logs event's message)."""

    id: int
    type: str
    previous_id: int
    at_ms: int
    execution_arn: str
    details: Mapping[str, Any]

    @classmethod
    def parse(cls, message: str) -> LogRecord | None:
        """The record in ``message``; ``None`` when it is not one."""
        try:
            raw = json.loads(message)
            return cls(
                id=int(raw["id"]),
                type=str(raw["type"]),
                previous_id=int(raw.get("previous_event_id") or 0),
                at_ms=int(raw["event_timestamp"]),
                execution_arn=str(raw["execution_arn"]),
                details=raw.get("details") or {},
            )
        except (ValueError, KeyError, TypeError):
            return None

    @property
    def name(self) -> str | None:
        value = self.details.get("name")
        return str(value) if value else None


@dataclass(frozen=True)
class Execution:
    """Whose execution a record is of, from its ARN."""

    tenant: str
    workflow_id: str
    run_id: str
    name: str
    arn: str

    @classmethod
    def of(cls, execution_arn: str, stage: str) -> Execution | None:
        """``None`` for an execution of a machine the control plane of ``stage`` did not name
        (``relayflow-<stage>-<tenant>_<workflow>``)."""
        parts = execution_arn.split(":")
        if len(parts) < 8 or parts[5] != "execution":
            return None
        machine, name = parts[6], parts[7]
        prefix = f"relayflow-{stage}-"
        tenant, _, workflow = machine.removeprefix(prefix).partition("_")
        if not machine.startswith(prefix) or not tenant or not workflow or not name:
            return None
        run_id = re.sub(r"_r\d+$", "", name)
        return cls(tenant, workflow, run_id, name, execution_arn)


@dataclass
class StepEvent:
    """One lifecycle event of one step."""

    kind: str
    step: str
    attempt: int
    at_ms: int
    event_id: int
    duration_ms: int | None = None
    error: str | None = None
    #: Attempts refused before a call (flow control, an open breaker): not in ``attempt``.
    refusals: int = 0

    def detail(self, execution: Execution) -> dict[str, Any]:
        from relayflow.triggers.sync import TENANT_FIELD

        return {
            "tenant": execution.tenant,
            TENANT_FIELD: execution.tenant,  # what subscription rules match
            "workflow_id": execution.workflow_id,
            "run_id": execution.run_id,
            "step": self.step,
            "attempt": self.attempt,
            "refusals": self.refusals,
            "duration_ms": self.duration_ms,
            "error": self.error,
            "at": _iso_ms(self.at_ms),
            "event_id": f"{execution.name}/{self.event_id}",
        }


@dataclass
class Traces:
    """The open traces of one execution while a batch is folded (by sort key: ``<state>@<entry
    event id>`` per entry, ``<step>@carry`` per linear-retry step), what changed (stored
    after the events are published) and what closed (deleted then)."""

    open: dict[str, dict[str, Any]]
    changed: set[str] = field(default_factory=set)
    closed: set[str] = field(default_factory=set)
    #: Keys the table holds (loaded, or to be stored): only those need a delete on close. A
    #: state entered and exited within one batch costs no write at all.
    stored: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.stored |= set(self.open)

    def put(self, sk: str, trace: dict[str, Any]) -> None:
        self.open[sk] = trace
        self.changed.add(sk)
        self.closed.discard(sk)

    def close(self, sk: str) -> None:
        self.open.pop(sk, None)
        self.changed.discard(sk)
        if sk in self.stored:
            self.closed.add(sk)

    def entries(self) -> list[tuple[str, dict[str, Any]]]:
        """The open entries (not carries), oldest first."""
        found = [(sk, t) for sk, t in self.open.items() if not sk.endswith(_CARRY)]
        return sorted(found, key=lambda item: int(item[1].get("entry", 0)))

    def following(self, record: LogRecord, *, or_the_task: bool = True) -> str | None:
        """The entry whose last event ``record`` follows, else (``or_the_task``) the one open
        Task."""
        entries = self.entries()
        for sk, trace in entries:
            if trace.get("last_event_id") == record.previous_id:
                return sk
        if not or_the_task:
            return None
        tasks = [sk for sk, trace in entries if trace.get("kind") == "Task"]
        return tasks[0] if len(tasks) == 1 else None

    def composite(self, record: LogRecord) -> str | None:
        """The entry a ``MapState…``/``ParallelState…`` record is about: the newest open Map
        (or Parallel). Step Functions chains such a record after the last event of the
        iteration or branch that ended it, not after the state's own events."""
        kind = record.type.split("State", 1)[0]
        entries = [sk for sk, trace in self.entries() if trace.get("kind") == kind]
        return entries[-1] if entries else None

    def entry_of(self, state: str) -> str | None:
        """The newest open entry of ``state``."""
        entries = [sk for sk, trace in self.entries() if trace.get("state") == state]
        return entries[-1] if entries else None


def _iso_ms(at_ms: int) -> str:
    moment = datetime.fromtimestamp(at_ms / 1000.0, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _main_step(state: str | None) -> str | None:
    return state if state and _STEP_KEY.match(state) else None


def fold(records: Sequence[LogRecord], traces: Traces) -> list[StepEvent]:
    """The step events of one execution's ``records`` (oldest first), moving ``traces`` on.
    Pure apart from ``traces``; see the module docstring for the mapping."""
    events: list[StepEvent] = []
    for record in sorted(records, key=lambda r: r.id):
        events.extend(_apply(record, traces))
    return events


def _apply(record: LogRecord, traces: Traces) -> Iterator[StepEvent]:
    kind, name = record.type, record.name
    if kind.endswith("StateEntered") and name:
        yield from _entered(record, name, traces)
    elif kind.endswith("StateExited") and name:
        yield from _exited(record, name, traces)
    elif kind in ATTEMPT_EVENTS or kind in _FAILURE:
        composite = kind.startswith(_COMPOSITE_PREFIXES)
        sk = traces.composite(record) if composite else traces.following(record)
        if sk is None or int(traces.open[sk].get("last_event_id", 0)) >= record.id:
            return  # not ours, or a redelivered record this trace reflects already
        trace = dict(traces.open[sk], last_event_id=record.id)
        if kind in _FAILURE:
            # A Map or Parallel failure names no error of its own: the error of the state
            # inside it whose failure it follows stands (an Express machine's ``_run``
            # wrapper keeps the one it already has).
            child = traces.following(record, or_the_task=False) if composite else None
            inner = traces.open[child].get("error") if child else None
            error = (
                record.details.get("error") or trace.get("error") or inner or "States.TaskFailed"
            )
            trace["error"] = str(error)
            trace["failed_attempt"] = trace.get("attempt", 0)
            # A refusal (no flow-control slot, an open breaker) made no call: the next attempt
            # is the same call again, not a retry (relayflow.control.timeline.REFUSAL_ERRORS).
            trace["refused"] = not composite and trace["error"] in REFUSAL_ERRORS
            if trace["refused"]:
                trace["refusals"] = int(trace.get("refusals", 0)) + 1
        else:
            refused = bool(trace.get("refused")) and int(trace.get("attempt", 0)) > 0
            trace["refused"] = False
            if refused:
                trace.pop("failed_attempt", None)  # the same attempt goes on
            else:
                trace["attempt"] = trace.get("attempt", 0) + 1
            step, attempt = trace["step"], trace["attempt"]
            if step and trace["state"] == step and attempt > 1 and not refused:
                yield StepEvent(
                    "retrying",
                    step,
                    attempt,
                    record.at_ms,
                    record.id,
                    None,
                    _err(trace),
                    int(trace.get("refusals", 0)),
                )
            resource = str(record.details.get("resource") or "")
            if step and trace["state"] == step and resource.endswith(".waitForTaskToken"):
                yield StepEvent("waiting", step, attempt, record.at_ms, record.id)
        traces.put(sk, trace)
    elif kind in _EXECUTION_END:
        yield from _execution_ended(record, traces)
    else:
        # Any other event of a state (TaskStarted, TaskSucceeded, MapStateStarted …) moves its
        # trace on, so that the next one still finds it by previous_event_id.
        if kind.startswith(_COMPOSITE_PREFIXES) and kind not in _COMPOSITE_OWN:
            sk = traces.composite(record)  # MapStateSucceeded …: chained after a child
        else:
            sk = traces.following(record, or_the_task=False)
        if sk is not None and int(traces.open[sk].get("last_event_id", 0)) < record.id:
            traces.put(sk, dict(traces.open[sk], last_event_id=record.id))


def _err(trace: Mapping[str, Any]) -> str | None:
    value = trace.get("error")
    return str(value) if value else None


def _entered(record: LogRecord, name: str, traces: Traces) -> Iterator[StepEvent]:
    step = _main_step(name)
    key = name.split(".", 1)[0]
    if step is None and name.endswith(_PARK_SUFFIX) and _main_step(key):
        yield StepEvent("parked", key, 1, record.at_ms, record.id)
    carry = traces.open.get(key + _CARRY)
    if step is None and name.endswith(_RETRY_WAIT_SUFFIX) and carry is not None:
        # A linear-retry loop: the step's next entry goes on counting its attempts.
        traces.put(key + _CARRY, dict(carry, armed=True, last_event_id=record.id))
    if f"{name}@{record.id}" in traces.open:
        return  # a redelivered entry that is still open: applied already
    state_kind = record.type.removesuffix("StateEntered")
    trace: dict[str, Any] = {
        "state": name,
        "step": step,
        "kind": state_kind,
        "entry": record.id,
        "entered_ms": record.at_ms,
        "attempt": 0,
        "last_event_id": record.id,
    }
    if step is not None and carry is not None and carry.get("armed"):
        trace["attempt"] = int(carry.get("attempt", 1))
        trace["error"] = carry.get("error")
        traces.close(key + _CARRY)
    traces.put(f"{name}@{record.id}", trace)
    if step is None:
        return
    if trace["attempt"] == 0:
        yield StepEvent("started", step, 1, record.at_ms, record.id)
    if state_kind != "Task":
        # Only a Task counts attempts; anything else runs once per entry.
        trace["attempt"] = max(trace["attempt"], 1)
    if state_kind == "Wait":
        yield StepEvent("waiting", step, 1, record.at_ms, record.id)


def _exited(record: LogRecord, name: str, traces: Traces) -> Iterator[StepEvent]:
    sk = traces.following(record)
    if sk is None or traces.open[sk].get("state") != name:
        sk = traces.entry_of(name)
    if sk is None or int(traces.open[sk].get("last_event_id", 0)) >= record.id:
        return
    trace = traces.open[sk]
    traces.close(sk)
    step = trace.get("step")
    if not step:
        return
    attempt = max(int(trace.get("attempt", 1)), 1)
    failed = trace.get("failed_attempt") is not None and trace.get("failed_attempt") == trace.get(
        "attempt"
    )
    duration = record.at_ms - int(trace.get("entered_ms", record.at_ms))
    if failed:
        # Kept until the step's next entry: a linear retry's wait arms it (see _entered).
        carry = {"state": step + _CARRY, "attempt": attempt, "error": trace.get("error")}
        traces.put(step + _CARRY, dict(carry, armed=False, last_event_id=record.id))
    yield StepEvent(
        "failed" if failed else "succeeded",
        step,
        attempt,
        record.at_ms,
        record.id,
        duration,
        _err(trace) if failed else None,
        int(trace.get("refusals", 0)),
    )


def _execution_ended(record: LogRecord, traces: Traces) -> Iterator[StepEvent]:
    error = str(record.details.get("error") or _END_ERRORS.get(record.type, "States.Runtime"))
    for sk, trace in traces.entries():
        traces.close(sk)
        if not trace.get("step"):
            continue
        yield StepEvent(
            "failed",
            str(trace["step"]),
            max(int(trace.get("attempt", 1)), 1),
            record.at_ms,
            record.id,
            record.at_ms - int(trace.get("entered_ms", record.at_ms)),
            _err(trace) if record.type == "ExecutionFailed" and _err(trace) else error,
            int(trace.get("refusals", 0)),
        )


# ------------------------------------------------------------------------------ the batch


def decode_subscription(event: Mapping[str, Any]) -> dict[str, Any]:
    """The CloudWatch Logs subscription payload Lambda receives (``{"awslogs": {"data": …}}``,
    base64 of gzip of JSON), decoded."""
    data = (event.get("awslogs") or {}).get("data")
    if not isinstance(data, str):
        raise ValueError("not a CloudWatch Logs subscription event: no awslogs.data")
    return dict(json.loads(gzip.decompress(base64.b64decode(data))))


def encode_subscription(
    records: Iterable[Mapping[str, Any]], *, log_group: str, log_stream: str
) -> dict[str, Any]:
    """The subscription event CloudWatch Logs would deliver for ``records`` (the inverse of
    :func:`decode_subscription`; the local runtime and the tests build events with it)."""
    log_events = [
        {"id": str(i), "timestamp": int(r["event_timestamp"]), "message": json.dumps(r)}
        for i, r in enumerate(records)
    ]
    payload = {
        "messageType": "DATA_MESSAGE",
        "owner": "123456789012",
        "logGroup": log_group,
        "logStream": log_stream,
        "subscriptionFilters": ["relayflow-step-events"],
        "logEvents": log_events,
    }
    data = base64.b64encode(gzip.compress(json.dumps(payload).encode())).decode()
    return {"awslogs": {"data": data}}


def handle_subscription(
    event: Mapping[str, Any], *, traces: Any | None = None, events: Any | None = None
) -> dict[str, Any]:
    """Turn one subscription delivery into step events on the bus (see the module
    docstring). ``traces`` is a :class:`relayflow.dal.step_trace.StepTraceDal`, ``events`` a
    boto3 EventBridge client (defaults: the table's, ``adapters.aws.client("events")``).
    Returns ``{"records", "published", "skipped"}``."""
    from relayflow.dal.step_trace import StepTraceDal
    from relayflow.settings import get_settings

    payload = decode_subscription(event)
    if payload.get("messageType") != "DATA_MESSAGE":
        return {"records": 0, "published": 0, "skipped": 0}
    settings = get_settings()
    traces = traces or StepTraceDal()
    by_execution: dict[str, list[LogRecord]] = {}
    skipped = 0
    for log_event in payload.get("logEvents") or []:
        record = LogRecord.parse(str(log_event.get("message", "")))
        if record is None:
            skipped += 1
            continue
        by_execution.setdefault(record.execution_arn, []).append(record)
    entries: list[dict[str, Any]] = []
    folded: list[tuple[Execution, Traces]] = []
    for arn, records in by_execution.items():
        execution = Execution.of(arn, settings.stage)
        if execution is None:
            skipped += len(records)
            continue
        stored = traces.states(execution.tenant, execution.name)
        open_traces = Traces({str(t["sk"]): _plain(t) for t in stored})
        for step_event in fold(records, open_traces):
            entries.append(_entry(step_event, execution, settings.event_bus_name))
        folded.append((execution, open_traces))
    put_step_events(entries, events)
    for execution, open_traces in folded:
        for sk in sorted(open_traces.changed):
            traces.save(execution.tenant, execution.name, sk, _stored(open_traces.open[sk]))
        for sk in sorted(open_traces.closed):
            traces.delete(execution.tenant, execution.name, sk)
    total = sum(len(r) for r in by_execution.values())
    return {"records": total, "published": len(entries), "skipped": skipped}


def _plain(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in ("pk", "sk", "type")}


def _stored(trace: Mapping[str, Any]) -> dict[str, Any]:
    # A trace left open (an execution whose end was never logged) expires once no Standard
    # execution can still be running: they last a year at most.
    expires = int((datetime.now(UTC) + TRACE_LIFETIME).timestamp())
    return {**{k: v for k, v in trace.items() if v is not None}, "expires_at": expires}


def _entry(step_event: StepEvent, execution: Execution, bus: str) -> dict[str, Any]:
    return {
        "Source": SOURCE,
        "DetailType": f"{DETAIL_TYPE_PREFIX}{step_event.kind}",
        "Detail": json.dumps(step_event.detail(execution), separators=(",", ":")),
        "EventBusName": bus,
        "Resources": [execution.arn],
        "Time": datetime.fromtimestamp(step_event.at_ms / 1000.0, tz=UTC),
    }


def put_step_events(entries: Sequence[dict[str, Any]], events: Any | None = None) -> None:
    """Put ``entries`` on the bus in order, at most :data:`PUT_EVENTS_BATCH` per call. Raises
    :class:`StepEventsNotPublished` when any entry was refused."""
    from botocore.exceptions import ClientError

    if not entries:
        return
    if events is None:
        from relayflow.adapters.aws import client

        events = client("events")
    for start in range(0, len(entries), PUT_EVENTS_BATCH):
        chunk = list(entries[start : start + PUT_EVENTS_BATCH])
        try:
            response = events.put_events(Entries=chunk)
        except ClientError as exc:
            raise StepEventsNotPublished(f"{len(chunk)} step events: {exc}") from exc
        if response.get("FailedEntryCount"):
            failed = [e for e in response.get("Entries", []) if e.get("ErrorCode")]
            code = failed[0].get("ErrorCode") if failed else "unknown"
            raise StepEventsNotPublished(
                f"{response['FailedEntryCount']} of {len(chunk)} step events refused: {code}"
            )
    logger.info("step events published", extra={"count": len(entries)})
