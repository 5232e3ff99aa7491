"""The webhook function: public ``POST /hooks/{slug}`` deliveries → verified, deduplicated runs."""

from typing import Any

from relayflow.control.webhook_intake import handle_webhook
from relayflow.observability import function_handler


@function_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # The composition root loads at the first delivery, not at init (as it did when
    # handle_webhook fetched it itself), keeping the import of the handler light.
    from relayflow.control.service import get_control_plane

    return handle_webhook(event, context, control=get_control_plane())
