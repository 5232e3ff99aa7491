"""The ``relayflow`` command line.

``schema``, ``validate``, ``compile``, ``graph`` and ``run`` work on files; ``schedule preview``
shows a cron expression's fire times; ``serve`` runs the control API locally; ``deploy``,
``runs`` and ``keys`` talk to a control API (``--api URL --api-key KEY``, or
``RELAYFLOW_API_URL`` / ``RELAYFLOW_API_KEY``). Exit codes: 0 success, 1 a run that did not
succeed or a request the API refused, 2 an invalid definition or bad arguments, 3 a compiler
bug (the compiled state machine breaks an ASL rule: nothing was written, run or deployed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

# Light: the package loads its parts on first use, so `--help` and `--version` stay fast.
from relayflow.cli_quiet import quiet_logs, readable_cause
from relayflow.definition import DefinitionError

if TYPE_CHECKING:
    from relayflow.definition import Workflow

EXIT_OK, EXIT_RUN_FAILED, EXIT_INVALID, EXIT_COMPILER_BUG = 0, 1, 2, 3


class UsageError(Exception):
    """Bad arguments: reported in one line, exit code 2."""


def _print_problems(exc: DefinitionError, out: TextIO) -> None:
    for problem in exc.problems:
        print(f"  {problem}", file=out)


def load_workflow(path: str | Path) -> Workflow:
    """:func:`relayflow.validation.load_workflow`, imported on first use (it brings in the
    models, YAML and the expression language)."""
    from relayflow.validation import load_workflow as load

    return load(path)


def _load(path: str) -> Workflow:
    return load_workflow(path)


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


def cmd_schema(args: argparse.Namespace) -> int:
    from relayflow.definition import Workflow

    schema = Workflow.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Relayflow workflow definition"
    print(json.dumps(schema, indent=2, sort_keys=True))
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    if args.json:
        return _validate_json(args)
    status = EXIT_OK
    for path in args.files:
        try:
            workflow = _load(path)
        except DefinitionError as exc:
            print(f"✗ {path}: {len(exc.problems)} problem(s)", file=sys.stderr)
            _print_problems(exc, sys.stderr)
            status = EXIT_INVALID
        else:
            from relayflow.compiler.docsize import document_size_problems
            from relayflow.validation.advisories import definition_warnings

            warnings = definition_warnings(workflow) + document_size_problems(
                workflow, _children_at_hand(workflow, path)
            )
            if warnings and args.strict:
                print(f"✗ {path}: {len(warnings)} problem(s) (--strict)", file=sys.stderr)
                for problem in warnings:
                    print(f"  {problem}", file=sys.stderr)
                status = EXIT_INVALID
                continue
            print(f"✓ {path}: workflow '{workflow.id}', {len(workflow.steps)} steps")
            for problem in warnings:
                print(f"  warning: {problem}")
    return status


def _children_at_hand(workflow: Workflow, path: str) -> dict[str, Workflow]:
    """The child workflows whose definitions are in the file's folder (as ``run`` finds
    them): their own size bounds the sub_workflow outputs in the document-size estimate."""
    if not _children_of(workflow):
        return {}
    try:
        return _sub_workflows(workflow, Path(path).parent)
    except UsageError:
        return {}


def _validate_json(args: argparse.Namespace) -> int:
    from relayflow import cli_json
    from relayflow.compiler.docsize import document_size_problems

    results = []
    for path in args.files:
        try:
            workflow = _load(path)
        except DefinitionError as exc:
            results.append(cli_json.validation(path, None, exc.problems, []))
            continue
        warnings = document_size_problems(workflow, _children_at_hand(workflow, path))
        problems = warnings if args.strict else []
        results.append(cli_json.validation(path, workflow, problems, [] if problems else warnings))
    cli_json.emit({"files": results})
    return EXIT_OK if all(r["valid"] for r in results) else EXIT_INVALID


def cmd_compile(args: argparse.Namespace) -> int:
    from relayflow.compiler import CompileOptions, compile_workflow
    from relayflow.compiler.check import assert_valid_machine
    from relayflow.compiler.quotas import assert_within_size

    if args.items < 1:
        raise UsageError(f"--items must be at least 1, got {args.items}")
    if args.json and (args.effective or args.cost or args.output):
        raise UsageError("--json prints the ASL and its engine; leave out -o, --cost, --effective")
    workflow = _load(args.file)
    if args.effective:
        _print_effective(workflow, sys.stdout)
        return EXIT_OK
    # The machine the control plane would deploy for a new workflow: Express when chosen.
    compiled = compile_workflow(workflow, CompileOptions(express=True))
    # Express's recording wrapper adds to the size validation measured.
    assert_within_size(compiled.asl, args.file)
    assert_valid_machine(compiled.asl)
    if args.json:
        from relayflow import cli_json

        cli_json.emit(cli_json.compiled(workflow, compiled))
        return EXIT_OK
    text = json.dumps(compiled.asl, indent=2) + "\n"
    if args.cost and not args.output:
        # The cost report takes stdout; the ASL is still compiled and checked (and written
        # with -o).
        sys.stdout.write(_cost_report(workflow, args.items))
        return EXIT_OK
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--output {args.output}: {exc.strerror or exc}") from exc
        print(
            f"wrote {args.output} ({len(compiled.asl['States'])} top-level states)", file=sys.stderr
        )
    else:
        sys.stdout.write(text)
    if compiled.engine is not None:
        print(f"engine: {compiled.engine.engine} ({compiled.engine.reason})", file=sys.stderr)
    if args.iam:
        print(json.dumps(compiled.iam_statements, indent=2), file=sys.stderr)
    _print_defaults_note(workflow, sys.stderr)
    if args.cost:
        sys.stdout.write(_cost_report(workflow, args.items))
    return EXIT_OK


def _cost_report(workflow: Any, items: int) -> str:
    """The cost report of ``workflow``: Standard priced on its Standard machine, Express on
    the machine Express runs, and the engine ``auto`` picks marked, with its reason."""
    from relayflow.cost.report import cost_report, priced_machines

    standard, express, choice = priced_machines(workflow)
    return cost_report(standard, express_asl=express, choice=choice, items=items)


def _print_effective(workflow: Any, out: TextIO) -> None:
    """The effective retry / timeout / wait of each step (``compile --effective``)."""
    from relayflow.definition.effective import effective_rows

    headers = ("step", "type", "retry", "timeout", "wait", "from")
    rows = [(r.key, r.type, r.retry, r.timeout, r.wait, r.source) for r in effective_rows(workflow)]
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)


def _print_defaults_note(workflow: Any, out: TextIO) -> None:
    """One stderr line naming the steps that took a setting from the workflow's defaults."""
    from relayflow.definition.effective import effective_rows

    defaulted = [r.key for r in effective_rows(workflow) if r.source.startswith("defaults")]
    if defaulted:
        names = ", ".join(defaulted[:5]) + (
            f" and {len(defaulted) - 5} more" if len(defaulted) > 5 else ""
        )
        print(
            f"defaults applied to {len(defaulted)} step(s) ({names}); "
            "relayflow compile --effective shows each step's retry, timeout and wait",
            file=out,
        )


