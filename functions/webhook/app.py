"""The webhook function: public ``POST /hooks/{slug}`` deliveries → verified, deduplicated runs."""

from typing import Any

from relayflow.observability import logger
from relayflow.triggers.webhook import handle_webhook


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_webhook(event, context)
