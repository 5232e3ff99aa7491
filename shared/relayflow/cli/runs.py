"""``relayflow runs``: start, inspect, list and cancel runs over the control API, and control
them: ``continue`` a step-through run (docs/run-modes.md), ``resume`` a parked one
(docs/reliability.md), ``rerun`` one from a chosen step."""

from __future__ import annotations

import argparse
import json
from typing import Any

from relayflow.cli.api import (
    api_client,
    api_commands,
    call_and_print,
    endpoint,
    list_page,
    page_query,
    segment,
)
from relayflow.cli.inputs import read_input
from relayflow.cli.output import (
    EXIT_OK,
    error_text,
    print_json,
    readable_cause,
    summary,
    table_lines,
    would_call_summary,
)
from relayflow.cli.parsing import arg, command_group, page_arguments


def run_line(run: dict[str, Any]) -> str:
    """One line for a run: its status, time, error and outcome, workflow and version."""
    ms = f" in {run['duration_ms']:.0f} ms" if run.get("duration_ms") is not None else ""
    error = f" ({run['error']})" if run.get("error") else ""
    outcome = f", outcome {run['outcome']}" if run.get("outcome") else ""
    return (
        f"run {run['run_id']}: {str(run['status']).upper()}{ms}{error}{outcome} "
        f"(workflow {run['workflow_id']}, version {run.get('version')})"
    )


def cmd_runs_start(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"input": read_input(args.input)}
    if args.version is not None:
        body["version"] = args.version
    if args.dry_run:
        body["dry_run"] = True
    if args.step_through:
        body["step_through"] = True
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else {}
    with api_client(args) as api:
        code, run = api.call(
            "POST", f"/workflows/{segment(args.workflow_id)}/runs", json=body, headers=headers
        )
    if args.json:
        print_json(run)
    else:
        note = "" if code == 201 else " — already started with this Idempotency-Key"
        print(run_line(run) + note)
    return EXIT_OK


def _run_with_timeline(run: dict[str, Any]) -> str:
    """``runs get``: the run's line, where it failed, and its step timeline; errors read as
    their messages (a Lambda error's JSON cause becomes its ``errorMessage``), as ``relayflow
    run`` prints them."""
    lines = [run_line(run)]
    if run.get("failing_step"):
        message = readable_cause(run.get("cause")) or run.get("error")
        lines.append(f"failed at step {run['failing_step']}: {message}")
    elif run.get("cause"):
        lines.append(f"cause: {readable_cause(run['cause'])}")
    headers = ("step", "type", "status", "attempts", "ms", "output / error")
    rows = []
    for step in run.get("steps") or []:
        detail = would_call_summary(step.get("dry_run")) or (
            error_text(step["error"], step.get("cause"))
            if step.get("error")
            else summary(step.get("output"))
        )
        ms = f"{step['duration_ms']:.0f}" if step.get("duration_ms") is not None else ""
        rows.append(
            (step["key"], step["type"], step["status"], str(step["attempts"]), ms, detail[:60])
        )
    return "\n".join(lines + table_lines(headers, rows))


cmd_runs_get = endpoint("GET", "/runs/{run_id}", _run_with_timeline)


def cmd_runs_list(args: argparse.Namespace) -> int:
    if args.parked:
        return _list_parked(args)
    if not args.workflow:
        raise SystemExit("relayflow runs list: --workflow is required (or --parked)")
    return list_page(
        args,
        f"/workflows/{segment(args.workflow)}/runs",
        page_query(args),
        ("run", "status", "version", "started", "ms", "error"),
        lambda run: (
            run["run_id"],
            run["status"],
            str(run.get("version") or ""),
            run["started_at"],
            f"{run['duration_ms']:.0f}" if run.get("duration_ms") is not None else "",
            run.get("error") or "",
        ),
    )


