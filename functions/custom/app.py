"""The custom step function: POSTs the step context to a user URL and routes on its answer."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import custom
from relayflow.steps.guard import flow_controlled
from relayflow.steps.idempotency import recorded_step


@step_handler
@recorded_step
@flow_controlled
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return custom.run(event)
