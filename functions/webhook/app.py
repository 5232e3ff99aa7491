"""The webhook function: public ``POST /hooks/{slug}`` deliveries → verified, deduplicated runs."""

from typing import Any

from relayflow.observability import function_handler
from relayflow.triggers.webhook import handle_webhook


@function_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_webhook(event, context)
