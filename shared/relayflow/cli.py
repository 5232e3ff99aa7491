"""The ``relayflow`` command line.

``schema``, ``validate``, ``compile``, ``graph`` and ``run``. Exit codes: 0 success, 1 a run
that did not succeed, 2 an invalid definition or bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from relayflow.definition import DefinitionError, Workflow, load_workflow

EXIT_OK, EXIT_RUN_FAILED, EXIT_INVALID = 0, 1, 2


class UsageError(Exception):
    """Bad arguments: reported in one line, exit code 2."""


def _print_problems(exc: DefinitionError, out: TextIO) -> None:
    for problem in exc.problems:
        print(f"  {problem}", file=out)


def _load(path: str) -> Workflow:
    return load_workflow(path)


def cmd_schema(args: argparse.Namespace) -> int:
    schema = Workflow.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Relayflow workflow definition"
    print(json.dumps(schema, indent=2, sort_keys=True))
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    status = EXIT_OK
    for path in args.files:
        try:
            workflow = _load(path)
        except DefinitionError as exc:
            print(f"✗ {path}: {len(exc.problems)} problem(s)", file=sys.stderr)
            _print_problems(exc, sys.stderr)
            status = EXIT_INVALID
        else:
            print(f"✓ {path}: workflow '{workflow.id}', {len(workflow.steps)} steps")
    return status


def cmd_compile(args: argparse.Namespace) -> int:
    from relayflow.compiler import compile_workflow

    compiled = compile_workflow(_load(args.file))
    text = json.dumps(compiled.asl, indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(
            f"wrote {args.output} ({len(compiled.asl['States'])} top-level states)", file=sys.stderr
        )
    else:
        sys.stdout.write(text)
    if args.iam:
        print(json.dumps(compiled.iam_statements, indent=2), file=sys.stderr)
    return EXIT_OK


def cmd_graph(args: argparse.Namespace) -> int:
    from relayflow.compiler import to_mermaid

    sys.stdout.write(to_mermaid(_load(args.file)))
    return EXIT_OK


def _read_input(value: str | None) -> Any:
    if value is None:
        return {}
    try:
        text = Path(value[1:]).read_text(encoding="utf-8") if value.startswith("@") else value
    except OSError as exc:
        raise UsageError(f"--input {value}: {exc.strerror}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--input is not valid JSON: {exc.msg} (line {exc.lineno})") from exc


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
        print(f"    ! {failed.get('error', 'failed')}", file=sys.stderr, flush=True)


def _print_table(result: Any, out: TextIO) -> None:
    headers = ("step", "type", "runs on", "status", "attempts", "ms", "output / error")
    rows = []
    for step in result.steps:
        detail = f"{step.error}: {step.cause}" if step.error else _summary(step.output)
        ms = f"{step.duration_ms:.0f}" if step.duration_ms is not None else ""
        rows.append(
            (step.key, step.type, step.runner, step.status, str(step.attempts), ms, detail[:60])
        )
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line, file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)), file=out)


def cmd_run(args: argparse.Namespace) -> int:
    from relayflow.runner import run_workflow

    workflow = _load(args.file)
    trigger = _read_input(args.input)
    resources = None
    if args.resources:
        from pydantic import ValidationError

        from relayflow.local.resources import load_resources

        try:
            resources = load_resources(args.resources)
        except (OSError, ValidationError) as exc:
            raise UsageError(f"--resources {args.resources}: {exc}") from exc
    if not args.json:
        print(
            f"running '{workflow.id}' on the local runtime (time scale {args.time_scale})",
            file=sys.stderr,
        )
    try:
        result = run_workflow(
            workflow,
            trigger,
            time_scale=args.time_scale,
            timeout=args.timeout,
            on_event=None if args.json else _progress,
            resources=resources,
        )
    except TimeoutError:
        print(
            f"relayflow: the run did not finish within --timeout {args.timeout:g} s "
            "and was abandoned with the local runtime",
            file=sys.stderr,
        )
        return EXIT_RUN_FAILED
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        print()
        _print_table(result, sys.stdout)
        print()
        ms = f"{result.duration_ms:.0f} ms" if result.duration_ms is not None else "?"
        print(
            f"run {result.run_id}: {result.status.upper()} in {ms}, "
            f"{result.lambda_invocations} Lambda invocation(s)"
        )
        if result.error:
            print(f"error: {result.error}: {result.cause}")
        else:
            steps = (result.output or {}).get("steps") if isinstance(result.output, dict) else None
            print("output steps:", json.dumps(steps, indent=2, default=str))
    return EXIT_OK if result.succeeded else EXIT_RUN_FAILED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relayflow", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("schema", help="print the JSON Schema of the definition format").set_defaults(
        func=cmd_schema
    )

    p = sub.add_parser("validate", help="check definitions; print every problem with its path")
    p.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("compile", help="compile a definition to Step Functions ASL")
    p.add_argument("file")
    p.add_argument("-o", "--output", help="write the ASL here instead of stdout")
    p.add_argument("--iam", action="store_true", help="also print the IAM statements (stderr)")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("graph", help="print a Mermaid diagram of the workflow")
    p.add_argument("file")
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
    p.set_defaults(func=cmd_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except DefinitionError as exc:
        print(f"relayflow: {len(exc.problems)} problem(s) in the definition:", file=sys.stderr)
        _print_problems(exc, sys.stderr)
        return EXIT_INVALID
    except UsageError as exc:
        print(f"relayflow: {exc}", file=sys.stderr)
        return EXIT_INVALID


if __name__ == "__main__":
    sys.exit(main())