def cmd_graph(args: argparse.Namespace) -> int:
    from relayflow.compiler import to_mermaid

    workflow = _load(args.file)
    if args.json:
        from relayflow import cli_json

        cli_json.emit(cli_json.graph(workflow))
        return EXIT_OK
    sys.stdout.write(to_mermaid(workflow))
    return EXIT_OK


def _json_option(value: str | None, option: str) -> Any:
    """A ``--data``/``--input`` value: JSON text, or ``@file`` holding it; ``None`` when not
    given. The JSON intake policy applies (relayflow.intake): a bad file is a one-line
    :class:`UsageError` naming the option, the path in the document and the rule."""
    from relayflow.intake import IntakeError, decode_utf8, loads

    if value is None:
        return None
    try:
        if value.startswith("@"):
            text = decode_utf8(Path(value[1:]).read_bytes(), f"{option} {value}")
        else:
            text = value
        return loads(text)
    except OSError as exc:
        raise UsageError(f"{option} {value}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"{option} is not valid JSON: {exc.msg} (line {exc.lineno})") from exc
    except IntakeError as exc:
        raise UsageError(f"{option} refused: {exc.message} [{exc.rule}]") from exc


def _read_input(value: str | None) -> Any:
    if value is None:
        return {}
    return _json_option(value, "--input")


def _summary(value: Any, width: int = 48) -> str:
    if value is None:
        return ""
    text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


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


def would_call_summary(record: Any) -> str | None:
    """``simulated: <call>`` for a step a dry run simulated (``dynamodb:PutItem`` or ``POST
    <url>``), ``read (dry run)`` for a ``dry_run: read`` tool, ``None`` otherwise."""
    if not isinstance(record, dict):
        return None
    if not record.get("simulated"):
        return "read (dry run)" if record.get("read") else None
    call = record.get("call") if isinstance(record.get("call"), dict) else {}
    if call.get("kind") == "aws":
        return f"simulated: {call.get('action') or call.get('tool')}"
    return f"simulated: {call.get('method')} {call.get('url')}"


def _print_table(result: Any, out: TextIO) -> None:
    headers = ("step", "type", "runs on", "status", "attempts", "refused", "ms", "output / error")
    rows = []
    for step in result.steps:
        simulated = would_call_summary(step.dry_run)
        detail = (
            f"{step.error}: {readable_cause(step.cause)}" if step.error else _summary(step.output)
        )
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
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line, file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)), file=out)


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


