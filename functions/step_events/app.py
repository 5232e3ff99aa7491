"""The step-events function: a state machine's CloudWatch Logs → per-step lifecycle events."""

from typing import Any

from relayflow.control.step_events import handle_subscription
from relayflow.observability import function_handler


@function_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_subscription(event)
