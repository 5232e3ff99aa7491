"""``relayflow approvals`` and ``relayflow waitpoints``: find and answer what runs wait for,
over the control API."""

from __future__ import annotations

import argparse
from typing import Any

from relayflow.cli.api import (
    api_client,
    api_options,
    call_and_print,
    list_page,
    page_query,
    segment,
)
from relayflow.cli.inputs import json_option
from relayflow.cli.output import EXIT_OK, print_json


def approval_line(approval: dict[str, Any]) -> str:
    """One line for an approval request: id, status, title and the decision when made."""
    decision = approval.get("decision") or {}
    decided = f"  {decision['option']} by {decision['responder']}" if decision else ""
    return f"{approval['approval_id']}  {approval['status']}  {approval['title']}{decided}"


def cmd_approvals_list(args: argparse.Namespace) -> int:
    return list_page(
        args,
        "/approvals",
        page_query(args),
        ("approval", "status", "workflow", "step", "title", "options", "expires"),
        lambda a: (
            a["approval_id"],
            a["status"],
            a["workflow_id"],
            a["step"],
            a["title"],
            "/".join(a["options"]),
            a.get("expires_at") or "",
        ),
    )


def cmd_approvals_get(args: argparse.Namespace) -> int:
    return call_and_print(args, "GET", f"/approvals/{segment(args.approval_id)}")


def cmd_approvals_respond(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"option": args.option}
    data = json_option(args.data, "--data")
    if data is not None:
        body["data"] = data
    return call_and_print(
        args, "POST", f"/approvals/{segment(args.approval_id)}/respond", approval_line, json=body
    )


def waitpoint_line(waitpoint: dict[str, Any]) -> str:
    """One line for a waitpoint: id, status, run and label (or step)."""
    return (
        f"{waitpoint['waitpoint_id']}  {waitpoint['status']}  run {waitpoint['run_id']}  "
        f"{waitpoint.get('label') or waitpoint['step']}"
    )


def cmd_waitpoints_list(args: argparse.Namespace) -> int:
    params = {"run_id": args.run} if args.run else {"idempotency_key": args.key}
    with api_client(args) as api:
        _, page = api.call("GET", "/waitpoints", params=params)
    if args.json:
        print_json(page)
    else:
        for waitpoint in page["items"]:
            print(waitpoint_line(waitpoint))
    return EXIT_OK


def cmd_waitpoints_get(args: argparse.Namespace) -> int:
    return call_and_print(args, "GET", f"/waitpoints/{segment(args.waitpoint_id)}")


def cmd_waitpoints_complete(args: argparse.Namespace) -> int:
    body = {"data": json_option(args.data, "--data")}
    path = f"/waitpoints/{segment(args.waitpoint_id)}/complete"
    return call_and_print(args, "POST", path, waitpoint_line, json=body)


def cmd_waitpoints_fail(args: argparse.Namespace) -> int:
    body = {"error": args.error, "message": args.message}
    path = f"/waitpoints/{segment(args.waitpoint_id)}/fail"
    return call_and_print(args, "POST", path, waitpoint_line, json=body)


def add_wait_commands(sub: Any) -> None:
    """``relayflow approvals list|get|respond`` and ``relayflow waitpoints
    list|get|complete|fail``."""
    approvals = sub.add_parser(
        "approvals", help="list and decide approval requests"
    ).add_subparsers(dest="approvals_command", required=True)
    p = approvals.add_parser("list", help="approval requests, oldest first (default: pending)")
    p.add_argument("--status", choices=("pending", "decided", "expired"), default="pending")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--next-token")
    api_options(p)
    p.set_defaults(func=cmd_approvals_list)
    p = approvals.add_parser("get", help="one approval request")
    p.add_argument("approval_id")
    api_options(p)
    p.set_defaults(func=cmd_approvals_get)
    p = approvals.add_parser("respond", help="decide an approval request; the run resumes")
    p.add_argument("approval_id")
    p.add_argument("--option", required=True, help="one of the request's options")
    p.add_argument("--data", help="form data as JSON, or @file")
    api_options(p)
    p.set_defaults(func=cmd_approvals_respond)

    waitpoints = sub.add_parser(
        "waitpoints", help="find, complete and fail waitpoints"
    ).add_subparsers(dest="waitpoints_command", required=True)
    p = waitpoints.add_parser("list", help="a run's waitpoints, or the one a key names")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", help="a run id")
    which.add_argument("--key", help="a rendered idempotency key")
    api_options(p)
    p.set_defaults(func=cmd_waitpoints_list)
    p = waitpoints.add_parser("get", help="one waitpoint")
    p.add_argument("waitpoint_id")
    api_options(p)
    p.set_defaults(func=cmd_waitpoints_get)
    p = waitpoints.add_parser("complete", help="complete a waitpoint; the run resumes")
    p.add_argument("waitpoint_id")
    p.add_argument("--data", help="the step's output as JSON, or @file")
    api_options(p)
    p.set_defaults(func=cmd_waitpoints_complete)
    p = waitpoints.add_parser("fail", help="fail a waitpoint; the run takes its failure route")
    p.add_argument("waitpoint_id")
    p.add_argument("--error", help="a short error code")
    p.add_argument("--message", help="what went wrong")
    api_options(p)
    p.set_defaults(func=cmd_waitpoints_fail)
