"""The control plane's composition root: :class:`ControlPlane` wires the use cases to one set
of ports and is what the HTTP API, the CLI, the local runtime and the Lambda handlers call.

Every method takes the tenant first (except the API-key lookups, which find the tenant) and
only ever builds keys from it, so another tenant's ids raise :class:`NotFound` exactly like
ids that do not exist. DynamoDB is reached only through :mod:`relayflow.dal`, Step Functions
only through :mod:`relayflow.executions.stepfunctions`; their failures become
:mod:`relayflow.control.errors` (:func:`relayflow.control.translate.translated`).

Each method hands over to one use case's module:
workflows (:mod:`.workflow_publish`, :mod:`.workflows`), runs (:mod:`.run_start`,
:mod:`.run_reads`, :mod:`.run_cancel`, :mod:`.rerun`, :mod:`.resume`, :mod:`.step_through`),
run admission (:mod:`.admission`), the DLQ (:mod:`.dlq`), circuit breakers
(:mod:`.workflow_breakers`) and API keys (:mod:`.api_keys`). Nothing in
:mod:`relayflow.control` imports this module.

A use case's module is imported when its method is first called, so a function that needs a
few of them (the recorder, the trigger function) does not load them all at cold start.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from relayflow.control.ports import Ports
from relayflow.control.translate import translated

if TYPE_CHECKING:
    from relayflow.control.admission import Admission
    from relayflow.control.dlq import Dlq
    from relayflow.control.models import (
        ApiKeyInfo,
        ContinueResult,
        NewApiKey,
        Page,
        PutWorkflowResult,
        RunDetail,
        RunSummary,
        StartRunResult,
        WorkflowDetail,
        WorkflowSummary,
    )
    from relayflow.control.records import RerunSeed
    from relayflow.control.timeline import StepRun
    from relayflow.dal import ApiKeyItem, Dal, RunItem
    from relayflow.executions.stepfunctions import StateMachines
    from relayflow.reliability.breakers import BreakerInfo, Breakers


class ControlPlane:
    """Workflows, versions, runs, breakers and API keys, scoped by tenant.

    ``dal`` and ``sfn`` (a boto3 ``stepfunctions`` client) are created lazily when not given:
    :func:`relayflow.dal.get_dal` and ``adapters.aws.client("stepfunctions")``.
    """

    def __init__(
        self, dal: Dal | None = None, sfn: Any | None = None, breakers: Breakers | None = None
    ) -> None:
        #: What every use case works with.
        self.ports = Ports.of(dal, sfn, breakers)

    @property
    def dal(self) -> Dal:
        return self.ports.dal

    @property
    def machines(self) -> StateMachines:
        """The Step Functions calls (state machines, versions, alias, executions)."""
        return self.ports.machines

    @property
    def breakers(self) -> Breakers:
        """Circuit breakers (workflow breakers refuse starts; the recorder settles them)."""
        return self.ports.breakers

    @functools.cached_property
    def admission(self) -> Admission:
        """Run admission: singleton, concurrency, debounce, batch (``docs/flow-control.md``)."""
        from relayflow.control.admission import Admission

        return Admission(self.ports, self)

    @property
    def dlq(self) -> Dlq:
        """The run dead-letter queue (:mod:`relayflow.control.dlq`)."""
        from relayflow.control.dlq import Dlq

        return Dlq(self.ports)

    def catch_up(self, tenant: str, workflow_id: str, triggers: list[Any]) -> None:
        """Run the ticks the workflow's cron triggers with ``catch_up`` missed."""
        from relayflow.control.dispatch import catch_up_workflow

        catch_up_workflow(self, tenant, workflow_id, triggers)

    # -- workflows ---------------------------------------------------------------------------

    @translated
    def put_workflow(
        self, tenant: str, workflow_id: str, definition: Mapping[str, Any]
    ) -> PutWorkflowResult:
        """Validate, compile and publish ``definition`` as the live version
        (:func:`relayflow.control.workflow_publish.put_workflow`)."""
        from relayflow.control import workflow_publish

        return workflow_publish.put_workflow(
            self.ports, tenant, workflow_id, definition, catch_up=self.catch_up
        )

    @translated
    def list_workflows(
        self, tenant: str, *, limit: int = 50, next_token: str | None = None
    ) -> Page[WorkflowSummary]:
        """The tenant's workflows (deleted ones too, ``enabled`` false), by id."""
        from relayflow.control import workflows

        return workflows.list_workflows(self.ports, tenant, limit=limit, next_token=next_token)

    @translated
    def get_workflow(self, tenant: str, workflow_id: str) -> WorkflowDetail:
        """The workflow, the live version's definition and every version."""
        from relayflow.control import workflows

        return workflows.get_workflow(self.ports, tenant, workflow_id)

    @translated
    def delete_workflow(self, tenant: str, workflow_id: str) -> WorkflowSummary:
        """Disable the workflow (:func:`relayflow.control.workflows.delete_workflow`)."""
        from relayflow.control import workflows

        return workflows.delete_workflow(self.ports, tenant, workflow_id, catch_up=self.catch_up)

    @translated
    def rollback_workflow(self, tenant: str, workflow_id: str, version: int) -> PutWorkflowResult:
        """Make an earlier (or any recorded) version live again, with its triggers."""
        from relayflow.control import workflows

        return workflows.rollback_workflow(
            self.ports, tenant, workflow_id, version, catch_up=self.catch_up
        )

    # -- runs --------------------------------------------------------------------------------

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
        """Start a run of the live version, or of ``version``
        (:func:`relayflow.control.run_start.start_run`)."""
        from relayflow.control import run_start

        return run_start.start_run(
            self.ports,
            self.admission,
            tenant,
            workflow_id,
            input,
            version=version,
            idempotency_key=idempotency_key,
            trigger_type=trigger_type,
            dry_run=dry_run,
            step_through=step_through,
            collapse=collapse,
            overlap=overlap,
            rerun=rerun,
        )

    @translated
    def continue_run(self, tenant: str, run_id: str, *, to_end: bool = False) -> ContinueResult:
        """Release the step a step-through run waits before (:class:`Conflict` while a step
        runs, so a second call releases nothing), or with ``to_end`` let it finish."""
        from relayflow.control.lookups import find_run
        from relayflow.control.step_through import continue_run

        run = find_run(self.dal, tenant, run_id)
        return continue_run(self.dal, run, to_end=to_end)

    @translated
    def rerun(
        self,
        tenant: str,
        run_id: str,
        from_step: str,
        *,
        version: str,
        dry_run: bool | None = None,
        step_through: bool | None = None,
    ) -> StartRunResult:
        """A new run of ``run_id``'s trigger that starts at ``from_step`` on the run's own
        version (``pinned``) or the live one (``current``), in the run's modes unless
        ``dry_run`` / ``step_through`` say otherwise: :mod:`relayflow.control.rerun`."""
        from relayflow.control.rerun import rerun as rerun_from_step

        return rerun_from_step(
            self.ports,
            self,
            tenant,
            run_id,
            from_step,
            version=version,
            dry_run=dry_run,
            step_through=step_through,
        )

    @translated
    def resume_run(self, tenant: str, run_id: str, request: Any) -> Any:
        """Answer a parked run's park (:meth:`relayflow.control.resume.Parks.resume`)."""
        from relayflow.control.resume import Parks

        return Parks(self.ports).resume(tenant, run_id, request)

    @translated
    def list_parked_runs(
        self, tenant: str, *, limit: int = 20, next_token: str | None = None
    ) -> Page[RunSummary]:
        """The tenant's parked runs (:mod:`relayflow.control.resume`)."""
        from relayflow.control.resume import Parks

        return Parks(self.ports).list_parked(tenant, limit=limit, next_token=next_token)

    @translated
    def get_run(self, tenant: str, run_id: str) -> RunDetail:
        """The run with its step timeline (:func:`relayflow.control.run_reads.get_run`)."""
        from relayflow.control import run_reads

        return run_reads.get_run(self.ports, tenant, run_id)

    def run_timeline(self, run: RunItem) -> tuple[list[StepRun], str | None, str | None]:
        """The run's step timeline, where it came from and what it lacks
        (:func:`relayflow.control.run_reads.run_timeline`)."""
        from relayflow.control import run_reads

        return run_reads.run_timeline(self.ports, run)

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
        from relayflow.control import run_reads

        return run_reads.list_runs(
            self.ports, tenant, workflow_id, status=status, limit=limit, next_token=next_token
        )

    @translated
    def cancel_run(self, tenant: str, run_id: str) -> RunSummary:
        """Stop a running run; it is ``aborted`` at once (the recorder confirms it later).
        :class:`Conflict` when the run has already finished."""
        from relayflow.control import run_cancel

        return run_cancel.cancel_run(self.ports, self.admission, tenant, run_id)

    # -- circuit breakers --------------------------------------------------------------------

    @translated
    def list_breakers(
        self, tenant: str, *, limit: int = 50, next_token: str | None = None
    ) -> Page[BreakerInfo]:
        """The tenant's circuit breakers (every one that has counted a failure), by id."""
        from relayflow.control import workflow_breakers

        return workflow_breakers.list_breakers(
            self.ports, tenant, limit=limit, next_token=next_token
        )

    @translated
    def reset_breaker(self, tenant: str, breaker_id: str) -> BreakerInfo:
        """Close the tenant's breaker now; :class:`NotFound` for one it does not have."""
        from relayflow.control import workflow_breakers

        return workflow_breakers.reset_breaker(self.ports, tenant, breaker_id)

    # -- API keys ----------------------------------------------------------------------------

    @translated
    def create_api_key(self, tenant: str, name: str) -> NewApiKey:
        """A new API key for ``tenant`` (the secret is in the result only)."""
        from relayflow.control import api_keys

        return api_keys.create_api_key(self.dal, tenant, name)

    @translated
    def revoke_api_key(self, key_id: str, *, tenant: str | None = None) -> ApiKeyInfo:
        """Revoke a key by its public id; with ``tenant``, another tenant's key is
        :class:`NotFound`."""
        from relayflow.control import api_keys

        return api_keys.revoke_api_key(self.dal, key_id, tenant=tenant)

    @translated
    def list_api_keys(self, tenant: str) -> list[ApiKeyInfo]:
        """The tenant's keys, oldest first, revoked ones included (never a secret)."""
        from relayflow.control import api_keys

        return api_keys.list_api_keys(self.dal, tenant)

    @translated
    def authenticate(self, secret: str) -> str | None:
        """The tenant of a valid, unrevoked key; ``None`` for anything else."""
        item = self.authenticated_key(secret)
        return item.tenant if item is not None else None

    def authenticated_key(self, secret: str) -> ApiKeyItem | None:
        """The valid, unrevoked key ``secret`` is; ``None`` for anything else."""
        from relayflow.control import api_keys

        return api_keys.authenticated_key(self.dal, secret)


@lru_cache(maxsize=1)
def get_control_plane() -> ControlPlane:
    """The process's control plane (its clients are resolved at each call)."""
    return ControlPlane()
