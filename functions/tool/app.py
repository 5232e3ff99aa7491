"""The tool step function: calls a built-in AWS action or a declared HTTP tool."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import tool


@step_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return tool.run(event)