def _sub_workflows(workflow: Workflow, directory: Path) -> dict[str, Workflow]:
    """The workflows ``workflow``'s sub_workflow steps and agent workflow tools start (and
    theirs, in turn), found by ``id`` among the definitions in ``directory``. Files that do
    not load are skipped unless one of them is needed."""
    wanted = _children_of(workflow)
    # A templated target may be any of them: every definition in the folder is published.
    dynamic = any("{{" in workflow_id for workflow_id in wanted)
    wanted = {workflow_id for workflow_id in wanted if "{{" not in workflow_id}
    if not wanted - {workflow.id} and not dynamic:
        return {}
    available: dict[str, Workflow] = {}
    for path in sorted(directory.glob("*")):
        if path.suffix not in (".yaml", ".yml", ".json"):
            continue
        try:
            found = load_workflow(path)
        except (DefinitionError, OSError):
            continue
        available.setdefault(found.id, found)
    if dynamic:
        return {k: v for k, v in available.items() if k != workflow.id}
    found_all: dict[str, Workflow] = {}
    pending = sorted(wanted - {workflow.id})
    while pending:
        workflow_id = pending.pop()
        if workflow_id in found_all:
            continue
        if workflow_id not in available:
            raise UsageError(
                f"sub_workflow names workflow '{workflow_id}': no definition with that id in "
                f"{directory} (choose the folder with --workflows)"
            )
        child = found_all[workflow_id] = available[workflow_id]
        pending += sorted(_children_of(child))
    return found_all


