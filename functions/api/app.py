"""The API function: the control plane's HTTP API behind API Gateway (REST, proxy events)."""

from typing import Any

from relayflow.api.app import handle
from relayflow.observability import function_handler


@function_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, context)
