"""The llm_batch step function: submits a batch job, and answers the compiled poll's status
checks."""

from typing import Any

from relayflow.observability import step_handler
from relayflow.steps import llm_batch


@step_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return llm_batch.run(event, context)
