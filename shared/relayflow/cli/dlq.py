"""``relayflow dlq``: the dead-letter queue of failed runs over the control API: list, get,
retry, discard."""

from __future__ import annotations

import argparse
from typing import Any

from relayflow.cli.api import api_options, call_and_print, list_page, page_query, segment


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


def cmd_dlq_get(args: argparse.Namespace) -> int:
    return call_and_print(args, "GET", f"/dlq/{segment(args.run_id)}")


def cmd_dlq_retry(args: argparse.Namespace) -> int:
    return call_and_print(
        args,
        "POST",
        f"/dlq/{segment(args.run_id)}/retry",
        lambda result: f"run {result['run_id']} restarted (attempt {result['attempt']})",
    )


def cmd_dlq_discard(args: argparse.Namespace) -> int:
    return call_and_print(
        args,
        "DELETE",
        f"/dlq/{segment(args.run_id)}",
        lambda entry: f"run {entry['run_id']} discarded from the DLQ",
    )


def add_dlq_commands(sub: Any) -> None:
    """``relayflow dlq list|get|retry|discard``."""
    dlq = sub.add_parser("dlq", help="failed runs: list, retry, discard").add_subparsers(
        dest="dlq_command", required=True
    )
    p = dlq.add_parser("list", help="the dead-letter queue, newest first")
    p.add_argument("--status", choices=("pending", "retrying", "retried", "exhausted", "discarded"))
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--next-token")
    api_options(p)
    p.set_defaults(func=cmd_dlq_list)
    for name, func, text in (
        ("get", cmd_dlq_get, "one entry: error, failing step, outputs so far, retry state"),
        ("retry", cmd_dlq_retry, "restart the run under its run id; finished steps are kept"),
        ("discard", cmd_dlq_discard, "no more retries for this run"),
    ):
        p = dlq.add_parser(name, help=text)
        p.add_argument("run_id")
        api_options(p)
        p.set_defaults(func=func)
