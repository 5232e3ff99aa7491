"""The recorder: Step Functions status changes → run items and Relayflow lifecycle events.

EventBridge delivers a "Step Functions Execution Status Change" event for each execution of
a Relayflow state machine as it starts and as it ends. For each one the recorder

1. finds the run from the execution input (``$.run``: tenant, workflow, run id, version),
   read from the event or, when the event left a large input out, from DescribeExecution;
2. records it on the run item: a start creates the item when no starter wrote one; an end
   sets status, end time, duration, output, error, cause and the failing step (from the
   execution history);
3. publishes ``relayflow.run.<started|succeeded|failed|timed_out|aborted>`` on the Relayflow
   bus and emits the ``Run*`` metrics;
4. at the end, when the run's version declares a workflow ``breaker``, records the run's
   verdict on it (:mod:`relayflow.reliability.breakers`);
5. at a failed or timed-out end, archives the run in the DLQ — or, for a run a DLQ retry
   restarted, settles its entry (:mod:`relayflow.control.dlq`) — and sends the failure
   notifications the version declares (:mod:`relayflow.notify.failure`).

A DLQ retry restarts a run under its run id as a new execution; events of the executions the
run moved on from are ignored.

It is idempotent: each lifecycle event is *claimed* on the run item with a conditional write
(``started_event_at`` / ``recorded_status``) before it is published, so a repeated or
concurrent delivery changes nothing and publishes nothing. A publish that fails releases its
claim and raises, and EventBridge's retry publishes it then. Events may arrive out of order: a
run never goes back from a terminal status to ``running``.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from relayflow.causes import public_cause, run_error_name
from relayflow.control.cancel_compensation import (
    STOPPED_STATUSES,
    compensates_on_stop,
    is_compensation_execution,
    record_compensation_end,
    start_compensation,
)
from relayflow.control.compensation import split_cause
from relayflow.control.limits import (
    MAX_STORED_OUTPUT_BYTES,
    RUN_MAX_AGE,
    RUN_RETENTION,
    RUN_STATUS,
    TENANT_PATTERN,
)
from relayflow.control.status_events import DETAIL_TYPE, SOURCE
from relayflow.control.stored_json import loads_or_none
from relayflow.control.timeline import StepRun, history_steps
from relayflow.control.timeline import failing_step as last_failing_step
from relayflow.control.times import elapsed_ms, epoch, iso_of_epoch, now_iso, parse_iso
from relayflow.cost.counts import count_history
from relayflow.dal import DataAccessError, RunItem
from relayflow.executions.stepfunctions import StepFunctionsError
from relayflow.naming import is_map_run_child
from relayflow.observability import logger, record_metric
from relayflow.settings import get_settings

if TYPE_CHECKING:
    from relayflow.control.admission import Admission
    from relayflow.control.ports import Ports

#: Source of the lifecycle events on the Relayflow bus.
LIFECYCLE_SOURCE = "relayflow"
LIFECYCLE_TYPES = {
    "RUNNING": "relayflow.run.started",
    "SUCCEEDED": "relayflow.run.succeeded",
    "FAILED": "relayflow.run.failed",
    "TIMED_OUT": "relayflow.run.timed_out",
    "ABORTED": "relayflow.run.aborted",
}
#: One Count metric per finished run (dimensions service and Stage), plus RunDuration.
RUN_METRICS = {
    "SUCCEEDED": "RunSucceeded",
    "FAILED": "RunFailed",
    "TIMED_OUT": "RunTimedOut",
    "ABORTED": "RunAborted",
}
#: Runs the recorder finds without a run item (started by something other than the control
#: plane) are recorded with this trigger type.
EXTERNAL_TRIGGER = "external"
#: ... and children a ``sub_workflow`` step started (their input names the parent run).
SUB_WORKFLOW_TRIGGER = "sub_workflow"


class RecordingPlane(Protocol):
    """What the recorder takes of a control plane: its ports, and the run admission whose
    slot a run's end frees."""

    @property
    def ports(self) -> Ports: ...

    @property
    def admission(self) -> Admission: ...


class LifecycleEventNotPublished(Exception):
    """The Relayflow bus did not take a lifecycle event (the delivery is retried)."""


class HistoryNotRead(Exception):
    """A stopped saga run's execution history could not be read (Step Functions throttled or
    failed the read): nothing is recorded and the delivery is retried, because the history is
    what its compensation starts from."""


class _Included(BaseModel):
    included: bool = True


