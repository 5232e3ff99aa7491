"""The webhook_out step function: sends one (optionally signed) HTTP request."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import webhook_out


@step_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return webhook_out.run(event)
