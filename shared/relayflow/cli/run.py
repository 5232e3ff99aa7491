"""``relayflow run``: run a workflow on the local runtime, with its progress on stderr and its
step table, outcome and output on stdout; ``--step`` asks before each step."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from relayflow.cli.inputs import read_input, resources_option
from relayflow.cli.output import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_WAITING,
    UsageError,
    error_text,
    print_table,
    quiet_logs,
    readable_cause,
    summary,
    would_call_summary,
)
from relayflow.cli.workflow_files import load_workflow, sub_workflows
from relayflow.definition import DefinitionError

if TYPE_CHECKING:
    from relayflow.definition import Workflow


def _check_local_secrets(workflow: Workflow, path: str) -> None:
    """A local run acts for the tenant ``local``: a secret outside its folder is a definition
    problem (exit 2), as the API answers it for the caller's tenant (422)."""
    from dataclasses import replace

    from relayflow.document import RunInfo
    from relayflow.tools.secrets import tenant_secret_problems

    tenant = RunInfo.model_fields["tenant"].default
    problems = tenant_secret_problems(workflow, tenant)
    if problems:
        raise DefinitionError([replace(problem, file=path) for problem in problems])


def _progress(event: dict[str, Any]) -> None:
    kind = event.get("type", "")
    details = event.get("stateEnteredEventDetails") or {}
    if kind.endswith("StateEntered") and details.get("name"):
        print(f"  → {details['name']}", file=sys.stderr, flush=True)
    elif kind in {"TaskFailed", "LambdaFunctionFailed"}:
        failed = (
            event.get("taskFailedEventDetails")
            or event.get("lambdaFunctionFailedEventDetails")
            or {}
        )
        message = readable_cause(failed.get("cause"), limit=160)
        print(
            f"    ! {failed.get('error', 'failed')}" + (f": {message}" if message else ""),
            file=sys.stderr,
            flush=True,
        )


def _print_steps(result: Any, out: TextIO) -> None:
    """The run's step table (cells not trimmed at the line's end)."""
    headers = ("step", "type", "runs on", "status", "attempts", "refused", "ms", "output / error")
    rows = []
    for step in result.steps:
        simulated = would_call_summary(step.dry_run)
        detail = error_text(step.error, step.cause) if step.error else summary(step.output)
        detail = simulated or detail
        ms = f"{step.duration_ms:.0f}" if step.duration_ms is not None else ""
        rows.append(
            (
                step.key,
                step.type,
                step.runner,
                step.status,
                str(step.attempts),
                str(step.refusals) if step.refusals else "",
                ms,
                detail[:60],
            )
        )
    print_table(headers, rows, out, strip=False)


def _print_ai_usage(result: Any, out: TextIO) -> None:
    """One line per AI step (agent, llm_batch): its tokens and estimated dollars."""
    for step in result.steps:
        usage = step.output.get("usage") if isinstance(step.output, dict) else None
        if step.type not in ("agent", "llm_batch") or not isinstance(usage, dict):
            continue
        cost = usage.get("estimated_cost_usd")
        dollars = "no price listed" if cost is None else f"est. ${cost:.6f}"
        print(
            f"AI step {step.key}: {usage.get('input_tokens')} input + "
            f"{usage.get('output_tokens')} output tokens on {usage.get('model')}, {dollars}",
            file=out,
        )


