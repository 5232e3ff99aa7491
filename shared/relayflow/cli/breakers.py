"""``relayflow breakers list|reset``: the tenant's circuit breakers, over the control API."""

from __future__ import annotations

import argparse
from typing import Any

from relayflow.cli.api import api_options, call_and_print, list_page, page_query, segment


def cmd_breakers_list(args: argparse.Namespace) -> int:
    return list_page(
        args,
        "/breakers",
        page_query(args),
        ("breaker", "state", "failures", "trips", "reopens at", "last error"),
        lambda b: (
            b["breaker_id"],
            b["state"],
            f"{b.get('consecutive_failures')}/{b.get('failure_threshold') or '-'}",
            str(b.get("trips")),
            str(b.get("reopens_at") or ""),
            str(b.get("last_error") or ""),
        ),
    )


def cmd_breakers_reset(args: argparse.Namespace) -> int:
    return call_and_print(
        args,
        "POST",
        f"/breakers/{segment(args.breaker_id)}/reset",
        lambda breaker: f"breaker {breaker['breaker_id']}: {breaker['state']}",
    )


def add_breakers_commands(sub: Any) -> None:
    """``relayflow breakers list|reset``."""
    breakers = sub.add_parser("breakers", help="circuit breakers: list, reset").add_subparsers(
        dest="breakers_command", required=True
    )
    p = breakers.add_parser("list", help="the tenant's breakers and their state")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--next-token")
    api_options(p)
    p.set_defaults(func=cmd_breakers_list)
    p = breakers.add_parser("reset", help="close a breaker now")
    p.add_argument("breaker_id", help="tool:<name> or workflow:<id>")
    api_options(p)
    p.set_defaults(func=cmd_breakers_reset)
