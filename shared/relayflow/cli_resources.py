"""CLI commands over the control API for what the console also shows: ``runs rerun`` (a new
run from a chosen step), ``workflows list|get`` and ``breakers list|reset``. Registered by
:mod:`relayflow.cli_api`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

EXIT_OK = 0


def cmd_runs_rerun(args: argparse.Namespace) -> int:
    """``POST /runs/{id}/rerun``: the new run's id, where it starts and on which version."""
    from relayflow.cli_api import api_client, print_json

    body = {"from_step": args.from_step, "version": "current" if args.current else "pinned"}
    with api_client(args) as api:
        _, run = api.call("POST", f"/runs/{quote(args.run_id, safe='')}/rerun", json=body)
    if args.json:
        print_json(run)
    else:
        print(
            f"run {run['run_id']}: rerun of {args.run_id} from {args.from_step}, "
            f"version {run.get('version')}, {run.get('status')}"
        )
    return EXIT_OK


def cmd_workflows_list(args: argparse.Namespace) -> int:
    from relayflow.cli_api import api_client, page_query, print_page

    with api_client(args) as api:
        _, page = api.call("GET", "/workflows", params=page_query(args))
    return print_page(
        args,
        page,
        ("workflow", "live", "latest", "engine", "enabled", "updated"),
        lambda w: (
            w["workflow_id"],
            str(w.get("live_version")),
            str(w.get("latest_version")),
            str(w.get("engine") or ""),
            "yes" if w.get("enabled", True) else "no",
            str(w.get("updated_at") or ""),
        ),
    )


def cmd_workflows_get(args: argparse.Namespace) -> int:
    from relayflow.cli_api import api_client, print_json

    with api_client(args) as api:
        _, workflow = api.call("GET", f"/workflows/{quote(args.workflow_id, safe='')}")
    if args.json:
        print_json(workflow)
        return EXIT_OK
    print(
        f"workflow {workflow['workflow_id']} ({workflow.get('name') or 'no name'}): live version "
        f"{workflow.get('live_version')} of {workflow.get('latest_version')}, "
        f"{'enabled' if workflow.get('enabled', True) else 'disabled'}"
    )
    for version in workflow.get("versions") or []:
        live = "  live" if version["version"] == workflow.get("live_version") else ""
        print(f"  version {version['version']}  {version.get('created_at')}{live}")
    return EXIT_OK


def cmd_breakers_list(args: argparse.Namespace) -> int:
    from relayflow.cli_api import api_client, page_query, print_page

    with api_client(args) as api:
        _, page = api.call("GET", "/breakers", params=page_query(args))
    return print_page(
        args,
        page,
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
    from relayflow.cli_api import api_client, print_json

    with api_client(args) as api:
        _, breaker = api.call("POST", f"/breakers/{quote(args.breaker_id, safe='')}/reset")
    if args.json:
        print_json(breaker)
    else:
        print(f"breaker {breaker['breaker_id']}: {breaker['state']}")
    return EXIT_OK


def add_rerun_parser(runs: Any, api_options: Callable[[argparse.ArgumentParser], None]) -> None:
    p = runs.add_parser("rerun", help="start a new run of a run's trigger from a chosen step")
    p.add_argument("run_id")
    p.add_argument("--from", dest="from_step", required=True, help="the main-flow step to start at")
    p.add_argument(
        "--current", action="store_true", help="run the live version (default: the run's own)"
    )
    api_options(p)
    p.set_defaults(func=cmd_runs_rerun)


def add_resource_commands(sub: Any, api_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """``relayflow workflows list|get`` and ``relayflow breakers list|reset``."""
    workflows = sub.add_parser("workflows", help="the tenant's workflows").add_subparsers(
        dest="workflows_command", required=True
    )
    p = workflows.add_parser("list", help="workflows with their live and latest versions")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--next-token")
    api_options(p)
    p.set_defaults(func=cmd_workflows_list)
    p = workflows.add_parser("get", help="one workflow and its versions")
    p.add_argument("workflow_id")
    api_options(p)
    p.set_defaults(func=cmd_workflows_get)

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
