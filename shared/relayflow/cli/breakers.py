"""``relayflow breakers list|reset``: the tenant's circuit breakers, over the control API."""

from __future__ import annotations

import argparse
from typing import Any

from relayflow.cli.api import api_command, endpoint, list_page, page_query
from relayflow.cli.parsing import arg, command_group, page_arguments


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


cmd_breakers_reset = endpoint(
    "POST",
    "/breakers/{breaker_id}/reset",
    lambda breaker: f"breaker {breaker['breaker_id']}: {breaker['state']}",
)


def add_breakers_commands(sub: Any) -> None:
    """``relayflow breakers list|reset``."""
    breakers = command_group(sub, "breakers", "circuit breakers: list, reset")
    api_command(
        breakers,
        "list",
        "the tenant's breakers and their state",
        cmd_breakers_list,
        *page_arguments(50),
    )
    api_command(
        breakers,
        "reset",
        "close a breaker now",
        cmd_breakers_reset,
        arg("breaker_id", help="tool:<name> or workflow:<id>"),
    )
