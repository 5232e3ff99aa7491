"""The approval step function: stores an approval request; the run waits for its decision."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import approval
from relayflow.steps.boundary import step_boundary
from relayflow.steps.effects import Effects


@step_handler
@step_boundary()
def handler(event: dict[str, Any], context: Any, effects: Effects) -> dict[str, Any]:
    return approval.run(event, effects)
