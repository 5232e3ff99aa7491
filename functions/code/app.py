"""The code step function: runs user Python in a child process with no environment and
resource limits. Its role holds nothing but the step-result records of the table (see
docs/code-step.md and relayflow.steps.idempotency)."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import code
from relayflow.steps.boundary import step_boundary
from relayflow.steps.effects import Effects


@step_handler
@step_boundary(recorded=True, flow_controlled=True)
def handler(event: dict[str, Any], context: Any, effects: Effects) -> dict[str, Any]:
    return code.run(event)
