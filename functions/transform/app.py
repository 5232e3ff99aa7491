"""The transform step function: runs transform steps that do not compile to a native state."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import transform
from relayflow.steps.boundary import step_boundary
from relayflow.steps.effects import Effects


@step_handler
@step_boundary(flow_controlled=True)
def handler(event: dict[str, Any], context: Any, effects: Effects) -> dict[str, Any]:
    return transform.run(event)
