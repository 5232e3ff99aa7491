"""The agent step function: a model in a tool loop whose tool gating is enforced in code."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import agent
from relayflow.steps.boundary import step_boundary
from relayflow.steps.effects import Effects


@step_handler
@step_boundary(flow_controlled=True)
def handler(event: dict[str, Any], context: Any, effects: Effects) -> dict[str, Any]:
    return agent.run(event, context, effects)
