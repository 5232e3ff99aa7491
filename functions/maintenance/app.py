"""The maintenance function: every minute, start the DLQ's automatic retries that are due."""

from typing import Any

from relayflow.control.service import get_control_plane
from relayflow.observability import function_handler


@function_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return get_control_plane().dlq.retry_due()
