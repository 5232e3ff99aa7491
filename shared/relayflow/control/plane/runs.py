"""Runs: starting (with admission and the circuit breaker), queued runs, reading, cancelling."""

from __future__ import annotations

import contextlib
import json
import math
from datetime import datetime
from typing import Any

from relayflow.causes import public_cause, public_document
from relayflow.control.engines import start_execution
from relayflow.control.errors import BadRequest, Conflict, PayloadTooLarge
from relayflow.control.express_timeline import (
    SOURCE_RECORDS_AND_LOGS,
    express_timeline,
    with_native_verdict,
)
from relayflow.control.models import ContinueResult, Page, RunDetail, RunSummary, StartRunResult
from relayflow.control.plane.base import PlaneBase
from relayflow.control.plane.common import (
    CANCEL_ERROR,
    MAX_IDEMPOTENCY_KEY,
    MAX_INPUT_BYTES,
    RUN_MAX_AGE,
    RUN_RETENTION,
    RUN_STATUS,
    BreakerOpen,
    RerunSeed,
    RunMode,
    _run_summary,
    _step_entry,
    check_limit,
    elapsed_ms,
    epoch,
    idempotent_run_id,
    iso,
    loads_optional,
    now_iso,
    parse_iso,
    to_json,
    translated,
)
from relayflow.control.timeline import StepRun, history_steps
from relayflow.control.timeline import failing_step as last_failing_step
from relayflow.dal import RUN_STATUSES, DataAccessError, RunItem, WorkflowItem
from relayflow.errors import CircuitOpen
from relayflow.executions import stepfunctions as sfn_api
from relayflow.reliability.breakers import (
    WORKFLOW_TRIAL_LEASE_SECONDS,
    Admission,
    BreakerPolicy,
    workflow_breaker_id,
)

#: Statuses of a run that ended in a step.
FAILED = ("failed", "timed_out")


