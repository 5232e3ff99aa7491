"""Starting a run: the one door every run comes through (API, events, webhooks, schedules,
reruns, admission's deferred starts)."""

from __future__ import annotations

import contextlib
from typing import Any

from relayflow.control.admission import Admission, Decision
from relayflow.control.errors import BadRequest, Conflict
from relayflow.control.limits import MAX_IDEMPOTENCY_KEY, idempotent_run_id
from relayflow.control.lookups import find_version, find_workflow
from relayflow.control.models import StartRunResult
from relayflow.control.ports import Ports
from relayflow.control.records import RerunSeed, RunMode, run_summary
from relayflow.control.run_input import check_run_input
from relayflow.control.run_records import new_run, repeat_answer, start_run_execution
from relayflow.control.variants import rerun_target, step_through_target
from relayflow.control.workflow_breakers import admit_workflow_run
from relayflow.dal import DataAccessError, WorkflowItem


def start_run(
    ports: Ports,
    admission: Admission,
    tenant: str,
    workflow_id: str,
    input: Any,
    *,
    version: int | None = None,
    idempotency_key: str | None = None,
    trigger_type: str = "api",
    dry_run: bool = False,
    step_through: bool = False,
    collapse: bool = True,
    overlap: tuple[str, str] | None = None,
    rerun: RerunSeed | None = None,
) -> StartRunResult:
    """Start a run of the live version, or of ``version``.

    A ``dry_run`` carries ``run.dry_run`` in its state document: steps that act on the
    world record the call they would make instead (``docs/run-modes.md``). A
    ``step_through`` run starts on the version's step-through variant (published on
    first use) and pauses before each step until ``continue``. The run item records the
    engine version that compiled the state machine it starts on.

    The workflow's admission rules decide first (:mod:`relayflow.control.admission`):
    the answer may be a queued, skipped, debounced or batched run instead (its
    ``admission`` says which). ``collapse`` false skips debounce and batch (their own
    deferred starts); ``overlap`` is a schedule's ``(mode, key)``. A dry run passes no
    admission rule (it acts on nothing, so it holds no slot); a step-through run is
    never folded into a debounced or batched run (those start later without its mode),
    but takes a singleton or concurrency slot, and queues with its mode kept.

    With an ``idempotency_key`` the run id is derived from it, so a repeat returns the
    run the first request started (``created`` false) and never starts a second
    execution. The run item is written (conditionally) before the execution starts.
    While the workflow's circuit breaker is open it raises :class:`BreakerOpen` (409); a
    half-open one lets this run through as its trial.

    A ``rerun`` starts on the version's rerun variant at ``rerun.from_step`` with the
    earlier run's outputs (:mod:`relayflow.control.rerun`); like a dry run it passes no
    admission rule (an operator's repair, not new traffic), but an open breaker refuses it.
    """
    from relayflow.document import new_run_id

    dal = ports.dal
    head = find_workflow(dal, tenant, workflow_id)
    if not head.enabled:
        raise Conflict(f"workflow {workflow_id} is disabled")
    if idempotency_key is not None and not (
        isinstance(idempotency_key, str) and 0 < len(idempotency_key) <= MAX_IDEMPOTENCY_KEY
    ):
        raise BadRequest(f"an Idempotency-Key has 1 to {MAX_IDEMPOTENCY_KEY} characters")
    if version is None:
        version, target_arn = head.live_version, head.live_version_arn
        engine_version = head.live_engine_version
    else:
        pinned = find_version(dal, tenant, workflow_id, version)
        target_arn, engine_version = pinned.state_machine_version_arn, pinned.engine_version
    if collapse:  # a debounce's or batch's own start: each trigger was checked on arrival
        check_run_input(dal, head, version, input)  # 422 invalid_input
    if step_through:
        target_arn = step_through_target(ports, head, version)
    elif rerun is not None:
        target_arn = rerun_target(ports, head, version)

    run_id = (
        idempotent_run_id(tenant, workflow_id, idempotency_key)
        if idempotency_key is not None
        else new_run_id()
    )
    if idempotency_key is not None:
        existing = dal.get_run(tenant, run_id)
        if existing is not None:
            return repeat_answer(ports, existing)
    if dry_run or rerun is not None:
        decision = Decision()
    else:
        decision = admission.admit(
            head,
            version,
            run_id,
            input,
            trigger_type=trigger_type,
            collapse=collapse and not step_through,
            overlap=overlap,
            idempotency_key=idempotency_key,
            step_through=step_through,
        )
    if decision.answer is not None:
        return decision.answer
    # A dry run acts on nothing: an open breaker does not refuse it, and it is never
    # the half-open trial (the recorder does not settle dry runs on the breaker).
    try:
        trial = None if dry_run else admit_workflow_run(ports, tenant, workflow_id, version, run_id)
    except Exception:
        admission.abandon(tenant, workflow_id, run_id, decision.flow_key)
        raise
    try:
        started = _create_and_start(
            ports,
            admission,
            head,
            run_id,
            input,
            version,
            target_arn,
            idempotency_key,
            trigger_type,
            RunMode(
                engine_version=engine_version,
                dry_run=dry_run,
                step_through=step_through,
                rerun=rerun,
            ),
            flow_key=decision.flow_key,
        )
    except Exception:
        if trial is not None:
            # The trial run never started: the next start may take the trial at once.
            with contextlib.suppress(DataAccessError):
                ports.breakers.abstained(trial)
        raise
    if not started.created and trial is not None:
        # A concurrent repeat's run is the one that runs: this start was no trial.
        with contextlib.suppress(DataAccessError):
            ports.breakers.abstained(trial)
    return started


def _create_and_start(
    ports: Ports,
    admission: Admission,
    head: WorkflowItem,
    run_id: str,
    input: Any,
    version: int,
    target_arn: str,
    idempotency_key: str | None,
    trigger_type: str,
    mode: RunMode,
    *,
    flow_key: str | None = None,
) -> StartRunResult:
    """Record the run and start its execution. ``flow_key`` names the gate slot this
    request holds for it: on every path that does not start the run, the slot is freed
    here, once (a slot left held by a run that never runs jams its key)."""
    dal = ports.dal
    tenant = head.tenant
    try:
        run, document_json = new_run(
            head,
            run_id,
            input,
            version,
            idempotency_key,
            trigger_type,
            "running",
            flow_key,
            mode,
        )
        created = dal.create_run(run)
    except Exception:
        admission.abandon(tenant, head.workflow_id, run_id, flow_key)
        raise
    if not created:
        # A concurrent request with the same key wrote it first: that request's run is
        # the one. It may have queued it (it found the slot this request holds taken):
        # the slot is handed on, to that very run when it heads the queue, which starts.
        admission.abandon(tenant, head.workflow_id, run_id, flow_key)
        existing = dal.get_run(tenant, run_id)
        if existing is None:
            raise Conflict(f"run {run_id} is being started by another request; retry")
        return repeat_answer(ports, existing)
    try:
        start_run_execution(ports, run, target_arn, document_json)
    except Exception:
        # Nothing runs: forget the run so that a retry (same key) starts it afresh.
        dal.delete_run(tenant, run_id)
        admission.abandon(tenant, head.workflow_id, run_id, flow_key)
        raise
    return StartRunResult(**run_summary(run).model_dump(), created=True)
