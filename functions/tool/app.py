"""The tool step function: calls a built-in AWS action or a declared HTTP tool."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import tool
from relayflow.steps.guard import flow_controlled
from relayflow.steps.idempotency import recorded_step


@step_handler
@recorded_step
@flow_controlled
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return tool.run(event)
