"""Workflows: listing, reading, disabling and rolling back (publishing a definition is
:mod:`relayflow.control.workflow_publish`)."""

from __future__ import annotations

import json

from relayflow.control.engines import version_info
from relayflow.control.limits import check_limit, check_tenant
from relayflow.control.lookups import find_version, find_workflow, find_workflow_and_versions
from relayflow.control.models import Page, PutWorkflowResult, WorkflowDetail, WorkflowSummary
from relayflow.control.ports import Ports
from relayflow.control.records import live_engine_of, workflow_summary
from relayflow.control.times import now_iso
from relayflow.control.workflow_triggers import CatchUp, check_triggers, point_alias, sync_triggers


def list_workflows(
    ports: Ports, tenant: str, *, limit: int = 50, next_token: str | None = None
) -> Page[WorkflowSummary]:
    """The tenant's workflows (deleted ones too, ``enabled`` false), by id."""
    check_tenant(tenant)
    check_limit(limit)
    items, token = ports.dal.list_workflows(tenant, limit=limit, next_token=next_token)
    return Page[WorkflowSummary](items=[workflow_summary(i) for i in items], next_token=token)


def get_workflow(ports: Ports, tenant: str, workflow_id: str) -> WorkflowDetail:
    """The workflow, the live version's definition and every version."""
    head, versions = find_workflow_and_versions(ports.dal, tenant, workflow_id)
    live = next((v for v in versions if v.version == head.live_version), None)
    return WorkflowDetail(
        **workflow_summary(head).model_dump(),
        definition=json.loads(live.definition) if live else {},
        versions=[version_info(v) for v in versions],
    )


def delete_workflow(
    ports: Ports, tenant: str, workflow_id: str, *, catch_up: CatchUp
) -> WorkflowSummary:
    """Disable the workflow: new starts raise :class:`Conflict`, runs in flight finish.
    Versions and runs stay readable; a PUT enables it again."""
    dal = ports.dal
    head = find_workflow(dal, tenant, workflow_id)
    if head.enabled:
        head = dal.update_workflow(tenant, workflow_id, enabled=False, updated_at=now_iso())
    # Also when it was disabled already: a repeated DELETE heals a failed one.
    sync_triggers(dal, tenant, workflow_id, [], enabled=False, catch_up=catch_up)
    return workflow_summary(head)


def rollback_workflow(
    ports: Ports, tenant: str, workflow_id: str, version: int, *, catch_up: CatchUp
) -> PutWorkflowResult:
    """Make an earlier (or any recorded) version live again, with its triggers."""
    from relayflow.triggers.sync import triggers_of

    dal = ports.dal
    head = find_workflow(dal, tenant, workflow_id)
    item = find_version(dal, tenant, workflow_id, version)
    triggers = triggers_of(item.definition, with_subscriptions=True)
    check_triggers(dal, tenant, workflow_id, triggers)
    if head.live_version != item.version:
        head = dal.update_workflow(
            tenant,
            workflow_id,
            live_version=item.version,
            live_version_arn=item.state_machine_version_arn,
            updated_at=now_iso(),
            **live_engine_of(item),
        )
    point_alias(ports, head)
    sync_triggers(dal, tenant, workflow_id, triggers, enabled=head.enabled, catch_up=catch_up)
    return PutWorkflowResult(
        workflow_id=workflow_id,
        version=item.version,
        live_version=item.version,
        created=False,
        warnings=item.warnings,
    )
