"""The custom step function: POSTs the step context to a user URL and routes on its answer."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import custom
from relayflow.steps.boundary import step_boundary
from relayflow.steps.effects import Effects


@step_handler
@step_boundary(recorded=True, flow_controlled=True)
def handler(event: dict[str, Any], context: Any, effects: Effects) -> dict[str, Any]:
    return custom.run(event, effects)
