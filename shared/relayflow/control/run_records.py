"""Run items and their executions: the record of a new run, starting its execution, and the
runs admission queues (recorded ``queued``, started once they hold a slot).

These are the steps :mod:`relayflow.control.run_start`, :mod:`relayflow.control.admission`
and :mod:`relayflow.control.dlq` build on; none of them decides whether a run may start.
"""

from __future__ import annotations

from typing import Any

from relayflow.control.engines import start_execution
from relayflow.control.errors import Conflict, PayloadTooLarge
from relayflow.control.limits import MAX_INPUT_BYTES, RUN_MAX_AGE, RUN_RETENTION
from relayflow.control.lookups import find_version, find_workflow
from relayflow.control.models import StartRunResult
from relayflow.control.ports import Ports
from relayflow.control.records import RunMode, loads_optional, run_summary, to_json
from relayflow.control.times import epoch, now_iso, parse_iso
from relayflow.control.variants import step_through_target
from relayflow.dal import Dal, RunItem, WorkflowItem
from relayflow.executions import stepfunctions as sfn_api


def new_run(
    head: WorkflowItem,
    run_id: str,
    input: Any,
    version: int,
    idempotency_key: str | None,
    trigger_type: str,
    status: str,
    flow_key: str | None,
    mode: RunMode,
) -> tuple[RunItem, str]:
    """The run item of a new run and its execution input (JSON); :class:`PayloadTooLarge`
    past :data:`MAX_INPUT_BYTES`."""
    from relayflow.document import execution_input

    tenant, workflow_id = head.tenant, head.workflow_id
    document = execution_input(
        workflow_id, input, run_id=run_id, version=version, tenant=tenant, dry_run=mode.dry_run
    )
    if mode.rerun is not None:
        document["steps"] = dict(mode.rerun.steps)
        document["rerun"] = {"from_step": mode.rerun.from_step, "of": mode.rerun.of}
    document_json = to_json(document)
    if len(document_json.encode()) > MAX_INPUT_BYTES:
        raise PayloadTooLarge(f"a run's input may hold at most {MAX_INPUT_BYTES} bytes")
    started_at = document["run"]["started_at"]
    run = RunItem(
        run_id=run_id,
        tenant=tenant,
        workflow_id=workflow_id,
        version=version,
        status=status,  # type: ignore[arg-type]
        execution_arn=sfn_api.execution_arn(head.state_machine_arn, run_id),
        input=to_json(document["trigger"]),
        started_at=started_at,
        idempotency_key=idempotency_key,
        trigger_type=trigger_type,
        expires_at=epoch(parse_iso(started_at) + RUN_MAX_AGE),
        engine_version=mode.engine_version,
        dry_run=mode.dry_run,
        step_through=mode.step_through,
        flow_key=flow_key,
        engine="standard" if mode.step_through else head.engine,  # see variants.py
        rerun_of=mode.rerun.of if mode.rerun else None,
        rerun_from=mode.rerun.from_step if mode.rerun else None,
    )
    return run, document_json


def stored_document(run: RunItem, *, version: int | None = None) -> dict[str, Any]:
    """The execution input of a recorded run, rebuilt from its item: same run id, version
    (``version`` when the item names none), trigger, dry-run flag and start time."""
    from relayflow.document import execution_input

    document = execution_input(
        run.workflow_id,
        loads_optional(run.input),
        run_id=run.run_id,
        version=run.version if version is None else version,
        tenant=run.tenant,
        dry_run=run.dry_run,
    )
    document["run"]["started_at"] = run.started_at
    return document


def start_run_execution(ports: Ports, run: RunItem, target_arn: str, document_json: str) -> None:
    """Start the run's execution on ``target_arn``; a repeat of the same run id is no error,
    a version that is gone is a :class:`Conflict`."""
    try:
        arn = start_execution(ports, run, target_arn, document_json)
    except sfn_api.ExecutionExists:
        return  # started by a concurrent repeat of the same key
    except sfn_api.ResourceMissing as exc:
        raise Conflict(f"version {run.version} of workflow {run.workflow_id} is gone") from exc
    if arn != run.execution_arn:
        ports.dal.update_run(run.tenant, run.run_id, {"execution_arn": arn})
        run.execution_arn = arn


def repeat_answer(ports: Ports, run: RunItem) -> StartRunResult:
    """The answer to a repeated Idempotency-Key: the stored run. If it is still marked
    running but its execution never started (the first request failed in between),
    start it now, with the same document."""
    never_started = (
        run.status == "running"
        and run.execution_arn is not None
        and ports.machines.describe(run.execution_arn) is None
    )
    if never_started:
        head = find_workflow(ports.dal, run.tenant, run.workflow_id)
        version = run.version or head.live_version
        target = find_version(ports.dal, run.tenant, run.workflow_id, version)
        document = stored_document(run, version=version)
        start_run_execution(ports, run, target.state_machine_version_arn, to_json(document))
    return StartRunResult(**run_summary(run).model_dump(), created=False)


def create_queued_run(
    dal: Dal,
    head: WorkflowItem,
    run_id: str,
    input: Any,
    version: int,
    trigger_type: str,
    flow_key: str,
    idempotency_key: str | None = None,
    *,
    step_through: bool = False,
) -> tuple[RunItem, bool]:
    """Record a run that waits for a slot (status ``queued``): the run and ``True``; when
    a run of that id exists already (a repeated key), that run and ``False``. Its engine
    version is recorded when it starts (:func:`start_queued_run`)."""
    mode = RunMode(engine_version=None, dry_run=False, step_through=step_through)
    run, _ = new_run(
        head, run_id, input, version, idempotency_key, trigger_type, "queued", flow_key, mode
    )
    if dal.create_run(run):
        return run, True
    existing = dal.get_run(head.tenant, run_id)
    if existing is None:
        raise Conflict(f"run {run_id} is being started by another request; retry")
    return existing, False


def start_queued_run(ports: Ports, run: RunItem) -> None:
    """Start a queued run that now holds its slot, with the trigger it was queued with."""
    from relayflow.document import execution_input

    dal = ports.dal
    target = find_version(dal, run.tenant, run.workflow_id, run.version or 1)
    target_arn = target.state_machine_version_arn
    if run.step_through:
        head = find_workflow(dal, run.tenant, run.workflow_id)
        target_arn = step_through_target(ports, head, target.version)
    started_at = now_iso()
    changes: dict[str, Any] = {
        "status": "running",
        "queued_at": run.started_at,
        "started_at": started_at,
    }
    if target.engine_version:
        changes["engine_version"] = target.engine_version
    updated = dal.update_run(run.tenant, run.run_id, changes, if_status=("queued",))
    if updated is None:
        return  # started (or cancelled) by another caller
    document = execution_input(
        run.workflow_id,
        loads_optional(run.input),
        run_id=run.run_id,
        version=run.version,
        tenant=run.tenant,
    )
    document["run"]["started_at"] = started_at
    start_run_execution(ports, updated, target_arn, to_json(document))


def fail_queued_run(dal: Dal, run: RunItem, cause: str) -> None:
    """A queued run that cannot start ends as ``failed`` (its slot passes on)."""
    ended_at = now_iso()
    dal.update_run(
        run.tenant,
        run.run_id,
        {
            "status": "failed",
            "ended_at": ended_at,
            "error": "Relayflow.NotStarted",
            "cause": cause,
            "expires_at": epoch(parse_iso(ended_at) + RUN_RETENTION),
        },
        if_status=("queued", "running"),
    )
