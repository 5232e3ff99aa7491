"""``relayflow approvals`` and ``relayflow waitpoints``: find and answer what runs wait for,
over the control API."""

from __future__ import annotations

import argparse
from typing import Any

from relayflow.cli.api import (
    api_client,
    api_commands,
    api_options,
    call_and_print,
    endpoint,
    list_page,
    page_query,
    segment,
)
from relayflow.cli.inputs import json_option
from relayflow.cli.output import EXIT_OK, print_json
from relayflow.cli.parsing import arg, command_group, page_arguments


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


cmd_approvals_get = endpoint("GET", "/approvals/{approval_id}")


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


cmd_waitpoints_get = endpoint("GET", "/waitpoints/{waitpoint_id}")


cmd_waitpoints_complete = endpoint(
    "POST",
    "/waitpoints/{waitpoint_id}/complete",
    waitpoint_line,
    body=lambda args: {"data": json_option(args.data, "--data")},
)


cmd_waitpoints_fail = endpoint(
    "POST",
    "/waitpoints/{waitpoint_id}/fail",
    waitpoint_line,
    body=lambda args: {"error": args.error, "message": args.message},
)


_APPROVAL_ID, _WAITPOINT_ID = arg("approval_id"), arg("waitpoint_id")

#: ``relayflow approvals ...``: each command's name, help line, function and arguments.
_APPROVAL_COMMANDS = (
    (
        "list",
        "approval requests, oldest first (default: pending)",
        cmd_approvals_list,
        arg("--status", choices=("pending", "decided", "expired"), default="pending"),
        *page_arguments(20),
    ),
    ("get", "one approval request", cmd_approvals_get, _APPROVAL_ID),
    (
        "respond",
        "decide an approval request; the run resumes",
        cmd_approvals_respond,
        _APPROVAL_ID,
        arg("--option", required=True, help="one of the request's options"),
        arg("--data", help="form data as JSON, or @file"),
    ),
)

#: ``relayflow waitpoints ...`` after ``list`` (whose ``--run`` and ``--key`` exclude each
#: other): each command's name, help line, function and arguments.
_WAITPOINT_COMMANDS = (
    ("get", "one waitpoint", cmd_waitpoints_get, _WAITPOINT_ID),
    (
        "complete",
        "complete a waitpoint; the run resumes",
        cmd_waitpoints_complete,
        _WAITPOINT_ID,
        arg("--data", help="the step's output as JSON, or @file"),
    ),
    (
        "fail",
        "fail a waitpoint; the run takes its failure route",
        cmd_waitpoints_fail,
        _WAITPOINT_ID,
        arg("--error", help="a short error code"),
        arg("--message", help="what went wrong"),
    ),
)


def add_wait_commands(sub: Any) -> None:
    """``relayflow approvals list|get|respond`` and ``relayflow waitpoints
    list|get|complete|fail``."""
    api_commands(
        command_group(sub, "approvals", "list and decide approval requests"), _APPROVAL_COMMANDS
    )
    waitpoints = command_group(sub, "waitpoints", "find, complete and fail waitpoints")
    p = waitpoints.add_parser("list", help="a run's waitpoints, or the one a key names")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", help="a run id")
    which.add_argument("--key", help="a rendered idempotency key")
    api_options(p)
    p.set_defaults(func=cmd_waitpoints_list)
    api_commands(waitpoints, _WAITPOINT_COMMANDS)
