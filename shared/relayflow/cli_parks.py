"""CLI commands for parked runs (``on_error: {action: park}``, docs/reliability.md):
``relayflow runs list --parked`` and ``relayflow runs resume``. Registered by
:mod:`relayflow.cli_api`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any


def cmd_runs_list_parked(args: argparse.Namespace) -> int:
    """The tenant's parked runs, longest parked first: where each waits and why."""
    from relayflow.cli_api import api_client, print_page

    params: dict[str, Any] = {"status": "parked", "limit": args.limit}
    if args.next_token:
        params["next_token"] = args.next_token
    with api_client(args) as api:
        _, page = api.call("GET", "/runs", params=params)
    return print_page(
        args,
        page,
        ("run", "workflow", "step", "parked at", "deadline", "error"),
        lambda run: (
            run["run_id"],
            run["workflow_id"],
            (run.get("parked") or {}).get("step") or "",
            (run.get("parked") or {}).get("parked_at") or "",
            (run.get("parked") or {}).get("deadline") or "",
            str(((run.get("parked") or {}).get("error") or {}).get("Error") or ""),
        ),
    )


def _json_argument(text: str | None, what: str) -> Any:
    """A ``--output`` / ``--context`` value: JSON text, or ``@file`` holding it."""
    if text is None:
        return None
    if text.startswith("@"):
        with open(text[1:], encoding="utf-8") as handle:
            text = handle.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"relayflow: --{what} is not JSON: {exc}") from None


def cmd_runs_resume(args: argparse.Namespace) -> int:
    """Resume a parked run: retry its failed step, skip it with an output, or fail it."""
    from urllib.parse import quote

    from relayflow.cli import EXIT_OK
    from relayflow.cli_api import api_client, print_json

    body: dict[str, Any] = {"action": args.action}
    output = _json_argument(args.output, "output")
    if output is not None:
        body["output"] = output
    context = _json_argument(args.context, "context")
    if context is not None:
        body["context"] = context
    with api_client(args) as api:
        _, answer = api.call("POST", f"/runs/{quote(args.run_id, safe='')}/resume", json=body)
    if args.json:
        print_json(answer)
    else:
        print(f"run {answer['run_id']}: step {answer['step']} — {answer['action']}; running again")
    return EXIT_OK


def add_resume_parser(runs: argparse._SubParsersAction, api_options: Callable) -> None:
    """``relayflow runs resume RUN_ID --action retry|skip|fail [--output J] [--context J]``."""
    p = runs.add_parser("resume", help="resume a parked run: retry, skip or fail its step")
    p.add_argument("run_id")
    p.add_argument("--action", required=True, choices=("retry", "skip", "fail"))
    p.add_argument("--output", help="skip: the step's output (JSON, or @file)")
    p.add_argument("--context", help="a JSON object merged into the run's trigger data (or @file)")
    api_options(p)
    p.set_defaults(func=cmd_runs_resume)