class Runs(PlaneBase):
    """The run methods of the control plane."""

    @translated
    def start_run(
        self,
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
        first use) and pauses before each step until :meth:`continue_run`. The run item
        records the engine version that compiled the state machine it starts on.

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
        from relayflow.control.admission import Decision
        from relayflow.control.run_input import check_run_input
        from relayflow.document import new_run_id

        head = self._workflow(tenant, workflow_id)
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
            pinned = self._version(tenant, workflow_id, version)
            target_arn, engine_version = pinned.state_machine_version_arn, pinned.engine_version
        if collapse:  # a debounce's or batch's own start: each trigger was checked on arrival
            check_run_input(self.dal, head, version, input)  # 422 invalid_input
        if step_through:
            from relayflow.control.step_through import StepThrough

            target_arn = StepThrough(self).target(head, version)
        elif rerun is not None:
            from relayflow.control.rerun import Reruns

            target_arn = Reruns(self).target(head, version)

        run_id = (
            idempotent_run_id(tenant, workflow_id, idempotency_key)
            if idempotency_key is not None
            else new_run_id()
        )
        if idempotency_key is not None:
            existing = self.dal.get_run(tenant, run_id)
            if existing is not None:
                return self._repeat(existing)
        if dry_run or rerun is not None:
            decision = Decision()
        else:
            decision = self.admission.admit(
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
            admission = None if dry_run else self._admit_run(tenant, workflow_id, version, run_id)
        except Exception:
            self.admission.abandon(tenant, workflow_id, run_id, decision.flow_key)
            raise
        try:
            started = self._create_and_start(
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
            if admission is not None:
                # The trial run never started: the next start may take the trial at once.
                with contextlib.suppress(DataAccessError):
                    self.breakers.abstained(admission)
            raise
        if not started.created and admission is not None:
            # A concurrent repeat's run is the one that runs: this start was no trial.
            with contextlib.suppress(DataAccessError):
                self.breakers.abstained(admission)
        return started

    def _create_and_start(
        self,
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
        tenant = head.tenant
        try:
            run, document_json = self._new_run(
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
            created = self.dal.create_run(run)
        except Exception:
            self.admission.abandon(tenant, head.workflow_id, run_id, flow_key)
            raise
        if not created:
            # A concurrent request with the same key wrote it first: that request's run is
            # the one. It may have queued it (it found the slot this request holds taken):
            # the slot is handed on, to that very run when it heads the queue, which starts.
            self.admission.abandon(tenant, head.workflow_id, run_id, flow_key)
            existing = self.dal.get_run(tenant, run_id)
            if existing is None:
                raise Conflict(f"run {run_id} is being started by another request; retry")
            return self._repeat(existing)
        try:
            self._start_execution(run, target_arn, document_json)
        except Exception:
            # Nothing runs: forget the run so that a retry (same key) starts it afresh.
            self.dal.delete_run(tenant, run_id)
            self.admission.abandon(tenant, head.workflow_id, run_id, flow_key)
            raise
        return StartRunResult(**_run_summary(run).model_dump(), created=True)

    def _new_run(
        self,
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
        """The run item of a new run and its execution input (JSON)."""
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
            engine="standard" if mode.step_through else head.engine,  # see step_through.py
            rerun_of=mode.rerun.of if mode.rerun else None,
            rerun_from=mode.rerun.from_step if mode.rerun else None,
        )
        return run, document_json

    def create_queued_run(
        self,
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
        version is recorded when it starts (:meth:`start_queued_run`)."""
        mode = RunMode(engine_version=None, dry_run=False, step_through=step_through)
        run, _ = self._new_run(
            head, run_id, input, version, idempotency_key, trigger_type, "queued", flow_key, mode
        )
        if self.dal.create_run(run):
            return run, True
        existing = self.dal.get_run(head.tenant, run_id)
        if existing is None:
            raise Conflict(f"run {run_id} is being started by another request; retry")
        return existing, False

    def start_queued_run(self, run: RunItem) -> None:
        """Start a queued run that now holds its slot, with the trigger it was queued with."""
        from relayflow.document import execution_input

        target = self._version(run.tenant, run.workflow_id, run.version or 1)
        target_arn = target.state_machine_version_arn
        if run.step_through:
            from relayflow.control.step_through import StepThrough

            head = self._workflow(run.tenant, run.workflow_id)
            target_arn = StepThrough(self).target(head, target.version)
        started_at = now_iso()
        changes: dict[str, Any] = {
            "status": "running",
            "queued_at": run.started_at,
            "started_at": started_at,
        }
        if target.engine_version:
            changes["engine_version"] = target.engine_version
        updated = self.dal.update_run(run.tenant, run.run_id, changes, if_status=("queued",))
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
        self._start_execution(updated, target_arn, to_json(document))

    def fail_queued_run(self, run: RunItem, cause: str) -> None:
        """A queued run that cannot start ends as ``failed`` (its slot passes on)."""
        ended_at = now_iso()
        self.dal.update_run(
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

    def _admit_run(
        self, tenant: str, workflow_id: str, version: int, run_id: str
    ) -> Admission | None:
        """Pass the workflow's circuit breaker, or raise :class:`BreakerOpen`. A half-open
        breaker lets this run through as its trial (the admission returned). Only an open
        breaker costs a read of the version, to confirm that it still declares a breaker."""
        breaker_id = workflow_breaker_id(workflow_id)
        item = self.breakers.get(tenant, breaker_id)
        if item is None or item.state == "closed":
            return None
        if self.workflow_breaker_policy(tenant, workflow_id, version) is None:
            return None
        try:
            admission = self.breakers.admit(
                tenant,
                breaker_id,
                lease_seconds=WORKFLOW_TRIAL_LEASE_SECONDS,
                token=run_id,
                current=item,
            )
        except CircuitOpen as exc:
            chance = exc.details.get("reopens_at_epoch")
            retry_after = max(1, math.ceil(chance - self.breakers.clock())) if chance else None
            raise BreakerOpen(
                f"workflow {workflow_id}'s circuit breaker is open: no run starts until "
                f"{exc.details.get('reopens_at')}",
                {"breaker_id": breaker_id, "reopens_at": exc.details.get("reopens_at")},
                retry_after,
            ) from exc
        return admission if admission.trial_token is not None else None

    def workflow_breaker_policy(
        self, tenant: str, workflow_id: str, version: int
    ) -> BreakerPolicy | None:
        """The circuit breaker ``version`` of the workflow declares (``None``: none, or no
        such version)."""
        item = self.dal.get_version(tenant, workflow_id, version)
        if item is None:
            return None
        return BreakerPolicy.from_config(json.loads(item.definition).get("breaker"))

    def _start_execution(self, run: RunItem, target_arn: str, document_json: str) -> None:
        try:
            arn = start_execution(self, run, target_arn, document_json)
        except sfn_api.ExecutionExists:
            return  # started by a concurrent repeat of the same key
        except sfn_api.ResourceMissing as exc:
            raise Conflict(f"version {run.version} of workflow {run.workflow_id} is gone") from exc
        if arn != run.execution_arn:
            self.dal.update_run(run.tenant, run.run_id, {"execution_arn": arn})
            run.execution_arn = arn

    def _repeat(self, run: RunItem) -> StartRunResult:
        """The answer to a repeated Idempotency-Key: the stored run. If it is still marked
        running but its execution never started (the first request failed in between),
        start it now, with the same document."""
        from relayflow.document import execution_input

        never_started = (
            run.status == "running"
            and run.execution_arn is not None
            and self.machines.describe(run.execution_arn) is None
        )
        if never_started:
            head = self._workflow(run.tenant, run.workflow_id)
            version = run.version or head.live_version
            target = self._version(run.tenant, run.workflow_id, version)
            document = execution_input(
                run.workflow_id,
                loads_optional(run.input),
                run_id=run.run_id,
                version=version,
                tenant=run.tenant,
                dry_run=run.dry_run,
            )
            document["run"]["started_at"] = run.started_at
            self._start_execution(run, target.state_machine_version_arn, to_json(document))
        return StartRunResult(**_run_summary(run).model_dump(), created=False)

    @translated
    def continue_run(self, tenant: str, run_id: str, *, to_end: bool = False) -> ContinueResult:
        """Release the step a step-through run waits before (:class:`Conflict` while a step
        runs, so a second call releases nothing), or with ``to_end`` let it finish."""
        from relayflow.control.step_through import StepThrough

        return StepThrough(self).continue_run(self._run(tenant, run_id), to_end=to_end)

    @translated
    def rerun(self, tenant: str, run_id: str, from_step: str, *, version: str) -> StartRunResult:
        """A new run of ``run_id``'s trigger that starts at ``from_step`` on the run's own
        version (``pinned``) or the live one (``current``): :mod:`relayflow.control.rerun`."""
        from relayflow.control.rerun import Reruns

        return Reruns(self).rerun(tenant, run_id, from_step, version=version)

    @translated
    def resume_run(self, tenant: str, run_id: str, request: Any) -> Any:
        """Answer a parked run's park (:meth:`relayflow.control.resume.Parks.resume`)."""
        from relayflow.control.resume import Parks

        return Parks(self).resume(tenant, run_id, request)

    @translated
    def list_parked_runs(
        self, tenant: str, *, limit: int = 20, next_token: str | None = None
    ) -> Page[RunSummary]:
        """The tenant's parked runs (:mod:`relayflow.control.resume`)."""
        from relayflow.control.resume import Parks

        return Parks(self).list_parked(tenant, limit=limit, next_token=next_token)

    @translated
    def get_run(self, tenant: str, run_id: str) -> RunDetail:
        """The run with its step timeline (:meth:`run_timeline`) and, for a failed Express run
        the sweep has not settled yet, its failing step from that timeline."""
        run = with_native_verdict(self._run(tenant, run_id))
        steps, source, note = self.run_timeline(run)
        failing = run.failing_step
        if failing is None and source == SOURCE_RECORDS_AND_LOGS and run.status in FAILED:
            failing = last_failing_step(steps)  # an Express run not settled by the sweep yet
        output = loads_optional(run.output)
        if output is None and run.status == "succeeded" and run.execution_arn:
            # Too large for the run item: Step Functions still has it.
            described = self.machines.describe(run.execution_arn) or {}
            output = loads_optional(described.get("output"))
        return RunDetail(
            **_run_summary(run).model_dump(),
            input=loads_optional(run.input),
            output=public_document(output),
            cause=public_cause(run.cause),
            failing_step=failing,
            steps=[_step_entry(step) for step in steps],
            timeline_source=source,
            timeline_note=note,
        )

    def run_steps(self, run: RunItem) -> list[StepRun]:
        """The run's step timeline (:meth:`run_timeline`)."""
        return self.run_timeline(run)[0]

    def run_timeline(self, run: RunItem) -> tuple[list[StepRun], str | None, str | None]:
        """The run's step timeline with the version's step types, where it came from and what
        it lacks: ``history`` (a Standard run's execution history, all pages), or for an
        Express run ``records`` or ``records+logs``
        (:func:`relayflow.control.express_timeline.express_timeline`). Empty (source
        ``None``) for runs of no recorded version; empty once a history expired."""
        if not run.execution_arn or run.version is None:
            return [], None, None
        version = self.dal.get_version(run.tenant, run.workflow_id, run.version)
        if version is None:
            return [], None, None
        if run.engine == "express":  # no execution history: records and logs
            # The run item was read for the caller's tenant: only its execution is read.
            timeline = express_timeline(self.dal, run, version)
            return timeline.steps, timeline.source, timeline.note
        events = self.machines.history(run.execution_arn)
        return history_steps(version.step_types, version.step_runners, events), "history", None

    def failing_step(self, run: RunItem) -> str | None:
        """The step a failed or timed-out run ended in."""
        return last_failing_step(self.run_steps(run))

    @translated
    def list_runs(
        self,
        tenant: str,
        workflow_id: str,
        *,
        status: str | None = None,
        limit: int = 20,
        next_token: str | None = None,
    ) -> Page[RunSummary]:
        """The workflow's runs, newest first, optionally of one status."""
        check_limit(limit)
        if status is not None and status not in RUN_STATUSES:
            raise BadRequest(f"status must be one of {', '.join(RUN_STATUSES)}")
        self._workflow(tenant, workflow_id)
        items, token = self.dal.list_runs(
            tenant, workflow_id, status=status, limit=limit, next_token=next_token
        )
        return Page[RunSummary](items=[_run_summary(i) for i in items], next_token=token)

    @translated
    def cancel_run(self, tenant: str, run_id: str) -> RunSummary:
        """Stop a running run; it is ``aborted`` at once (the recorder confirms it later).
        :class:`Conflict` when the run has already finished."""
        run = self._run(tenant, run_id)
        if run.status == "queued" and self.admission.cancel_queued(run):
            ended_at = now_iso()
            values = {
                "status": "aborted",
                "ended_at": ended_at,
                "error": CANCEL_ERROR,
                "cause": "cancelled while queued",
                "expires_at": epoch(parse_iso(ended_at) + RUN_RETENTION),
            }
            cancelled = self.dal.update_run(tenant, run_id, values, if_status=("queued",))
            if cancelled is not None:
                return _run_summary(cancelled)
            run = self._run(tenant, run_id)
        if run.status not in ("running", "parked"):
            raise Conflict(f"run {run_id} has already finished ({run.status})")
        described: dict[str, Any] | None = None
        cause = "cancelled through the Relayflow control API"
        if run.execution_arn and run.engine != "express":  # Express cannot stop (engines.md)
            with contextlib.suppress(sfn_api.ExecutionMissing):
                self.machines.stop(run.execution_arn, error=CANCEL_ERROR, cause=cause)
            described = self.machines.describe(run.execution_arn)
        status = str((described or {}).get("status", "ABORTED"))
        if status in ("SUCCEEDED", "FAILED", "TIMED_OUT"):
            raise Conflict(f"run {run_id} has already finished ({RUN_STATUS[status]})")
        stop = (described or {}).get("stopDate")
        ended_at = iso(stop) if isinstance(stop, datetime) else now_iso()
        updated = self.dal.update_run(
            tenant,
            run_id,
            {
                "status": "aborted",
                "ended_at": ended_at,
                "duration_ms": elapsed_ms(run.started_at, ended_at),
                "error": CANCEL_ERROR,
                "cause": cause,
                "expires_at": epoch(parse_iso(ended_at) + RUN_RETENTION),
                "parked": None,
            },
            if_status=("running", "parked"),
        )
        if updated is None:
            current = self._run(tenant, run_id)
            if current.status != "aborted":
                raise Conflict(f"run {run_id} has already finished ({current.status})")
            updated = current
        return _run_summary(updated)

    # -- circuit breakers --------------------------------------------------------------------
