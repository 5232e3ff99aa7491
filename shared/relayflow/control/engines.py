"""The control plane's side of the engine choice (``docs/engines.md``): how a workflow is
compiled for its state machine and how an Express run starts (the sweep that settles Express
runs, which no recorder hears of, is :mod:`relayflow.control.express_sweep`).

* A workflow's state machine gets its type when it is created (its first PUT): Express when
  the choice (:func:`relayflow.compiler.engine.choose_engine`) says so, else Standard. Step
  Functions cannot change a machine's type, so later versions compile for the type the machine
  has: ``engine: auto`` then says why it stays, and ``engine: express`` on a Standard machine
  (or ``engine: standard`` on an Express one) is refused (422) naming the reason.
* Runs start with ``StartExecution`` on both engines (asynchronous: the API answers with the
  run id at once, as for Standard). ``StartSyncExecution`` would hold the API's Lambda for the
  whole run and give nothing the run item does not. An Express start also writes the run's
  deadline marker (:mod:`relayflow.dal.express`), which the sweep visits.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from relayflow.control.errors import Unprocessable
from relayflow.control.models import WorkflowVersionInfo, view_of
from relayflow.dal.express import ExpressDeadlines
from relayflow.executions import stepfunctions as sfn_api
from relayflow.settings import get_settings

if TYPE_CHECKING:
    from relayflow.compiler import CompiledWorkflow, CompileOptions
    from relayflow.control.ports import Ports
    from relayflow.dal import RunItem, VersionItem, WorkflowItem

#: How long after an Express run's machine timeout the sweep waits for its own record (the
#: last UpdateItem may still be retrying).
SETTLE_MARGIN = timedelta(seconds=60)


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
    return view_of(WorkflowVersionInfo, item)


def deadline_of(run: RunItem, timeout_seconds: int, *, started_at: str | None = None) -> str:
    """When the sweep may conclude that an Express run died: its machine's timeout after it
    started (or after ``started_at``: a DLQ retry's execution starts later than the run),
    plus :data:`SETTLE_MARGIN`."""
    started = datetime.fromisoformat((started_at or run.started_at).replace("Z", "+00:00"))
    end = started + timedelta(seconds=timeout_seconds) + SETTLE_MARGIN
    return end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def start_execution(ports: Ports, run: RunItem, target_arn: str, document_json: str) -> str:
    """Start the run's execution (``StartExecution`` on both engines); an Express run gets
    its deadline marker first, so no run can start without the sweep knowing of it."""
    if run.engine == "express":
        from relayflow.compiler.engine import EXPRESS_MAX_SECONDS

        ExpressDeadlines(ports.dal).add(
            deadline_of(run, EXPRESS_MAX_SECONDS), run.tenant, run.run_id
        )
    return ports.machines.start(target_arn, run.run_id, document_json)