class StatusChangeDetail(BaseModel):
    """``detail`` of a Step Functions Execution Status Change event."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    execution_arn: str = Field(alias="executionArn")
    state_machine_arn: str = Field(alias="stateMachineArn")
    #: Set when the execution was started through a version or an alias (a sub_workflow
    #: child runs its workflow's live alias): the version that ran.
    state_machine_version_arn: str | None = Field(None, alias="stateMachineVersionArn")
    name: str
    status: str
    start_date: int | None = Field(None, alias="startDate", description="Epoch milliseconds.")
    stop_date: int | None = Field(None, alias="stopDate", description="Epoch milliseconds.")
    input: str | None = None
    input_details: _Included | None = Field(None, alias="inputDetails")
    output: str | None = None
    output_details: _Included | None = Field(None, alias="outputDetails")
    error: str | None = None
    cause: str | None = None


class StatusChangeEvent(BaseModel):
    """The EventBridge envelope (``version`` 0)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    id: str | None = None
    source: str
    detail_type: str = Field(alias="detail-type")
    time: str | None = None
    detail: StatusChangeDetail


class _RunRef(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    workflow_id: str
    tenant: str
    version: int | None = None
    started_at: str | None = None


def record_status_change(
    event: dict[str, Any],
    *,
    control: RecordingPlane,
    events: Any | None = None,
) -> dict[str, Any]:
    """Record one status-change event (see the module docstring). Returns what it did:
    ``{"recorded": bool, "run_id", "status", "published": detail-type | None, "reason"}``.
    Events that are not status changes of Relayflow runs are ignored (``recorded`` false)."""
    try:
        change = StatusChangeEvent.model_validate(event)
    except ValidationError:
        return _ignored("not a Step Functions status-change event")
    if change.source != SOURCE or change.detail_type != DETAIL_TYPE:
        return _ignored("not a Step Functions status-change event")
    detail = change.detail
    if is_map_run_child(detail.state_machine_arn):
        # A Distributed Map's child (stateMachine:<machine>/<map run>): its input holds the
        # parent's $.run, but its end is an item's, not the run's.
        return _ignored("a child execution of a distributed for_each")
    if detail.status not in LIFECYCLE_TYPES:
        return _ignored(f"status {detail.status} is not recorded")
    ref = _run_ref(detail, control)
    if ref is None:
        return _ignored("not a Relayflow run")
    if not _machine_of_tenant(detail.state_machine_arn, ref.tenant):
        logger.warning(
            "status change of a state machine outside the run's tenant ignored",
            extra={"execution_arn": detail.execution_arn, "tenant": ref.tenant},
        )
        return _ignored("the state machine does not belong to the run's tenant")
    if is_compensation_execution(detail.name):
        return _record_compensation(control, ref, detail)
    logger.thread_safe_append_keys(run_id=ref.id, workflow_id=ref.workflow_id, tenant=ref.tenant)
    try:
        run = _run_item(control, ref, detail)
        if _stale(run, detail):
            return _ignored("an earlier execution of a run that was retried")
        if detail.status == "RUNNING":
            published = _record_start(control, run, change, events)
        else:
            published = _record_end(control, run, change, events)
    finally:
        logger.thread_safe_remove_keys(["run_id", "workflow_id", "tenant"])
    return {
        "recorded": published is not None,
        "run_id": ref.id,
        "status": RUN_STATUS[detail.status],
        "published": published,
        "reason": None if published else "already recorded",
    }


def status_change_event(execution: dict[str, Any], *, region: str | None = None) -> dict[str, Any]:
    """The EventBridge event AWS sends for an execution, from its DescribeExecution response
    (for the local runtime, which has no EventBridge integration for Step Functions)."""
    arn = str(execution["executionArn"])
    parts = arn.split(":")

    def millis(value: Any) -> int | None:
        if isinstance(value, datetime):
            return int(value.timestamp() * 1000)
        return None

    now = datetime.now(UTC).replace(microsecond=0)
    return {
        "version": "0",
        "id": f"local-{parts[-1]}-{execution.get('status', '').lower()}",
        "detail-type": DETAIL_TYPE,
        "source": SOURCE,
        "account": parts[4],
        "time": now.isoformat().replace("+00:00", "Z"),
        "region": region or parts[3],
        "resources": [arn],
        "detail": {
            "executionArn": arn,
            "stateMachineArn": execution.get("stateMachineArn"),
            "stateMachineVersionArn": execution.get("stateMachineVersionArn"),
            "name": execution.get("name", parts[-1]),
            "status": execution.get("status"),
            "startDate": millis(execution.get("startDate")),
            "stopDate": millis(execution.get("stopDate")),
            "input": execution.get("input"),
            "inputDetails": {"included": True},
            "output": execution.get("output"),
            "outputDetails": {"included": True},
            "error": execution.get("error"),
            "cause": execution.get("cause"),
        },
    }


# ------------------------------------------------------------------------------- internals


def _included(details: _Included | None) -> bool:
    """Whether the event carries the payload (AWS leaves out payloads over 248 KB)."""
    return details is None or details.included


def _ignored(reason: str) -> dict[str, Any]:
    return {"recorded": False, "run_id": None, "status": None, "published": None, "reason": reason}


def _run_ref(detail: StatusChangeDetail, control: RecordingPlane) -> _RunRef | None:
    """The run the execution serves, from ``$.run`` of its input."""
    document = loads_or_none(detail.input) if _included(detail.input_details) else None
    if document is None:
        described = control.ports.machines.describe(detail.execution_arn) or {}
        document = loads_or_none(described.get("input"))
    return _ref_of(document)


def _ref_of(document: Any) -> _RunRef | None:
    """``$.run`` of an execution's input document, when it names a Relayflow run."""
    run = document.get("run") if isinstance(document, dict) else None
    try:
        ref = _RunRef.model_validate(run)
    except ValidationError:
        return None
    return ref if TENANT_PATTERN.match(ref.tenant) else None


def _machine_of_tenant(state_machine_arn: str, tenant: str) -> bool:
    """Whether the state machine is one the control plane created for ``tenant``."""
    name = state_machine_arn.split(":")[6] if state_machine_arn.count(":") >= 6 else ""
    return name.startswith(f"relayflow-{get_settings().stage}-{tenant}_")


def _stale(run: RunItem, detail: StatusChangeDetail) -> bool:
    """Whether the event is of an execution the run has moved on from (a DLQ retry restarts a
    run under its run id as a new execution, ``<run id>_r<attempt>``)."""
    if not run.execution_arn:
        return False
    return run.execution_arn.rsplit(":", 1)[-1] != detail.execution_arn.rsplit(":", 1)[-1]


def _epoch_ms_iso(value: int | None) -> str | None:
    return None if value is None else iso_of_epoch(value / 1000.0)


def _run_item(control: RecordingPlane, ref: _RunRef, detail: StatusChangeDetail) -> RunItem:
    """The run item, created from the event when no starter wrote one."""
    run = control.ports.dal.get_run(ref.tenant, ref.id)
    if run is not None:
        return run
    started_at = ref.started_at or _epoch_ms_iso(detail.start_date) or now_iso()
    document = loads_or_none(detail.input) if _included(detail.input_details) else None
    trigger = document.get("trigger") if isinstance(document, dict) else None
    info = document.get("run") if isinstance(document, dict) else None
    parent = info.get("parent") if isinstance(info, dict) else None
    run = RunItem(
        run_id=ref.id,
        tenant=ref.tenant,
        workflow_id=ref.workflow_id,
        version=ref.version if ref.version is not None else _version_of(detail),
        status="running",
        execution_arn=detail.execution_arn,
        input=json.dumps(trigger, separators=(",", ":")) if trigger is not None else None,
        started_at=started_at,
        trigger_type=SUB_WORKFLOW_TRIGGER if parent else EXTERNAL_TRIGGER,
        expires_at=epoch(parse_iso(started_at) + RUN_MAX_AGE),
        # A child of a dry run is dry: its document says so (the parent's step copied it).
        dry_run=isinstance(info, dict) and info.get("dry_run") is True,
        engine=_engine_of(control, detail.execution_arn, ref),
    )
    if control.ports.dal.create_run(run):
        return run
    return control.ports.dal.get_run(ref.tenant, ref.id) or run


def _version_of(detail: StatusChangeDetail) -> int | None:
    """The version number of the execution's state machine version, when it ran one."""
    number = (detail.state_machine_version_arn or "").rsplit(":", 1)[-1]
    return int(number) if number.isdigit() else None


def _record_start(
    control: RecordingPlane, run: RunItem, change: StatusChangeEvent, events: Any | None
) -> str | None:
    claimed = control.ports.dal.update_run(
        run.tenant, run.run_id, {"started_event_at": now_iso()}, unless_set="started_event_at"
    )
    if claimed is None:
        return None
    detail_type = LIFECYCLE_TYPES["RUNNING"]
    try:
        _publish(events, detail_type, claimed, change)
    except Exception:
        control.ports.dal.update_run(run.tenant, run.run_id, {}, remove=("started_event_at",))
        raise
    return detail_type


def _record_end(
    control: RecordingPlane, run: RunItem, change: StatusChangeEvent, events: Any | None
) -> str | None:
    detail = change.detail
    status = RUN_STATUS[detail.status]
    if run.recorded_status is not None:
        return None  # this run's end was recorded (and published) already
    ended_at = _epoch_ms_iso(detail.stop_date) or now_iso()
    started_at = run.started_at
    duration_ms = None
    if detail.start_date is not None and detail.stop_date is not None:
        duration_ms = float(detail.stop_date - detail.start_date)
    output = None
    if (
        status == "succeeded"
        and detail.output is not None
        and _included(detail.output_details)
        and len(detail.output.encode()) <= MAX_STORED_OUTPUT_BYTES
    ):
        output = detail.output
    failing = None
    steps: list[StepRun] = []
    # One history read serves the run's counts (what it cost) and a failed run's failing step.
    # An Express execution has none (GetExecutionHistory refuses it): its steps come from its
    # step records and its machine's logs.
    express = run.engine == "express"
    history = None if express else _history(control, detail.execution_arn)
    if (
        history is None
        and status in STOPPED_STATUSES
        and compensates_on_stop(control.ports.dal, run)
    ):
        raise HistoryNotRead(
            f"the history of stopped run {run.run_id} was not read; its compensation needs it"
        )
    if status in ("failed", "timed_out"):
        steps = _express_steps(control, run) if express else _steps(control, run, history)
        failing = last_failing_step(steps)
        if express:
            # A native step's output is not in the logs: not a null to archive.
            steps = [s for s in steps if s.output is not None or s.status != "succeeded"]
    # A run that compensated reports it in its cause (relayflow.control.compensation).
    cause, compensation = split_cause(detail.cause or (run.cause if status == "aborted" else None))
    values: dict[str, Any] = {
        "status": status,
        "ended_at": ended_at,
        "duration_ms": duration_ms if duration_ms is not None else elapsed_ms(started_at, ended_at),
        "output": output,
        "error": run_error_name(
            status, detail.error or (run.error if status == "aborted" else None)
        ),
        # A Lambda's cause carries the engine's stack trace: only the public part is kept.
        "cause": public_cause(cause),
        "compensation": compensation,
        "failing_step": failing,
        "execution_arn": detail.execution_arn,
        "expires_at": epoch(parse_iso(ended_at) + RUN_RETENTION),
        "recorded_status": status,
        **_counts(history),
        "outcome": _outcome(
            status, detail.output, run.model_copy(update={"compensation": compensation})
        ),
        "parked": None,
    }
    updated = control.ports.dal.update_run(
        run.tenant,
        run.run_id,
        values,
        if_status=("running", "parked", status),
        unless_set="recorded_status",
    )
    if updated is None:
        current = control.ports.dal.get_run(run.tenant, run.run_id)
        if current is not None and current.recorded_status is None:
            logger.warning(
                "status change conflicts with the recorded status; left as is",
                extra={"recorded": current.status, "event": status},
            )
        return None
    detail_type = LIFECYCLE_TYPES[detail.status]
    try:
        _settle_dlq(control, updated, steps)
        # A cancelled or timed-out saga run is compensated by its version's variant (once:
        # the execution is named after the run's).
        start_compensation(control.ports, updated, detail.name, history)
        # The run's admission slot passes to its key's next queued run (once: repeats find
        # the slot freed).
        control.admission.release(updated)
        _publish(events, detail_type, updated, change)
        # Express children send no status changes of their own (express_children.py).
        _record_express_children(control, history, events)
    except Exception:
        control.ports.dal.update_run(run.tenant, run.run_id, {}, remove=("recorded_status",))
        raise
    # One line per run end: the dashboard's "latest failed runs" table and the saved
    # "failures of one tenant" query read these fields (template.yaml). The error's name only:
    # a cause may carry data.
    logger.info(
        "run ended",
        extra={
            "run_id": updated.run_id,
            "workflow_id": updated.workflow_id,
            "tenant": updated.tenant,
            "status": updated.status,
            "failing_step": updated.failing_step,
            "error": updated.error,
            "execution_arn": updated.execution_arn,
        },
    )
    record_metric(RUN_METRICS[detail.status], 1)
    if updated.duration_ms is not None:
        record_metric("RunDuration", updated.duration_ms, "Milliseconds")
    _settle_breaker(control, updated)
    _notify(control, updated)
    return detail_type


def _record_compensation(
    control: RecordingPlane, ref: _RunRef, detail: StatusChangeDetail
) -> dict[str, Any]:
    """The end of a cancelled or timed-out run's compensation execution
    (:mod:`relayflow.control.cancel_compensation`): the run's ``compensation`` and outcome."""
    if detail.status == "RUNNING":
        return _ignored("a compensation execution started")
    output = detail.output
    if detail.status == "SUCCEEDED" and (output is None or not _included(detail.output_details)):
        output = (control.ports.machines.describe(detail.execution_arn) or {}).get("output")
    written = record_compensation_end(
        control.ports.dal,
        ref.tenant,
        ref.id,
        execution_name=detail.name,
        status=detail.status,
        output=output,
        error=detail.error,
        cause=detail.cause,
    )
    return {
        "recorded": written,
        "run_id": ref.id,
        "status": "compensation",
        "published": None,
        "reason": None if written else "compensation already recorded, or nothing to record",
    }


def _record_express_children(
    control: RecordingPlane, history: list[dict[str, Any]] | None, events: Any | None
) -> None:
    """Record the end of each Express child the run's ``sub_workflow`` steps ran, from the
    run's history (:mod:`relayflow.control.express_children`)."""
    from relayflow.control.express_children import child_executions, child_status_changes

    for child in child_executions(history or []):
        ref = _ref_of(child.get("Input"))  # a sync:2 Input is the parsed document
        if _engine_of(control, str(child["ExecutionArn"]), ref) != "express":
            continue  # a Standard child sends its own status changes
        for event in child_status_changes(child):
            record_status_change(event, control=control, events=events)


def _engine_of(control: RecordingPlane, execution_arn: str, ref: _RunRef | None) -> str:
    """The engine of an execution the control plane did not start: an Express execution's
    ARN says so on AWS (``…:express:<machine>:…``); otherwise its workflow's machine type."""
    if execution_arn.split(":")[5:6] == ["express"]:
        return "express"
    if ref is None:
        return "standard"
    head = control.ports.dal.get_workflow(ref.tenant, ref.workflow_id)
    return head.engine if head is not None else "standard"


def _history(control: RecordingPlane, execution_arn: str) -> list[dict[str, Any]] | None:
    """The execution's history events; ``None`` when Step Functions did not answer (the run is
    still recorded, without its counts or failing step)."""
    try:
        return control.ports.machines.history(execution_arn)
    except StepFunctionsError as exc:
        logger.warning("execution history not read", extra={"reason": str(exc)})
        return None


def _steps(
    control: RecordingPlane, run: RunItem, events: list[dict[str, Any]] | None
) -> list[StepRun]:
    """The run's step timeline from its history, with the step types of its version."""
    if not events or run.version is None:
        return []
    version = control.ports.dal.get_version(run.tenant, run.workflow_id, run.version)
    if version is None:
        return []
    return history_steps(version.step_types, version.step_runners, events)


def _express_steps(control: RecordingPlane, run: RunItem) -> list[StepRun]:
    """An Express run's step timeline from its records and logs (the sweep settling its end);
    without the logs no step is known to have failed, so no failing step is found."""
    from relayflow.control.express_timeline import express_timeline

    if run.version is None or not run.execution_arn:
        return []
    version = control.ports.dal.get_version(run.tenant, run.workflow_id, run.version)
    if version is None:
        return []
    return express_timeline(control.ports.dal, run, version).steps


def _counts(events: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The run item's usage counts (``docs/cost.md``), from a Standard execution's history;
    none when there is no history to count."""
    if not events:
        return {}
    counts = count_history(events)
    return {
        "transitions": counts.transitions,
        "lambda_invocations": counts.lambda_invocations,
        "lambda_ms": counts.lambda_ms,
    }


def _outcome(status: str, output: str | None, run: RunItem) -> str:
    """The run's verdict (:func:`relayflow.control.outcome.outcome_of`). The fallback marker
    travels in the final state document; the compensation status in it too, or (a failed
    execution has no output) on the run item as ``compensation.status``."""
    from relayflow.control.outcome import compensation_status, fallbacks_used, outcome_of

    document = None
    if output is not None:
        with contextlib.suppress(ValueError):
            document = json.loads(output)
    compensation = compensation_status(document) or compensation_status(run.model_dump())
    return outcome_of(status, fallbacks_used=fallbacks_used(document), compensation=compensation)


def _settle_dlq(control: RecordingPlane, run: RunItem, steps: list[StepRun]) -> None:
    """Archive a failed or timed-out run in the DLQ, or settle the entry of a retried run.
    Raises when the table cannot be reached (the end's claim is released and the delivery
    retried, so no failed run goes unarchived)."""
    if run.trigger_type == SUB_WORKFLOW_TRIGGER:
        return  # its parent fails with it and is archived; a retry of the parent starts anew
    if run.dry_run:
        return  # a dry run is a rehearsal: there is nothing to retry or to keep
    from relayflow.control.dlq import Dlq

    if run.status in ("failed", "timed_out") or (run.status == "aborted" and run.attempt > 1):
        entry = Dlq(control.ports).archive(run, steps)
        if entry is not None and run.attempt == 1:
            logger.info(
                "run archived in the DLQ",
                extra={"transient": entry.transient, "next_retry_at": entry.next_retry_at},
            )
    elif run.status == "succeeded" and run.attempt > 1:
        Dlq(control.ports).settle_success(run)


def _notify(control: RecordingPlane, run: RunItem) -> None:
    """Send the failure notifications the run's version declares. Never raises: the end is
    recorded and published by now. A dry run notifies no one."""
    if run.status == "succeeded" or run.version is None or run.dry_run:
        return
    try:
        version = control.ports.dal.get_version(run.tenant, run.workflow_id, run.version)
        config = json.loads(version.definition).get("notifications") if version else None
        if not config:
            return
        from relayflow.notify.failure import notify_run_end

        notify_run_end(run, config)
    except Exception as exc:  # a notification is best effort, and its failure is logged
        logger.warning(
            "failure notification not sent", extra={"reason": f"{type(exc).__name__}: {exc}"}
        )


def _settle_breaker(control: RecordingPlane, run: RunItem) -> None:
    """Record the run's end on its workflow's circuit breaker, when the version it ran
    declares one. The end is recorded and published by now, and a redelivery would find it
    claimed: a breaker that cannot be reached is logged, never raised. A dry run never
    counts (it was never admitted either)."""
    if run.version is None or run.dry_run:
        return
    from relayflow.control.workflow_breakers import workflow_breaker_policy

    version = run.version
    try:
        control.ports.breakers.settle_run(
            run.tenant,
            run.workflow_id,
            run_id=run.run_id,
            status=run.status,
            error=run.error,
            cause=run.cause,
            policy=lambda: workflow_breaker_policy(
                control.ports, run.tenant, run.workflow_id, version
            ),
        )
    except DataAccessError as exc:
        logger.warning("workflow circuit breaker not updated", extra={"reason": str(exc)})


def _publish(events: Any | None, detail_type: str, run: RunItem, change: StatusChangeEvent) -> None:
    """Put one lifecycle event on the Relayflow bus."""
    from botocore.exceptions import ClientError

    from relayflow.triggers.sync import TENANT_FIELD

    if events is None:
        from relayflow.adapters.aws import client

        events = client("events")
    detail = {
        "tenant": run.tenant,
        # What every subscription rule matches: a workflow triggered by this tenant's
        # lifecycle events fires (and no other tenant's does).
        TENANT_FIELD: run.tenant,
        "workflow_id": run.workflow_id,
        "run_id": run.run_id,
        "version": run.version,
        "status": run.status if detail_type != LIFECYCLE_TYPES["RUNNING"] else "running",
        "error": run.error,
        "failing_step": run.failing_step,
    }
    if detail_type != LIFECYCLE_TYPES["RUNNING"]:
        detail["outcome"] = run.outcome  # the verdict (relayflow.control.outcome)
    entry: dict[str, Any] = {
        "Source": LIFECYCLE_SOURCE,
        "DetailType": detail_type,
        "Detail": json.dumps(detail, separators=(",", ":")),
        "EventBusName": get_settings().event_bus_name,
        "Resources": [change.detail.execution_arn],
    }
    try:
        response = events.put_events(Entries=[entry])
    except ClientError as exc:
        raise LifecycleEventNotPublished(f"{detail_type} for run {run.run_id}: {exc}") from exc
    if response.get("FailedEntryCount"):
        failed = response.get("Entries", [{}])[0]
        raise LifecycleEventNotPublished(
            f"{detail_type} for run {run.run_id}: {failed.get('ErrorCode')} "
            f"{failed.get('ErrorMessage')}"
        )
    logger.info("lifecycle event published", extra={"detail_type": detail_type})
