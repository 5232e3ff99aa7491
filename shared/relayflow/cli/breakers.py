"""``relayflow breakers list|reset``: the tenant's circuit breakers, over the control API."""

from __future__ import annotations

from typing import Any

from relayflow.cli.api import api_commands, endpoint, list_command
from relayflow.cli.parsing import arg, command_group, page_arguments

cmd_breakers_list = list_command(
    "/breakers",
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


_BREAKER_ID = "tool:<name> or workflow:<id>"

cmd_breakers_reset = endpoint(
    "POST",
    "/breakers/{breaker_id}/reset",
    lambda breaker: f"breaker {breaker['breaker_id']}: {breaker['state']}",
)


#: ``relayflow breakers ...``: each command's name, help line, function and arguments.
_COMMANDS = (
    ("list", "the tenant's breakers and their state", cmd_breakers_list, *page_arguments(50)),
    ("reset", "close a breaker now", cmd_breakers_reset, arg("breaker_id", help=_BREAKER_ID)),
)


def add_breakers_commands(sub: Any) -> None:
    """``relayflow breakers list|reset``."""
    api_commands(command_group(sub, "breakers", "circuit breakers: list, reset"), _COMMANDS)
