"""CLI commands for run control (``docs/run-modes.md``): ``relayflow runs continue`` and the
step prompt of ``relayflow run --step``. Registered by :mod:`relayflow.cli`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable


def cmd_runs_continue(args: argparse.Namespace) -> int:
    """Release the next step of a step-through run (``--to-end``: let it finish)."""
    from urllib.parse import quote

    from relayflow.cli import EXIT_OK
    from relayflow.cli_api import api_client, print_json

    body = {"to_end": True} if args.to_end else {}
    with api_client(args) as api:
        _, answer = api.call("POST", f"/runs/{quote(args.run_id, safe='')}/continue", json=body)
    if args.json:
        print_json(answer)
    elif answer.get("released"):
        rest = " and runs to its end" if answer.get("to_end") else ""
        print(f"run {answer['run_id']}: step {answer['released']} released{rest}")
    else:
        print(f"run {answer['run_id']}: runs to its end")
    return EXIT_OK


def step_prompt(ask: Callable[[str], str] = input) -> Callable[[str], bool]:
    """The ``--step`` callback: before each step, ask; Enter runs it, ``c`` runs to the end
    (so does a closed input: nobody is there to answer)."""

    def before(step: str) -> bool:
        try:
            answer = ask(f"next: step {step} — Enter runs it, c runs to the end: ")
        except EOFError:
            print(file=sys.stderr)
            return False
        return answer.strip().lower() not in ("c", "continue")

    return before


def add_continue_parser(runs: argparse._SubParsersAction, api_options: Callable) -> None:
    """``relayflow runs continue RUN_ID [--to-end]``."""
    p = runs.add_parser("continue", help="release the next step of a step-through run")
    p.add_argument("run_id")
    p.add_argument("--to-end", action="store_true", help="let the run finish without pausing")
    api_options(p)
    p.set_defaults(func=cmd_runs_continue)
