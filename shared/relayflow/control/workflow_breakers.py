"""Circuit breakers as the control plane uses them: a workflow's breaker refuses starts while
open (:func:`admit_workflow_run`), and the tenant's breakers are listed and reset."""

from __future__ import annotations

import json
import math

from relayflow.control.errors import BreakerOpen, NotFound
from relayflow.control.limits import check_limit, check_tenant
from relayflow.control.models import Page
from relayflow.control.ports import Ports
from relayflow.errors import CircuitOpen
from relayflow.reliability.breakers import (
    WORKFLOW_TRIAL_LEASE_SECONDS,
    Admission,
    BreakerInfo,
    BreakerPolicy,
    is_breaker_id,
    workflow_breaker_id,
)


def workflow_breaker_policy(
    ports: Ports, tenant: str, workflow_id: str, version: int
) -> BreakerPolicy | None:
    """The circuit breaker ``version`` of the workflow declares (``None``: none, or no
    such version)."""
    item = ports.dal.get_version(tenant, workflow_id, version)
    if item is None:
        return None
    return BreakerPolicy.from_config(json.loads(item.definition).get("breaker"))


def admit_workflow_run(
    ports: Ports, tenant: str, workflow_id: str, version: int, run_id: str
) -> Admission | None:
    """Pass the workflow's circuit breaker, or raise :class:`BreakerOpen`. A half-open
    breaker lets this run through as its trial (the admission returned). Only an open
    breaker costs a read of the version, to confirm that it still declares a breaker."""
    breakers = ports.breakers
    breaker_id = workflow_breaker_id(workflow_id)
    item = breakers.get(tenant, breaker_id)
    if item is None or item.state == "closed":
        return None
    if workflow_breaker_policy(ports, tenant, workflow_id, version) is None:
        return None
    try:
        admission = breakers.admit(
            tenant,
            breaker_id,
            lease_seconds=WORKFLOW_TRIAL_LEASE_SECONDS,
            token=run_id,
            current=item,
        )
    except CircuitOpen as exc:
        chance = exc.details.get("reopens_at_epoch")
        retry_after = max(1, math.ceil(chance - breakers.clock())) if chance else None
        raise BreakerOpen(
            f"workflow {workflow_id}'s circuit breaker is open: no run starts until "
            f"{exc.details.get('reopens_at')}",
            {"breaker_id": breaker_id, "reopens_at": exc.details.get("reopens_at")},
            retry_after,
        ) from exc
    return admission if admission.trial_token is not None else None


def list_breakers(
    ports: Ports, tenant: str, *, limit: int = 50, next_token: str | None = None
) -> Page[BreakerInfo]:
    """The tenant's circuit breakers (every one that has counted a failure), by id."""
    check_tenant(tenant)
    check_limit(limit)
    items, token = ports.breakers.list(tenant, limit=limit, next_token=next_token)
    return Page[BreakerInfo](items=items, next_token=token)


def reset_breaker(ports: Ports, tenant: str, breaker_id: str) -> BreakerInfo:
    """Close the tenant's breaker now (its failures forgotten, a running trial dropped).
    :class:`NotFound` for a breaker the tenant does not have."""
    check_tenant(tenant)
    info = ports.breakers.reset(tenant, breaker_id) if is_breaker_id(breaker_id) else None
    if info is None:
        raise NotFound(f"circuit breaker {breaker_id} not found")
    return info
