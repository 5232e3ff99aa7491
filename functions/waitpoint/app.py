"""The waitpoint step function: stores a waitpoint; the run waits until it is completed."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import waitpoint


@step_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return waitpoint.run(event)