def _list_parked(args: argparse.Namespace) -> int:
    """The tenant's parked runs, longest parked first: where each waits and why."""
    params: dict[str, Any] = {"status": "parked", "limit": args.limit}
    if args.next_token:
        params["next_token"] = args.next_token
    return list_page(
        args,
        "/runs",
        params,
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


cmd_runs_cancel = endpoint("POST", "/runs/{run_id}/cancel", run_line)


def _continued(answer: dict[str, Any]) -> str:
    if answer.get("released"):
        rest = " and runs to its end" if answer.get("to_end") else ""
        return f"run {answer['run_id']}: step {answer['released']} released{rest}"
    return f"run {answer['run_id']}: runs to its end"


#: Release the next step of a step-through run (``--to-end``: let it finish).
cmd_runs_continue = endpoint(
    "POST",
    "/runs/{run_id}/continue",
    _continued,
    body=lambda args: {"to_end": True} if args.to_end else {},
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
    body: dict[str, Any] = {"action": args.action}
    output = _json_argument(args.output, "output")
    if output is not None:
        body["output"] = output
    context = _json_argument(args.context, "context")
    if context is not None:
        body["context"] = context
    return call_and_print(
        args,
        "POST",
        f"/runs/{segment(args.run_id)}/resume",
        lambda a: f"run {a['run_id']}: step {a['step']} — {a['action']}; running again",
        json=body,
    )


def cmd_runs_rerun(args: argparse.Namespace) -> int:
    """``POST /runs/{id}/rerun``: the new run's id, where it starts and on which version."""
    body = {"from_step": args.from_step, "version": "current" if args.current else "pinned"}
    return call_and_print(
        args,
        "POST",
        f"/runs/{segment(args.run_id)}/rerun",
        lambda run: (
            f"run {run['run_id']}: rerun of {args.run_id} from {args.from_step}, "
            f"version {run.get('version')}, {run.get('status')}"
        ),
        json=body,
    )


_RUN_ID = arg("run_id")

#: ``relayflow runs ...``: each command's name, help line, function and arguments.
_COMMANDS = (
    (
        "start",
        "start a run of a workflow",
        cmd_runs_start,
        arg("workflow_id"),
        arg("--input", help="trigger payload: JSON text, or @file.json"),
        arg("--idempotency-key", help="a repeat with the same key returns the same run"),
        arg("--version", type=int, help="run this version instead of the live one"),
        arg(
            "--dry-run",
            action="store_true",
            help="a dry run: steps that act record the call they would make instead",
        ),
        arg(
            "--step-through",
            action="store_true",
            help="pause before each step until `relayflow runs continue`",
        ),
    ),
    ("get", "a run and its step timeline", cmd_runs_get, _RUN_ID),
    (
        "list",
        "a workflow's runs, newest first (--parked: parked runs)",
        cmd_runs_list,
        arg("--workflow"),
        arg("--parked", action="store_true", help="the tenant's parked runs instead"),
        arg(
            "--status",
            choices=("queued", "running", "parked", "succeeded", "failed", "timed_out", "aborted"),
        ),
        *page_arguments(20),
    ),
    ("cancel", "abort a running run", cmd_runs_cancel, _RUN_ID),
    (
        "continue",
        "release the next step of a step-through run",
        cmd_runs_continue,
        _RUN_ID,
        arg("--to-end", action="store_true", help="let the run finish without pausing"),
    ),
    (
        "resume",
        "resume a parked run: retry, skip or fail its step",
        cmd_runs_resume,
        _RUN_ID,
        arg("--action", required=True, choices=("retry", "skip", "fail")),
        arg("--output", help="skip: the step's output (JSON, or @file)"),
        arg("--context", help="a JSON object merged into the run's trigger data (or @file)"),
    ),
    (
        "rerun",
        "start a new run of a run's trigger from a chosen step",
        cmd_runs_rerun,
        _RUN_ID,
        arg("--from", dest="from_step", required=True, help="the main-flow step to start at"),
        arg("--current", action="store_true", help="run the live version (default: the run's own)"),
    ),
)


def add_runs_commands(sub: Any) -> None:
    """``relayflow runs start|get|list|cancel|continue|resume|rerun``."""
    api_commands(command_group(sub, "runs", "start, inspect and cancel runs"), _COMMANDS)
