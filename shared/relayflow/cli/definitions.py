"""The commands on definition files: ``schema``, ``validate``, ``compile`` and ``graph``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from relayflow.cli import json_docs
from relayflow.cli.output import (
    EXIT_INVALID,
    EXIT_OK,
    UsageError,
    print_json,
    print_problems,
    print_table,
)
from relayflow.cli.workflow_files import children_of, load_workflow, sub_workflows
from relayflow.definition import DefinitionError

if TYPE_CHECKING:
    from relayflow.definition import Workflow


def cmd_schema(args: argparse.Namespace) -> int:
    from relayflow.definition import Workflow

    schema = Workflow.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Relayflow workflow definition"
    print(json.dumps(schema, indent=2, sort_keys=True))
    return EXIT_OK


def load_for_tenant(path: str, tenant: str) -> Workflow:
    """``path``'s workflow as ``tenant`` would publish it: a secret outside the tenant's folder
    is a definition problem (rule ``secret-tenant``), as ``PUT`` (422) and ``run`` (exit 2)
    refuse it."""
    from dataclasses import replace

    from relayflow.tools.secrets import tenant_secret_problems

    workflow = load_workflow(path)
    problems = tenant_secret_problems(workflow, tenant)
    if problems:
        raise DefinitionError([replace(problem, file=path) for problem in problems])
    return workflow


def cmd_validate(args: argparse.Namespace) -> int:
    if args.json:
        return _validate_json(args)
    status = EXIT_OK
    for path in args.files:
        try:
            workflow = load_for_tenant(path, args.tenant)
        except DefinitionError as exc:
            print(f"✗ {path}: {len(exc.problems)} problem(s)", file=sys.stderr)
            print_problems(exc, sys.stderr)
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
    if not children_of(workflow):
        return {}
    try:
        return sub_workflows(workflow, Path(path).parent)
    except UsageError:
        return {}


def _validate_json(args: argparse.Namespace) -> int:
    from relayflow.compiler.docsize import document_size_problems

    results = []
    for path in args.files:
        try:
            workflow = load_for_tenant(path, args.tenant)
        except DefinitionError as exc:
            results.append(json_docs.validation(path, None, exc.problems, []))
            continue
        warnings = document_size_problems(workflow, _children_at_hand(workflow, path))
        problems = warnings if args.strict else []
        results.append(json_docs.validation(path, workflow, problems, [] if problems else warnings))
    print_json({"files": results})
    return EXIT_OK if all(r["valid"] for r in results) else EXIT_INVALID


def cmd_compile(args: argparse.Namespace) -> int:
    from relayflow.compiler import CompileOptions, compile_workflow
    from relayflow.compiler.check import assert_valid_machine
    from relayflow.compiler.quotas import assert_within_size

    if args.items < 1:
        raise UsageError(f"--items must be at least 1, got {args.items}")
    if args.json and (args.effective or args.cost or args.output):
        raise UsageError("--json prints the ASL and its engine; leave out -o, --cost, --effective")
    workflow = load_workflow(args.file)
    if args.effective:
        _print_effective(workflow, sys.stdout)
        return EXIT_OK
    # The machine the control plane would deploy for a new workflow: Express when chosen.
    compiled = compile_workflow(workflow, CompileOptions(express=True))
    # Express's recording wrapper adds to the size validation measured.
    assert_within_size(compiled.asl, args.file)
    assert_valid_machine(compiled.asl)
    if args.json:
        print_json(json_docs.compiled(workflow, compiled))
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
    print_table(headers, rows, out)


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

    workflow = load_workflow(args.file)
    if args.json:
        print_json(json_docs.graph(workflow))
        return EXIT_OK
    sys.stdout.write(to_mermaid(workflow))
    return EXIT_OK


def add_definition_commands(sub: Any) -> None:
    """``relayflow schema``, ``validate``, ``compile`` and ``graph``."""
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
    p.add_argument(
        "--tenant",
        default="local",
        help="check secret names against this tenant's folder, as PUT and run do (default: "
        "local, the tenant a local run acts for)",
    )
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
