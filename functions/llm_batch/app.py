"""The llm_batch step function: submits a batch job, and answers the compiled poll's status
checks."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import llm_batch
from relayflow.steps.boundary import step_boundary
from relayflow.steps.effects import Effects


@step_handler
@step_boundary()
def handler(event: dict[str, Any], context: Any, effects: Effects) -> dict[str, Any]:
    return llm_batch.run(event, context, effects)
