"""The condition step function: runs condition steps that do not compile to a native state."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import condition
from relayflow.steps.guard import flow_controlled


@step_handler
@flow_controlled
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return condition.run(event)