def _process_age() -> float:
    """Seconds since this process started (Linux ``/proc``; 0 where it cannot be read)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as uptime:
            up = float(uptime.read().split()[0])
        return max(0.0, up - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def _spent(args: argparse.Namespace) -> float:
    """Seconds of ``--timeout`` already used: since the process started when ``relayflow`` is
    the program (its interpreter's start-up counts), else since :func:`main` was called (an
    embedding caller, such as a test, is older than the command)."""
    if getattr(args, "whole_process", False):
        return _process_age()
    return max(0.0, time.monotonic() - getattr(args, "called_at", time.monotonic()))


def _check_input(workflow: Workflow, trigger: Any) -> None:
    """Raise :class:`UsageError` listing how ``--input`` breaks the ``input_schema``."""
    from relayflow.definition.input_schema import input_violations

    violations = input_violations(workflow.input_schema, trigger)
    if violations:
        lines = [f"  {v.pointer or '(the input)'}: {v.message} [{v.rule}]" for v in violations]
        raise UsageError(
            f"--input does not match workflow '{workflow.id}'s input_schema:\n" + "\n".join(lines)
        )


def _waiting_progress(workflow: Workflow, args: argparse.Namespace) -> Any:
    """The progress printer, which also says at once when the run waits (and on a terminal
    asks for the answer), and stops the run at a wait nothing here would end
    (:mod:`relayflow.cli.run_waits`). ``--json`` prints no progress, note or prompt."""
    from relayflow.cli.run_waits import waiting_progress

    ask = input if sys.stdin.isatty() and not args.step and not args.json else None
    return waiting_progress(
        workflow,
        (lambda _event: None) if args.json else _progress,
        timeout=max(0.0, args.timeout - _spent(args)),
        ask=ask,
        time_scale=args.time_scale,
        quiet=args.json,
    )


def cmd_run(args: argparse.Namespace) -> int:
    from relayflow.runner import run_workflow_within

    workflow = load_workflow(args.file)
    _check_local_secrets(workflow, args.file)
    trigger = read_input(args.input)
    _check_input(workflow, trigger)
    resources = resources_option(args.resources) if args.resources else None
    if not args.json:
        mode = "a dry run of " if args.dry_run else ""
        print(
            f"running {mode}'{workflow.id}' on the local runtime (time scale {args.time_scale})",
            file=sys.stderr,
        )
    try:
        # --timeout covers the whole command (the interpreter's and the runtime's start
        # included), to the second.
        with quiet_logs(not args.verbose):
            result = run_workflow_within(
                max(0.0, args.timeout - _spent(args)),
                workflow,
                trigger,
                time_scale=args.time_scale,
                on_event=_waiting_progress(workflow, args),
                resources=resources,
                workflows=sub_workflows(workflow, Path(args.workflows or Path(args.file).parent)),
                dry_run=args.dry_run,
                step=step_prompt() if args.step else None,
            )
    except TimeoutError:
        print(
            f"relayflow: the run did not finish within --timeout {args.timeout:g} s "
            "and was abandoned with the local runtime",
            file=sys.stderr,
        )
        args.abandoned = True
        return EXIT_RUN_FAILED
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    elif result.waiting:
        print()
        _print_steps(result, sys.stdout)
    else:
        print()
        _print_steps(result, sys.stdout)
        print()
        ms = f"{result.duration_ms:.0f} ms" if result.duration_ms is not None else "?"
        verdict = f" ({result.outcome})" if result.outcome not in (None, result.status) else ""
        print(
            f"run {result.run_id}: {result.status.upper()}{verdict} in {ms}, "
            f"{result.transitions} state transition(s), "
            f"{result.lambda_invocations} Lambda invocation(s)"
        )
        _print_ai_usage(result, sys.stdout)
        if result.error:
            from relayflow.control.timeline import failing_step

            failed_at = failing_step(result.steps)
            where = f" at step {failed_at}" if failed_at else ""
            print(f"error{where}: {error_text(result.error, result.cause)}")
            if not args.verbose:
                print("(--verbose shows the step functions' logs and the full cause)")
            elif result.cause:
                print(f"cause: {result.cause}")
        if result.compensation:
            undone = ", ".join(result.compensation["steps"])
            print(f"{result.compensation['status']}: {undone}")
            for failed in result.compensation["errors"]:
                print(f"  compensation of {failed['step']} failed: {failed['error']}")
        if not result.error:
            steps = (result.output or {}).get("steps") if isinstance(result.output, dict) else None
            print("output steps:", json.dumps(steps, indent=2, default=str))
    if result.waiting:
        print(
            f"relayflow: {result.waiting['message']}: run {result.run_id} stopped at once "
            f"instead of waiting for --timeout. To continue, {result.waiting['hint']}.",
            file=sys.stderr,
        )
        return EXIT_WAITING
    return EXIT_OK if result.succeeded else EXIT_RUN_FAILED


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


def add_run_command(sub: Any) -> None:
    """``relayflow run``."""
    p = sub.add_parser("run", help="run a workflow on the local runtime")
    p.add_argument("file")
    p.add_argument("--input", help="trigger payload: JSON text, or @file.json")
    p.add_argument("--json", action="store_true", help="print the full run record as JSON")
    p.add_argument(
        "--time-scale",
        type=float,
        default=0.001,
        help="multiply Wait and retry delays by this (default 0.001: 15 minutes take 0.9 s; "
        "1 = real time)",
    )
    p.add_argument(
        "--timeout", type=float, default=300, help="give up waiting after this many seconds"
    )
    p.add_argument(
        "--resources",
        help="YAML file of tables, queues, buses, identities and secrets to create in moto first",
    )
    p.add_argument(
        "--workflows",
        help="folder holding the definitions its sub_workflow steps start (default: the "
        "file's folder)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="a dry run: steps that act record the call they would make instead",
    )
    p.add_argument(
        "--step",
        action="store_true",
        help="step through: ask before each step (Enter runs it, c runs to the end)",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="also show the step functions' JSON logs and the local interpreter's error dumps",
    )
    p.set_defaults(func=cmd_run)
