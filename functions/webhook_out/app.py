"""The webhook_out step function: sends one (optionally signed) HTTP request."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import webhook_out
from relayflow.steps.guard import flow_controlled
from relayflow.steps.idempotency import recorded_step


@step_handler
@recorded_step
@flow_controlled
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return webhook_out.run(event)
