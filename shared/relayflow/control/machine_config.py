"""How the control plane configures a workflow's state machine beyond its definition: the
execution role it runs under and what it logs."""

from __future__ import annotations

from typing import Any

from relayflow.definition.models import Workflow


def machine_config(tenant: str, workflow: Workflow) -> dict[str, Any]:
    """Keyword arguments of :meth:`StateMachines.create` / ``update`` for ``workflow`` of
    ``tenant``: ``role_arn`` and ``step_events`` (``events: {steps: true}``)."""
    from relayflow.settings import get_settings

    return {
        "role_arn": get_settings().state_machine_role_arn,
        "step_events": workflow.events.steps,
    }
