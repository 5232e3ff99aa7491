"""Workflows: reading, disabling and rolling back, and syncing their triggers (publishing a
definition is :meth:`relayflow.control.service.ControlPlane.put_workflow`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from relayflow.control.engines import version_info
from relayflow.control.errors import ApiError
from relayflow.control.models import Page, PutWorkflowResult, WorkflowDetail, WorkflowSummary
from relayflow.dal import DataAccessError, WorkflowItem
from relayflow.executions import stepfunctions as sfn_api

if TYPE_CHECKING:
    from relayflow.triggers.sync import TriggerPlan

from relayflow.control.plane.base import PlaneBase
from relayflow.control.plane.common import (
    _engine_of,
    _trigger_errors,
    _workflow_summary,
    check_limit,
    check_tenant,
    now_iso,
    translated,
)


class Workflows(PlaneBase):
    """The workflow methods of the control plane."""

    def _check_triggers(self, tenant: str, workflow_id: str, triggers: list[Any]) -> TriggerPlan:
        """Plan the triggers before anything is stored: a cron expression Scheduler cannot
        express is an :class:`InvalidDefinition` problem, a slug another workflow holds a
        :class:`Conflict`."""
        from relayflow.triggers.sync import TriggerSync

        with _trigger_errors():
            return TriggerSync(dal=self.dal).check(tenant, workflow_id, triggers)

    def _sync_triggers(
        self, tenant: str, workflow_id: str, triggers: list[Any], *, enabled: bool
    ) -> None:
        """Register the triggers with EventBridge Scheduler, EventBridge and the slug table
        (or remove them: ``enabled`` false). Idempotent, so a failed request is healed by
        repeating it."""
        from relayflow.triggers.sync import TriggerSync

        with _trigger_errors():
            TriggerSync(dal=self.dal).sync(tenant, workflow_id, triggers, enabled=enabled)
        if enabled:
            self._catch_up(tenant, workflow_id, triggers)

    def _catch_up(self, tenant: str, workflow_id: str, triggers: list[Any]) -> None:
        """Run the ticks cron triggers with ``catch_up`` missed (``docs/flow-control.md``).
        A failure is logged, not raised: the workflow is stored, and the next tick catches
        up again."""
        from relayflow.control.dispatch import catch_up_workflow
        from relayflow.observability import logger

        try:
            catch_up_workflow(self, tenant, workflow_id, triggers)
        except (ApiError, DataAccessError, sfn_api.StepFunctionsError) as exc:
            logger.warning(
                "catch-up of missed ticks failed; the next tick tries again",
                extra={"tenant": tenant, "workflow_id": workflow_id, "reason": str(exc)},
            )

    def _point_alias(self, head: WorkflowItem) -> None:
        alias_arn = self.machines.point_alias(head.state_machine_arn, head.live_version_arn)
        if alias_arn != head.alias_arn:
            self.dal.update_workflow(head.tenant, head.workflow_id, alias_arn=alias_arn)

    @translated
    def list_workflows(
        self, tenant: str, *, limit: int = 50, next_token: str | None = None
    ) -> Page[WorkflowSummary]:
        """The tenant's workflows (deleted ones too, ``enabled`` false), by id."""
        check_tenant(tenant)
        check_limit(limit)
        items, token = self.dal.list_workflows(tenant, limit=limit, next_token=next_token)
        return Page[WorkflowSummary](items=[_workflow_summary(i) for i in items], next_token=token)

    @translated
    def get_workflow(self, tenant: str, workflow_id: str) -> WorkflowDetail:
        """The workflow, the live version's definition and every version."""
        head, versions = self._workflow_and_versions(tenant, workflow_id)
        live = next((v for v in versions if v.version == head.live_version), None)
        return WorkflowDetail(
            **_workflow_summary(head).model_dump(),
            definition=json.loads(live.definition) if live else {},
            versions=[version_info(v) for v in versions],
        )

    @translated
    def delete_workflow(self, tenant: str, workflow_id: str) -> WorkflowSummary:
        """Disable the workflow: new starts raise :class:`Conflict`, runs in flight finish.
        Versions and runs stay readable; a PUT enables it again."""
        head = self._workflow(tenant, workflow_id)
        if head.enabled:
            head = self.dal.update_workflow(
                tenant, workflow_id, enabled=False, updated_at=now_iso()
            )
        # Also when it was disabled already: a repeated DELETE heals a failed one.
        self._sync_triggers(tenant, workflow_id, [], enabled=False)
        return _workflow_summary(head)

    @translated
    def rollback_workflow(self, tenant: str, workflow_id: str, version: int) -> PutWorkflowResult:
        """Make an earlier (or any recorded) version live again, with its triggers."""
        from relayflow.triggers.sync import triggers_of

        head = self._workflow(tenant, workflow_id)
        item = self._version(tenant, workflow_id, version)
        triggers = triggers_of(item.definition, with_subscriptions=True)
        self._check_triggers(tenant, workflow_id, triggers)
        if head.live_version != item.version:
            head = self.dal.update_workflow(
                tenant,
                workflow_id,
                live_version=item.version,
                live_version_arn=item.state_machine_version_arn,
                updated_at=now_iso(),
                **_engine_of(item),
            )
        self._point_alias(head)
        self._sync_triggers(tenant, workflow_id, triggers, enabled=head.enabled)
        return PutWorkflowResult(
            workflow_id=workflow_id,
            version=item.version,
            live_version=item.version,
            created=False,
            warnings=item.warnings,
        )

    # -- runs --------------------------------------------------------------------------------
