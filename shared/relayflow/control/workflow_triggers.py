"""A workflow's triggers (and its live alias) kept in step with the version that is live:
planned before anything is stored, registered after, with the ticks missed caught up."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from relayflow.control.errors import ApiError
from relayflow.control.ports import Ports
from relayflow.control.translate import trigger_errors
from relayflow.dal import Dal, DataAccessError, WorkflowItem
from relayflow.executions import stepfunctions as sfn_api

if TYPE_CHECKING:
    from relayflow.triggers.sync import TriggerPlan

#: Runs the ticks a workflow's cron triggers with ``catch_up`` missed:
#: ``(tenant, workflow_id, triggers)`` (the control plane gives
#: :func:`relayflow.control.dispatch.catch_up_workflow` over itself).
CatchUp = Callable[[str, str, list[Any]], None]


def check_triggers(dal: Dal, tenant: str, workflow_id: str, triggers: list[Any]) -> TriggerPlan:
    """Plan the triggers before anything is stored: a cron expression Scheduler cannot
    express is an :class:`InvalidDefinition` problem, a slug another workflow holds a
    :class:`Conflict`."""
    from relayflow.triggers.sync import TriggerSync

    with trigger_errors():
        return TriggerSync(dal=dal).check(tenant, workflow_id, triggers)


def sync_triggers(
    dal: Dal,
    tenant: str,
    workflow_id: str,
    triggers: list[Any],
    *,
    enabled: bool,
    catch_up: CatchUp,
) -> None:
    """Register the triggers with EventBridge Scheduler, EventBridge and the slug table
    (or remove them: ``enabled`` false), then (enabled) run the ticks missed. Idempotent, so
    a failed request is healed by repeating it."""
    from relayflow.triggers.sync import TriggerSync

    with trigger_errors():
        TriggerSync(dal=dal).sync(tenant, workflow_id, triggers, enabled=enabled)
    if enabled:
        _catch_up(catch_up, tenant, workflow_id, triggers)


def _catch_up(catch_up: CatchUp, tenant: str, workflow_id: str, triggers: list[Any]) -> None:
    """Run the ticks cron triggers with ``catch_up`` missed (``docs/flow-control.md``).
    A failure is logged, not raised: the workflow is stored, and the next tick catches
    up again."""
    from relayflow.observability import logger

    try:
        catch_up(tenant, workflow_id, triggers)
    except (ApiError, DataAccessError, sfn_api.StepFunctionsError) as exc:
        logger.warning(
            "catch-up of missed ticks failed; the next tick tries again",
            extra={"tenant": tenant, "workflow_id": workflow_id, "reason": str(exc)},
        )


def point_alias(ports: Ports, head: WorkflowItem) -> None:
    """Point the workflow's ``live`` alias at its live version (recorded on the head)."""
    alias_arn = ports.machines.point_alias(head.state_machine_arn, head.live_version_arn)
    if alias_arn != head.alias_arn:
        ports.dal.update_workflow(head.tenant, head.workflow_id, alias_arn=alias_arn)
