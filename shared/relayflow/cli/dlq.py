"""``relayflow dlq``: the dead-letter queue of failed runs over the control API: list, get,
retry, discard."""

from __future__ import annotations

from typing import Any

from relayflow.cli.api import api_commands, endpoint, list_command
from relayflow.cli.parsing import arg, command_group, page_arguments

cmd_dlq_list = list_command(
    "/dlq",
    ("run", "workflow", "status", "step", "error", "retries", "next retry"),
    lambda entry: (
        entry["run_id"],
        entry["workflow_id"],
        entry["status"],
        entry.get("failing_step") or "",
        entry.get("error") or "",
        str(entry["attempts"]),
        entry.get("next_retry_at") or "",
    ),
)


cmd_dlq_get = endpoint("GET", "/dlq/{run_id}")


cmd_dlq_retry = endpoint(
    "POST",
    "/dlq/{run_id}/retry",
    lambda result: f"run {result['run_id']} restarted (attempt {result['attempt']})",
)


cmd_dlq_discard = endpoint(
    "DELETE", "/dlq/{run_id}", lambda entry: f"run {entry['run_id']} discarded from the DLQ"
)


_STATUSES = ("pending", "retrying", "retried", "exhausted", "discarded")
_RUN_ID = arg("run_id")

#: ``relayflow dlq ...``: each command's name, help line, function and arguments.
_COMMANDS = (
    (
        "list",
        "the dead-letter queue, newest first",
        cmd_dlq_list,
        arg("--status", choices=_STATUSES),
        *page_arguments(20),
    ),
    ("get", "one entry: error, failing step, outputs so far, retry state", cmd_dlq_get, _RUN_ID),
    ("retry", "restart the run under its run id; finished steps are kept", cmd_dlq_retry, _RUN_ID),
    ("discard", "no more retries for this run", cmd_dlq_discard, _RUN_ID),
)


def add_dlq_commands(sub: Any) -> None:
    """``relayflow dlq list|get|retry|discard``."""
    api_commands(command_group(sub, "dlq", "failed runs: list, retry, discard"), _COMMANDS)
