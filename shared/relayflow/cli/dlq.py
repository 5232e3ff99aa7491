"""``relayflow dlq``: the dead-letter queue of failed runs over the control API: list, get,
retry, discard."""

from __future__ import annotations

import argparse
from typing import Any

from relayflow.cli.api import api_command, endpoint, list_page, page_query
from relayflow.cli.parsing import arg, command_group, page_arguments


def cmd_dlq_list(args: argparse.Namespace) -> int:
    return list_page(
        args,
        "/dlq",
        page_query(args),
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


def add_dlq_commands(sub: Any) -> None:
    """``relayflow dlq list|get|retry|discard``."""
    dlq = command_group(sub, "dlq", "failed runs: list, retry, discard")
    api_command(
        dlq,
        "list",
        "the dead-letter queue, newest first",
        cmd_dlq_list,
        arg("--status", choices=("pending", "retrying", "retried", "exhausted", "discarded")),
        *page_arguments(20),
    )
    for name, func, text in (
        ("get", cmd_dlq_get, "one entry: error, failing step, outputs so far, retry state"),
        ("retry", cmd_dlq_retry, "restart the run under its run id; finished steps are kept"),
        ("discard", cmd_dlq_discard, "no more retries for this run"),
    ):
        api_command(dlq, name, text, func, arg("run_id"))
