"""The control plane's side of the engine choice (``docs/engines.md``): how a workflow is
compiled for its state machine, how an Express run starts, and the sweep that settles Express
runs (which no recorder hears of).

* A workflow's state machine gets its type when it is created (its first PUT): Express when
  the choice (:func:`relayflow.compiler.engine.choose_engine`) says so, else Standard. Step
  Functions cannot change a machine's type, so later versions compile for the type the machine
  has: ``engine: auto`` then says why it stays, and ``engine: express`` on a Standard machine
  (or ``engine: standard`` on an Express one) is refused (422) naming the reason.
* Runs start with ``StartExecution`` on both engines (asynchronous: the API answers with the
  run id at once, as for Standard). ``StartSyncExecution`` would hold the API's Lambda for the
  whole run and give nothing the run item does not. An Express start also writes the run's
  deadline marker (:mod:`relayflow.dal.express`).
* The maintenance sweep (:func:`sweep_express_runs`) visits each marker once its deadline
  passed: a run still ``running`` never recorded its end, so it is marked ``timed_out``; a run
  the machine recorded itself is settled like the recorder settles a Standard run's end (DLQ
  archive, admission slot, lifecycle event, breaker, notifications).
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from relayflow.control.errors import Unprocessable
from relayflow.control.models import WorkflowVersionInfo
from relayflow.dal.express import ExpressDeadlines
from relayflow.executions import stepfunctions as sfn_api
from relayflow.observability import logger, record_metric
from relayflow.settings import get_settings

if TYPE_CHECKING:
    from relayflow.compiler import CompiledWorkflow, CompileOptions
    from relayflow.control.service import ControlPlane
    from relayflow.dal import RunItem, VersionItem, WorkflowItem

#: How long after an Express run's machine timeout the sweep waits for its own record (the
#: last UpdateItem may still be retrying).
SETTLE_MARGIN = timedelta(seconds=60)
#: Markers one maintenance pass handles at most.
SWEEP_BATCH = 200


def compile_options(tenant: str, head: WorkflowItem | None = None) -> CompileOptions:
    """How the control plane compiles the tenant's workflows: the deployment's functions,
    region, account, table and payload bucket, the tenant's state machine naming, and whether
    the machine may be Express (a new workflow, or one whose machine is Express)."""
    from relayflow.compiler import CompileOptions

    settings = get_settings()
    return CompileOptions(
        function_arns=dict(settings.function_arns),
        region=settings.region,
        # The state machines live in the account of the role they run with.
        account=settings.state_machine_role_arn.split(":")[4],
        state_machine_name=functools.partial(sfn_api.state_machine_name, settings.stage, tenant),
        table_name=settings.table_name,
        payload_bucket=settings.payload_bucket,
        express=head is None or head.engine == "express",
    )


def check_machine_type(workflow: Any, compiled: CompiledWorkflow, head: WorkflowItem | None) -> str:
    """The type of the machine ``compiled`` deploys to (``standard`` or ``express``); raises
    :class:`Unprocessable` when the definition asks for an engine its existing machine is not."""
    engine = compiled.engine.engine if compiled.engine is not None else "standard"
    if head is None:
        return engine
    if head.engine == "express" and engine != "express":
        reason = compiled.engine.reason if compiled.engine is not None else "engine: standard"
        raise Unprocessable(
            f"workflow {head.workflow_id} runs on an Express state machine and this version "
            f"cannot ({reason}); Step Functions cannot change a machine's type: publish it "
            "under a new workflow id",
            {"path": "engine", "machine": "express", "reason": reason},
        )
    if head.engine == "standard" and getattr(workflow, "engine", "auto") == "express":
        raise Unprocessable(
            f"workflow {head.workflow_id} runs on a Standard state machine; Step Functions "
            "cannot change a machine's type: publish engine: express under a new workflow id",
            {"path": "engine", "machine": "standard"},
        )
    return head.engine


def version_info(item: VersionItem) -> WorkflowVersionInfo:
    """A version as ``GET /workflows/{id}`` lists it."""
    return WorkflowVersionInfo.model_validate(
        item.model_dump(include=set(WorkflowVersionInfo.model_fields))
    )


def deadline_of(run: RunItem, timeout_seconds: int, *, started_at: str | None = None) -> str:
    """When the sweep may conclude that an Express run died: its machine's timeout after it
    started (or after ``started_at``: a DLQ retry's execution starts later than the run),
    plus :data:`SETTLE_MARGIN`."""
    started = datetime.fromisoformat((started_at or run.started_at).replace("Z", "+00:00"))
    end = started + timedelta(seconds=timeout_seconds) + SETTLE_MARGIN
    return end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def start_execution(
    control: ControlPlane, run: RunItem, target_arn: str, document_json: str
) -> str:
    """Start the run's execution (``StartExecution`` on both engines); an Express run gets
    its deadline marker first, so no run can start without the sweep knowing of it."""
    if run.engine == "express":
        from relayflow.compiler.engine import EXPRESS_MAX_SECONDS

        ExpressDeadlines(control.dal).add(
            deadline_of(run, EXPRESS_MAX_SECONDS), run.tenant, run.run_id
        )
    return control.machines.start(target_arn, run.run_id, document_json)


def _machine_of(execution_arn: str) -> str:
    """``arn:…:execution:<machine>:<name>`` → ``arn:…:stateMachine:<machine>``."""
    parts = execution_arn.split(":")
    if len(parts) < 8:
        return ""
    return ":".join([*parts[:5], "stateMachine", parts[6]])


def _status_change(
    run: RunItem, status: str, error: str | None, cause: str | None
) -> dict[str, Any]:
    """The status change event the recorder would have got for ``run``'s end (Express
    emits none): what :func:`relayflow.control.recorder.record_status_change` settles."""
    import json

    from relayflow.control.recorder import DETAIL_TYPE, SOURCE

    ended = run.ended_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def millis(value: str) -> int:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)

    document = {
        "run": {
            "id": run.run_id,
            "workflow_id": run.workflow_id,
            "version": run.version,
            "tenant": run.tenant,
        }
    }
    return {
        "source": SOURCE,
        "detail-type": DETAIL_TYPE,
        "detail": {
            "executionArn": run.execution_arn,
            "stateMachineArn": _machine_of(run.execution_arn or ""),
            "name": run.run_id,
            "status": status,
            "startDate": millis(run.started_at),
            "stopDate": millis(ended),
            "input": json.dumps(document),
            "inputDetails": {"included": True},
            "output": run.output,
            "error": error,
            "cause": cause,
        },
    }


def sweep_express_runs(
    control: ControlPlane, *, now: datetime | None = None, limit: int = SWEEP_BATCH
) -> dict[str, Any]:
    """Settle every Express run whose deadline passed: ``timed_out`` when its machine recorded
    no end, else its recorded end; then archive failures in the DLQ, publish the lifecycle
    event, free its admission slot and notify, as the recorder does for Standard runs.
    Returns the run ids by outcome and emits ``ExpressRunsTimedOut``."""
    from relayflow.control.recorder import record_status_change

    now = now or datetime.now(UTC)
    markers = ExpressDeadlines(control.dal)
    timed_out: list[str] = []
    settled: list[str] = []
    for due in markers.due(now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), limit):
        run = control.dal.get_run(due.tenant, due.run_id)
        if run is None:
            markers.remove(due)
            continue
        if run.status == "running":
            change = _status_change(
                run,
                "TIMED_OUT",
                "States.Timeout",
                "the Express run recorded no end by its deadline",
            )
            timed_out.append(run.run_id)
        elif run.native_status is not None and run.recorded_status is None:
            status = "SUCCEEDED" if run.native_status == "succeeded" else "FAILED"
            change = _status_change(run, status, run.error, run.cause)
            settled.append(run.run_id)
        elif run.status == "aborted" and run.recorded_status is None:
            # Cancelled through the API: the execution ran on (Express cannot stop), and its
            # own record found the run no longer running.
            change = _status_change(run, "ABORTED", run.error, run.cause)
            settled.append(run.run_id)
        else:
            markers.remove(due)
            continue
        record_status_change(change, control=control)
        markers.remove(due)
    if timed_out:
        record_metric("ExpressRunsTimedOut", len(timed_out))
        logger.warning("express runs timed out", extra={"run_ids": timed_out})
    return {"timed_out": timed_out, "settled": settled}
