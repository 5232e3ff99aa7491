"""The run dead-letter queue: archive failed runs, list them, retry them.

The recorder archives each failed or timed-out run (:meth:`Dlq.archive`) with what it takes to
understand it (workflow, version, trigger payload, error, failing step, the outputs of the
steps that succeeded) and to run it again. A retry — manual (``POST /dlq/{run_id}/retry``) or
automatic (the maintenance function, for transient failures, see
:mod:`relayflow.reliability.dlq`) — **restarts the run under the same run id**: a new
execution ``<run id>_r<attempt>`` of the same version with the same trigger payload. Steps
that already succeeded find their recorded results (:mod:`relayflow.steps.idempotency`) and do
not act again, so a retry resumes where the run failed. This works on AWS and on the local
runtime alike (moto has no ``RedriveExecution``).

When the retry ends the recorder settles the entry: ``retried`` on success, back to
``pending`` (with its next automatic retry) or ``exhausted`` on failure.
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from relayflow.causes import public_cause
from relayflow.control.errors import ApiError, BadRequest, BreakerOpen, Conflict, NotFound
from relayflow.control.lookups import find_run, find_version, find_workflow
from relayflow.control.models import DlqEntryInfo, DlqRetryResult, Page, shared_fields
from relayflow.control.ports import Ports
from relayflow.control.records import loads_or_none, to_json
from relayflow.control.run_records import stored_document
from relayflow.control.times import epoch, iso, parse_iso
from relayflow.control.translate import translated
from relayflow.control.workflow_breakers import admit_workflow_run
from relayflow.dal.dlq import DLQ_STATUSES, RETRYABLE_STATUSES, DlqDal, DlqEntry
from relayflow.dal.errors import DataAccessError
from relayflow.executions import stepfunctions as sfn_api
from relayflow.reliability.dlq import WAITING_STEP_TYPES, is_transient, next_auto_retry

if TYPE_CHECKING:
    from relayflow.control.timeline import StepRun
    from relayflow.dal import RunItem

#: Outputs of succeeded steps are kept on the entry up to this size (JSON bytes).
MAX_ARCHIVED_OUTPUTS_BYTES = 64 * 1024
#: A run may be retried from the DLQ once its execution ended so (``aborted``: a retry that
#: was cancelled).
RETRYABLE_RUN_STATUSES = ("failed", "timed_out", "aborted")
#: How many due retries one maintenance run starts at most.
MAINTENANCE_BATCH = 25


class DlqNotRetryable(Conflict):
    code = "dlq_entry_not_retryable"


def _now() -> datetime:
    from datetime import UTC

    return datetime.now(UTC)


class Dlq:
    """The DLQ operations, over the control plane's ``ports``."""

    def __init__(self, ports: Ports, store: DlqDal | None = None) -> None:
        self.ports = ports
        self.store = store or DlqDal(ports.given_dal)

    # -- recorder side -----------------------------------------------------------------------

    def archive(
        self, run: RunItem, steps: list[StepRun] | None = None, *, now: datetime | None = None
    ) -> DlqEntry | None:
        """Archive a run that ended ``failed`` or ``timed_out`` — or, when it was a retry,
        settle its entry (``pending`` with the next automatic retry, or ``exhausted``).
        Idempotent: a repeat for the same execution changes nothing (``None``)."""
        from relayflow.settings import get_settings

        now = now or _now()
        failed_at = parse_iso(run.ended_at) if run.ended_at else now
        failing_type = _failing_type(run, steps or [])
        # A compensated run is never retried automatically (see retry).
        transient = is_transient(run.status, run.error, failing_type) and not run.compensation
        outputs = _outputs_json(steps or [])
        if run.attempt > 1:
            entry = self.store.get(run.tenant, run.run_id)
            if entry is None or entry.status != "retrying":
                return None
            due = next_auto_retry(failed_at, entry.auto_attempts) if transient else None
            exhausted = transient and due is None
            settled = entry.model_copy(
                update={
                    "status": "exhausted" if exhausted else "pending",
                    "run_status": run.status,
                    "error": run.error,
                    "cause": run.cause,
                    "failing_step": run.failing_step,
                    "outputs": outputs,
                    "transient": transient,
                    "last_failed_at": iso(failed_at),
                    "next_retry_at": iso(due) if due else None,
                    "updated_at": iso(now),
                }
            )
            if not self.store.record_failure(settled, execution_arn=run.execution_arn or ""):
                return None
            return settled
        due = next_auto_retry(failed_at, 0) if transient else None
        entry = DlqEntry(
            tenant=run.tenant,
            run_id=run.run_id,
            workflow_id=run.workflow_id,
            version=run.version,
            trigger_type=run.trigger_type,
            input=run.input,
            status="pending",
            run_status=run.status,
            error=run.error,
            cause=run.cause,
            failing_step=run.failing_step,
            outputs=outputs,
            transient=transient,
            archived_at=iso(now),
            updated_at=iso(now),
            last_failed_at=iso(failed_at),
            last_execution_arn=run.execution_arn,
            next_retry_at=iso(due) if due else None,
            # As long as the recorded step results a retry replays (after that a retry would
            # act again on every step).
            expires_at=epoch(now + timedelta(days=get_settings().step_result_ttl_days)),
        )
        return entry if self.store.archive(entry) else None

    def settle_success(self, run: RunItem, *, now: datetime | None = None) -> bool:
        """A retried run succeeded: its entry is ``retried``."""
        if run.attempt <= 1 or not run.execution_arn:
            return False
        return self.store.resolve(
            run.tenant,
            run.run_id,
            execution_arn=run.execution_arn,
            now_iso=iso(now or _now()),
        )

    # -- API side ----------------------------------------------------------------------------

    @translated
    def list_entries(
        self,
        tenant: str,
        *,
        status: str | None = None,
        limit: int = 20,
        next_token: str | None = None,
    ) -> Page[DlqEntryInfo]:
        if status is not None and status not in DLQ_STATUSES:
            raise BadRequest(f"status must be one of {', '.join(DLQ_STATUSES)}")
        items, token = self.store.list_entries(
            tenant, status=status, limit=limit, next_token=next_token
        )
        return Page[DlqEntryInfo](items=[entry_info(i) for i in items], next_token=token)

    @translated
    def get_entry(self, tenant: str, run_id: str) -> DlqEntryInfo:
        return entry_info(self._entry(tenant, run_id))

    @translated
    def retry(
        self,
        tenant: str,
        run_id: str,
        *,
        by: Literal["auto", "manual"] = "manual",
        now: datetime | None = None,
    ) -> DlqRetryResult:
        """Restart the archived run under its run id (see the module docstring).
        :class:`DlqNotRetryable` (409) unless the entry is ``pending`` or ``exhausted`` and
        the run ended (failed, timed out, or a retry cancelled); ``BreakerOpen`` (409) while
        the workflow's circuit breaker is open."""
        now = now or _now()
        entry = self._open_entry(tenant, run_id, "retried")
        dal = self.ports.dal
        run = find_run(dal, tenant, run_id)
        if run.status not in RETRYABLE_RUN_STATUSES:
            raise DlqNotRetryable(f"run {run_id} is {run.status}", {"run_status": run.status})
        if run.version is None:
            raise DlqNotRetryable(f"run {run_id} was not started on a recorded version")
        if run.compensation:
            # A retry replays the steps that succeeded without acting: their effects, which
            # the compensations undid, would not be made again.
            raise DlqNotRetryable(
                f"run {run_id} was compensated: a retry would replay steps that were undone; "
                "start a new run with the same input instead",
                {"compensation": run.compensation.get("status")},
            )
        head = find_workflow(dal, tenant, run.workflow_id)
        if not head.enabled:
            raise DlqNotRetryable(f"workflow {run.workflow_id} is disabled")
        target = find_version(dal, tenant, run.workflow_id, run.version)
        attempt = run.attempt + 1
        name = f"{run_id}_r{attempt}"
        execution = sfn_api.execution_arn(head.state_machine_arn, name)
        admission = admit_workflow_run(self.ports, tenant, run.workflow_id, run.version, run_id)
        claimed = self.store.claim_retry(entry, execution_arn=execution, by=by, now_iso=iso(now))
        if claimed is None:
            self._abstain(admission)
            raise DlqNotRetryable(f"run {run_id} is being retried by another request")
        try:
            restarted = self._restart(run, attempt, execution, target.state_machine_version_arn)
        except Exception:
            self._abstain(admission)
            with contextlib.suppress(DataAccessError):
                self.store.release_retry(claimed, entry)
            raise
        return DlqRetryResult(
            run_id=run_id,
            attempt=restarted.attempt,
            status=restarted.status,
            entry=entry_info(claimed),
        )

    @translated
    def discard(self, tenant: str, run_id: str, *, now: datetime | None = None) -> DlqEntryInfo:
        """Give up on an entry (``pending`` or ``exhausted``): no more automatic retries."""
        entry = self._open_entry(tenant, run_id, "discarded")
        if not self.store.discard(entry, now_iso=iso(now or _now())):
            raise DlqNotRetryable(f"run {run_id}'s entry changed meanwhile; read it again")
        return entry_info(self._entry(tenant, run_id))

    # -- maintenance -------------------------------------------------------------------------

    @translated
    def retry_due(
        self, *, now: datetime | None = None, limit: int = MAINTENANCE_BATCH
    ) -> dict[str, Any]:
        """Start the automatic retries that are due (all tenants). Returns counts and emits
        ``DlqDepth``. A retry the workflow's open breaker refuses stays due."""
        from relayflow.observability import logger, record_metric

        now = now or _now()
        started, postponed, dropped = [], [], []
        for due in self.store.due(iso(now), limit):
            try:
                result = self.retry(due.tenant, due.run_id, by="auto", now=now)
            except BreakerOpen:
                postponed.append(due.run_id)
                continue
            except (NotFound, DlqNotRetryable) as exc:
                # Claimed by a concurrent pass or retried by hand (the due item is stale), or
                # it cannot be retried at all (its workflow or run is gone, its run was not
                # started on a recorded version): either way nothing is due any more; a
                # manual retry stays possible where it makes sense.
                self._drop_due(due)
                with contextlib.suppress(DataAccessError):
                    self.store.clear_due(due.tenant, due.run_id, due.due_at)
                logger.info(
                    "due retry skipped", extra={"run_id": due.run_id, "reason": exc.message}
                )
                dropped.append(due.run_id)
                continue
            except ApiError as exc:
                logger.warning(
                    "automatic retry failed to start",
                    extra={"run_id": due.run_id, "reason": exc.message},
                )
                postponed.append(due.run_id)
                continue
            started.append({"tenant": due.tenant, "run_id": due.run_id, "attempt": result.attempt})
        depth = self.store.depth()
        record_metric("DlqDepth", depth)
        if started:
            record_metric("DlqAutoRetries", len(started))
        return {"started": started, "postponed": postponed, "skipped": dropped, "depth": depth}

    # -- internals ---------------------------------------------------------------------------

    def _entry(self, tenant: str, run_id: str) -> DlqEntry:
        entry = self.store.get(tenant, run_id)
        if entry is None:
            raise NotFound(f"run {run_id} is not in the DLQ")
        return entry

    def _open_entry(self, tenant: str, run_id: str, done: str) -> DlqEntry:
        """The run's entry while it may still be acted on (``pending`` or ``exhausted``);
        :class:`DlqNotRetryable` naming what cannot be ``done`` to it otherwise."""
        entry = self._entry(tenant, run_id)
        if entry.status not in RETRYABLE_STATUSES:
            raise DlqNotRetryable(
                f"run {run_id} is {entry.status} in the DLQ; only pending or exhausted entries "
                f"can be {done}",
                {"status": entry.status},
            )
        return entry

    def _drop_due(self, due: Any) -> None:
        with contextlib.suppress(DataAccessError):
            self.store.dal.call(
                "delete_item",
                TableName=self.store.dal.table_name,
                Key=_serialize(due.key()),
            )

    def _abstain(self, admission: Any) -> None:
        if admission is not None:
            with contextlib.suppress(DataAccessError):
                self.ports.breakers.abstained(admission)

    def _restart(self, run: RunItem, attempt: int, execution: str, target_arn: str) -> RunItem:
        """The run item back to ``running`` on the new execution, then the execution
        started with the run's original document (same run id, version, trigger payload and
        start time)."""
        # Dry runs are never archived; should one be restarted, it stays dry.
        document = stored_document(run)
        updated = self.ports.dal.update_run(
            run.tenant,
            run.run_id,
            {"status": "running", "execution_arn": execution, "attempt": attempt},
            remove=(
                "ended_at",
                "duration_ms",
                "output",
                "error",
                "cause",
                "failing_step",
                "recorded_status",
                "started_event_at",
                # An Express machine records the new execution's end itself (relayflow.
                # compiler.recording); the sweep must not settle the previous one's again.
                "native_status",
            ),
            if_status=RETRYABLE_RUN_STATUSES,
        )
        if updated is None:
            raise DlqNotRetryable(f"run {run.run_id} changed meanwhile; read it again")
        if run.engine == "express":
            self._mark_express_retry(run)
        name = execution.rsplit(":", 1)[-1]
        try:
            arn = self.ports.machines.start(target_arn, name, to_json(document))
        except sfn_api.ExecutionExists as exc:
            # Started already (a concurrent retry that won a race the claim should have
            # prevented): it is running, so the run item stays as it is now.
            raise DlqNotRetryable(f"run {run.run_id} is being retried already") from exc
        except Exception:
            self.ports.dal.update_run(
                run.tenant,
                run.run_id,
                {
                    "status": run.status,
                    "execution_arn": run.execution_arn,
                    "attempt": run.attempt,
                    "ended_at": run.ended_at,
                    "duration_ms": run.duration_ms,
                    "error": run.error,
                    "cause": run.cause,
                    "failing_step": run.failing_step,
                    "recorded_status": run.recorded_status,
                    "started_event_at": run.started_event_at,
                    "native_status": run.native_status,
                },
                if_status=("running",),
            )
            raise
        if arn != execution:
            updated = (
                self.ports.dal.update_run(run.tenant, run.run_id, {"execution_arn": arn}) or updated
            )
        return updated

    def _mark_express_retry(self, run: RunItem) -> None:
        """The retry's deadline marker: no status change event tells of an Express
        execution's end, so the sweep settles the retry as it settles a first execution
        (``docs/engines.md``), by a deadline counted from now."""
        from relayflow.compiler.engine import EXPRESS_MAX_SECONDS
        from relayflow.control.engines import deadline_of
        from relayflow.dal.express import ExpressDeadlines

        deadline = deadline_of(run, EXPRESS_MAX_SECONDS, started_at=iso(_now()))
        ExpressDeadlines(self.ports.dal).add(deadline, run.tenant, run.run_id)


