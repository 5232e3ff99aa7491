"""The code step function: runs user Python in a child process with no environment and
resource limits. Its role holds nothing but the step-result records of the table (see
docs/code-step.md and relayflow.steps.idempotency)."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import code
from relayflow.steps.guard import flow_controlled
from relayflow.steps.idempotency import recorded_step


@step_handler
@recorded_step
@flow_controlled
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return code.run(event)
