"""The tool step function: calls a built-in AWS action or a declared HTTP tool."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import tool
from relayflow.steps.boundary import step_boundary
from relayflow.steps.effects import Effects


@step_handler
@step_boundary(recorded=True, flow_controlled=True)
def handler(event: dict[str, Any], context: Any, effects: Effects) -> dict[str, Any]:
    return tool.run(event, effects)
