"""Tenant-scoped reads of workflows, versions and runs: an id that is malformed, another
tenant's or missing is :class:`NotFound` alike."""

from __future__ import annotations

import re
from typing import Any

from relayflow.control.errors import BadRequest, NotFound
from relayflow.control.limits import RUN_ID_PATTERN, WORKFLOW_ID_PATTERN, check_tenant
from relayflow.dal import Dal, RunItem, VersionItem, WorkflowItem


def find_workflow(dal: Dal, tenant: str, workflow_id: str) -> WorkflowItem:
    """The tenant's workflow head."""
    head = dal.get_workflow(tenant, workflow_id) if _valid(tenant, workflow_id) else None
    if head is None:
        raise NotFound(f"workflow {workflow_id} not found")
    return head


def find_workflow_and_versions(
    dal: Dal, tenant: str, workflow_id: str
) -> tuple[WorkflowItem, list[VersionItem]]:
    """The tenant's workflow head and every version of it."""
    head, versions = (
        dal.get_workflow_with_versions(tenant, workflow_id)
        if _valid(tenant, workflow_id)
        else (None, [])
    )
    if head is None:
        raise NotFound(f"workflow {workflow_id} not found")
    return head, versions


def find_version(dal: Dal, tenant: str, workflow_id: str, version: int) -> VersionItem:
    """One version of the tenant's workflow (:class:`BadRequest` for a non-integer)."""
    if not isinstance(version, int) or isinstance(version, bool):
        raise BadRequest("a version is an integer")
    item = dal.get_version(tenant, workflow_id, version) if version >= 1 else None
    if item is None:
        raise NotFound(f"workflow {workflow_id} has no version {version}")
    return item


def find_run(dal: Dal, tenant: str, run_id: str) -> RunItem:
    """The tenant's run."""
    run = dal.get_run(tenant, run_id) if _valid(tenant, run_id, RUN_ID_PATTERN) else None
    if run is None:
        raise NotFound(f"run {run_id} not found")
    return run


def _valid(tenant: str, item_id: Any, pattern: re.Pattern[str] = WORKFLOW_ID_PATTERN) -> bool:
    """Whether ``item_id`` may name an item (:class:`BadRequest` for a bad ``tenant``)."""
    check_tenant(tenant)
    return isinstance(item_id, str) and bool(pattern.match(item_id))
