"""Reading runs: one run with its step timeline, and a workflow's runs."""

from __future__ import annotations

from relayflow.causes import public_cause, public_document
from relayflow.control.errors import BadRequest
from relayflow.control.express_timeline import (
    SOURCE_RECORDS_AND_LOGS,
    express_timeline,
    with_native_verdict,
)
from relayflow.control.limits import check_limit
from relayflow.control.lookups import find_run, find_workflow
from relayflow.control.models import Page, RunDetail, RunSummary
from relayflow.control.ports import Ports
from relayflow.control.records import loads_optional, run_summary, step_entry
from relayflow.control.timeline import StepRun, history_steps
from relayflow.control.timeline import failing_step as last_failing_step
from relayflow.dal import RUN_STATUSES, RunItem

#: Statuses of a run that ended in a step.
FAILED = ("failed", "timed_out")


def get_run(ports: Ports, tenant: str, run_id: str) -> RunDetail:
    """The run with its step timeline (:func:`run_timeline`) and, for a failed Express run
    the sweep has not settled yet, its failing step from that timeline."""
    run = with_native_verdict(find_run(ports.dal, tenant, run_id))
    steps, source, note = run_timeline(ports, run)
    failing = run.failing_step
    if failing is None and source == SOURCE_RECORDS_AND_LOGS and run.status in FAILED:
        failing = last_failing_step(steps)  # an Express run not settled by the sweep yet
    output = loads_optional(run.output)
    if output is None and run.status == "succeeded" and run.execution_arn:
        # Too large for the run item: Step Functions still has it.
        described = ports.machines.describe(run.execution_arn) or {}
        output = loads_optional(described.get("output"))
    return RunDetail(
        **run_summary(run).model_dump(),
        input=loads_optional(run.input),
        output=public_document(output),
        cause=public_cause(run.cause),
        failing_step=failing,
        steps=[step_entry(step) for step in steps],
        timeline_source=source,
        timeline_note=note,
    )


def run_timeline(ports: Ports, run: RunItem) -> tuple[list[StepRun], str | None, str | None]:
    """The run's step timeline with the version's step types, where it came from and what
    it lacks: ``history`` (a Standard run's execution history, all pages), or for an
    Express run ``records`` or ``records+logs``
    (:func:`relayflow.control.express_timeline.express_timeline`). Empty (source
    ``None``) for runs of no recorded version; empty once a history expired."""
    if not run.execution_arn or run.version is None:
        return [], None, None
    version = ports.dal.get_version(run.tenant, run.workflow_id, run.version)
    if version is None:
        return [], None, None
    if run.engine == "express":  # no execution history: records and logs
        # The run item was read for the caller's tenant: only its execution is read.
        timeline = express_timeline(ports.dal, run, version)
        return timeline.steps, timeline.source, timeline.note
    events = ports.machines.history(run.execution_arn)
    return history_steps(version.step_types, version.step_runners, events), "history", None


def list_runs(
    ports: Ports,
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
    find_workflow(ports.dal, tenant, workflow_id)
    items, token = ports.dal.list_runs(
        tenant, workflow_id, status=status, limit=limit, next_token=next_token
    )
    return Page[RunSummary](items=[run_summary(i) for i in items], next_token=token)
