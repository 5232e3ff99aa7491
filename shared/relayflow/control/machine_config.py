"""How the control plane configures a workflow's state machine beyond its definition: the
execution role it runs under and what it logs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from relayflow.definition.models import Workflow


def machine_config(tenant: str, workflow: Workflow) -> dict[str, Any]:
    """Keyword arguments of :meth:`StateMachines.create` / ``update`` for ``workflow`` of
    ``tenant``: ``role_arn`` and ``step_events`` (``events: {steps: true}``).

    The role is the stack's shared ``StateMachineRole``, except for a workflow with a
    templated ``sub_workflow`` target when the stack declares the tenant policy
    (``tenant_state_machine_policy_arn``): then the tenant's own role
    (:mod:`relayflow.control.tenant_roles`), which can start only the tenant's machines."""
    from relayflow.control.tenant_roles import needs_tenant_role, tenant_roles
    from relayflow.settings import get_settings

    settings = get_settings()
    role_arn = settings.state_machine_role_arn
    if settings.tenant_state_machine_policy_arn and needs_tenant_role(workflow):
        role_arn = tenant_roles().ensure(
            tenant,
            stage=settings.stage,
            policy_arn=settings.tenant_state_machine_policy_arn,
            account=role_arn.split(":")[4],
        )
    return {"role_arn": role_arn, "step_events": workflow.events.steps}