def entry_info(entry: DlqEntry) -> DlqEntryInfo:
    data = shared_fields(DlqEntryInfo, entry)
    data["input"] = loads_or_none(entry.input)
    data["outputs"] = loads_or_none(entry.outputs)
    if "cause" in data:  # entries archived before causes were made public on record
        data["cause"] = public_cause(data["cause"])
    return DlqEntryInfo.model_validate(data)


def _outputs_json(steps: list[StepRun]) -> str | None:
    """The outputs of the steps that succeeded, as JSON, when small enough to keep."""
    outputs = {s.key: s.output for s in steps if s.status == "succeeded"}
    if not outputs:
        return None
    text = json.dumps(outputs, separators=(",", ":"), default=str)
    return text if len(text.encode()) <= MAX_ARCHIVED_OUTPUTS_BYTES else None


def _serialize(key: dict[str, Any]) -> dict[str, Any]:
    from relayflow.dal.codec import serialize

    return serialize(key)


def _failing_type(run: RunItem, steps: list[StepRun]) -> str | None:
    """The type that decides whether the run's failure is transient: a waiting step (an
    approval or waitpoint that expired) the run ended in, even inside the ``parallel`` or
    ``for_each`` that ``failing_step`` names; else the failing step's own type."""
    from relayflow.control.timeline import ENDED_IN

    ended = [s.type for s in steps if s.status in ENDED_IN]
    waiting = next((kind for kind in ended if kind in WAITING_STEP_TYPES), None)
    return waiting or next((s.type for s in steps if s.key == run.failing_step), None)
