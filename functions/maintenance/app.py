"""The maintenance function: every minute, start the DLQ's automatic retries that are due and
settle the Express runs whose deadline passed (relayflow.control.express_sweep)."""

from typing import Any

from relayflow.control.express_sweep import sweep_express_runs
from relayflow.control.service import get_control_plane
from relayflow.observability import function_handler


@function_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    control = get_control_plane()
    return {**control.dlq.retry_due(), "express": sweep_express_runs(control)}
