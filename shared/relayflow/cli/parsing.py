"""Building the parser of a command group: arguments written as to ``add_argument``, and the
group's subcommand parser. Imports no other CLI module."""

from __future__ import annotations

from typing import Any

#: One argument of a command: the names and the options ``add_argument`` takes (:func:`arg`).
Argument = tuple[tuple[str, ...], dict[str, Any]]


def arg(*names: str, **options: Any) -> Argument:
    """An argument of a command, written as to ``add_argument``."""
    return names, options


def page_arguments(limit: int) -> tuple[Argument, Argument]:
    """``--limit`` (default ``limit``) and ``--next-token``: the arguments of a list command."""
    return arg("--limit", type=int, default=limit), arg("--next-token")


def command_group(sub: Any, name: str, help_text: str) -> Any:
    """The command group ``relayflow <name> ...`` (its subcommand is in ``<name>_command``):
    the subparsers action its commands are added to."""
    return sub.add_parser(name, help=help_text).add_subparsers(
        dest=f"{name}_command", required=True
    )
