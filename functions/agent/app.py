"""The agent step function: a model in a tool loop whose tool gating is enforced in code."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import agent
from relayflow.steps.guard import flow_controlled


@step_handler
@flow_controlled
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return agent.run(event, context)
