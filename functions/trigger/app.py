"""The trigger function: a schedule that fired or an event a subscription rule matched → a run."""

from typing import Any

from relayflow.control.dispatch import handle_trigger
from relayflow.observability import function_handler


@function_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from relayflow.control.service import get_control_plane

    return handle_trigger(event, control=get_control_plane())
