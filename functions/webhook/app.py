"""The webhook function: public ``POST /hooks/{slug}`` deliveries → verified, deduplicated runs."""

from typing import Any

from relayflow.control.service import get_control_plane
from relayflow.control.webhook_intake import handle_webhook
from relayflow.observability import function_handler


@function_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_webhook(event, context, control=get_control_plane())
