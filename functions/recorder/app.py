"""The recorder function: Step Functions status changes → run items and lifecycle events."""

from typing import Any

from relayflow.control.recorder import record_status_change
from relayflow.control.service import get_control_plane
from relayflow.observability import function_handler


@function_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return record_status_change(event, control=get_control_plane())
