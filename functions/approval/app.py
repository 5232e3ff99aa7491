"""The approval step function: stores an approval request; the run waits for its decision."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import approval


@step_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return approval.run(event)
