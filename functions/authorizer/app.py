"""The authorizer function: API Gateway's REQUEST authorizer (API key → tenant)."""

from typing import Any

from relayflow.api.auth import authorize
from relayflow.observability import function_handler


@function_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return authorize(event)