def _children_of(workflow: Workflow) -> set[str]:
    """The ids of the workflows a definition starts: sub_workflow targets (templated ones as
    they are) and agents' ``workflow.<id>`` tools."""
    from relayflow.validation.children import child_workflows

    return {child.workflow_id for child in child_workflows(workflow)}


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
    asks for the answer): :mod:`relayflow.cli_waits`."""
    from relayflow.cli_waits import waiting_progress

    ask = input if sys.stdin.isatty() and not args.step else None
    return waiting_progress(workflow, _progress, timeout=args.timeout, ask=ask)


def cmd_run(args: argparse.Namespace) -> int:
    from relayflow.cli_runmodes import step_prompt
    from relayflow.runner import run_workflow_within

    workflow = _load(args.file)
    _check_local_secrets(workflow, args.file)
    trigger = _read_input(args.input)
    _check_input(workflow, trigger)
    resources = None
    if args.resources:
        import yaml

        from relayflow.local.resources import load_resources

        try:
            resources = load_resources(args.resources)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            reason = " ".join(str(exc).split())  # pydantic's and PyYAML's span lines
            raise UsageError(f"--resources {args.resources}: {reason}") from exc
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
                on_event=None if args.json else _waiting_progress(workflow, args),
                resources=resources,
                workflows=_sub_workflows(workflow, Path(args.workflows or Path(args.file).parent)),
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
    else:
        print()
        _print_table(result, sys.stdout)
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
            print(f"error{where}: {result.error}: {readable_cause(result.cause)}")
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
    return EXIT_OK if result.succeeded else EXIT_RUN_FAILED


def cmd_schedule_preview(args: argparse.Namespace) -> int:
    from datetime import datetime

    from relayflow.cron import (
        UnknownTimeZone,
        UnsupportedCron,
        preview,
        scheduler_dst_note,
        to_scheduler_expressions,
        zone_name,
    )

    if args.n < 1:
        raise UsageError("-n must be at least 1")
    try:
        start = datetime.fromisoformat(args.start) if args.start else None
    except ValueError as exc:
        raise UsageError(f"--start {args.start}: not an ISO 8601 date-time") from exc
    try:
        expressions = to_scheduler_expressions(args.cron)
        tz = zone_name(args.tz)
        times = preview(args.cron, tz, args.n, start)
    except (UnsupportedCron, UnknownTimeZone) as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        from relayflow import cli_json

        notes = [scheduler_dst_note(args.cron, t) for t in times]
        cli_json.emit(cli_json.schedule(args.cron, tz, expressions, times, notes))
        return EXIT_OK
    plural = "s (either fires)" if len(expressions) > 1 else ""
    print(f"EventBridge Scheduler expression{plural}, ScheduleExpressionTimezone {tz}:")
    for expression in expressions:
        print(f"  {expression}")
    print(f"next {len(times)} fire times (croniter):")
    for fire_time in times:
        note = scheduler_dst_note(args.cron, fire_time)
        print(f"  {fire_time.isoformat()}" + (f"  ! {note}" if note else ""))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    from relayflow import __version__
    from relayflow.cli_api import add_api_commands

    parser = argparse.ArgumentParser(prog="relayflow", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"relayflow {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("schema", help="print the JSON Schema of the definition format").set_defaults(
        func=cmd_schema
    )

    p = sub.add_parser("validate", help="check definitions; print every problem with its path")
    p.add_argument("files", nargs="+")
    p.add_argument(
        "--strict",
        action="store_true",
        help="refuse a definition that has warnings (e.g. a state document that can pass 256 KB)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("compile", help="compile a definition to Step Functions ASL")
    p.add_argument("file")
    p.add_argument("-o", "--output", help="write the ASL here instead of stdout")
    p.add_argument("--iam", action="store_true", help="also print the IAM statements (stderr)")
    p.add_argument(
        "--cost",
        action="store_true",
        help="print the estimated cost per 1,000,000 runs on Standard and Express instead of "
        "the ASL (with -o: as well as writing it); docs/cost.md",
    )
    p.add_argument(
        "--items",
        type=int,
        default=10,
        help="--cost: items each for_each (Map) is assumed to run (default 10)",
    )
    p.add_argument(
        "--effective",
        action="store_true",
        help="print each step's effective retry, timeout and wait (defaults applied) "
        "instead of the ASL",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("graph", help="print a Mermaid diagram of the workflow")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_graph)

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

    schedule = sub.add_parser("schedule", help="cron schedules").add_subparsers(
        dest="schedule_command", required=True
    )
    p = schedule.add_parser(
        "preview", help="next fire times of a cron expression and its EventBridge Scheduler form"
    )
    p.add_argument("cron", help='standard 5-field cron, e.g. "0 9 * * MON-FRI"')
    p.add_argument("--tz", default="UTC", help="IANA time zone (default UTC)")
    p.add_argument("-n", type=int, default=10, help="how many fire times (default 10)")
    p.add_argument("--start", help="count from this ISO date-time (default now; naive = in --tz)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_schedule_preview)
    add_api_commands(sub)
    from relayflow.cli_ops import add_ops_commands

    add_ops_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from relayflow.cli_api import ApiFailure, ApiUnreachable, _print_api_failure

    called_at = time.monotonic()
    args = build_parser().parse_args(argv)  # --help, --version and usage errors end here
    from relayflow.compiler.check import CompiledMachineInvalid

    args.called_at, args.whole_process = called_at, argv is None
    try:
        code = int(args.func(args))
        if getattr(args, "abandoned", False) and args.whole_process:
            # The abandoned run's threads (the runtime, a step still working) must not hold
            # the exit up, nor be torn down mid-call by the interpreter's shutdown.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        return code
    except CompiledMachineInvalid as exc:
        print(
            "relayflow: internal error: the compiler produced a state machine that Step "
            f"Functions would refuse ({len(exc.violations)} rule(s) broken). This is a Relayflow "
            "bug; nothing was written, run or deployed. Please report it with the definition.",
            file=sys.stderr,
        )
        for violation in exc.violations:
            print(f"  {violation}", file=sys.stderr)
        return EXIT_COMPILER_BUG
    except DefinitionError as exc:
        print(f"relayflow: {len(exc.problems)} problem(s) in the definition:", file=sys.stderr)
        _print_problems(exc, sys.stderr)
        return EXIT_INVALID
    except UsageError as exc:
        print(f"relayflow: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except ApiFailure as exc:
        _print_api_failure(exc, sys.stderr)
        return EXIT_INVALID if exc.status == 422 else EXIT_RUN_FAILED
    except ApiUnreachable as exc:
        print(f"relayflow: {exc}", file=sys.stderr)
        return EXIT_RUN_FAILED


if __name__ == "__main__":
    sys.exit(main())
