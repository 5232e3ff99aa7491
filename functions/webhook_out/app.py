"""The webhook_out step function: sends one (optionally signed) HTTP request."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import webhook_out
from relayflow.steps.boundary import step_boundary
from relayflow.steps.effects import Effects


@step_handler
@step_boundary(recorded=True, flow_controlled=True)
def handler(event: dict[str, Any], context: Any, effects: Effects) -> dict[str, Any]:
    return webhook_out.run(event, effects)
