"""The code step function: runs user Python in a child process with no environment and
resource limits. Its role has no permissions (see docs/code-step.md)."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import code
from relayflow.steps.guard import flow_controlled


@step_handler
@flow_controlled
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return code.run(event)
