"""``relayflow deploy``: register (PUT) workflow definitions with the control API, children
before the workflows that start them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from relayflow.cli.api import ApiFailure, api_client, api_command, print_api_failure, segment
from relayflow.cli.output import (
    EXIT_COMPILER_BUG,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_RUN_FAILED,
    UsageError,
    print_problems,
)
from relayflow.cli.parsing import arg
from relayflow.definition import DefinitionError

#: The API's error code for a compiled machine that fails :mod:`relayflow.compiler.check`.
COMPILER_BUG_CODE = "compiler_bug"
_MEDIA_TYPES = {".json": "application/json"}


def _definition_id(path: str, text: str) -> str:
    from relayflow.definition.loader import parse_text

    fmt = "json" if Path(path).suffix.lower() == ".json" else "yaml"
    document = parse_text(text, path, fmt=fmt)
    if document.data is None and document.problems:
        raise DefinitionError(document.problems)
    workflow_id = document.data.get("id") if isinstance(document.data, dict) else None
    if not isinstance(workflow_id, str) or not workflow_id:
        raise UsageError(f"{path}: the definition has no id (the workflow's id in the API)")
    _check_client_version(path, document.data)
    return workflow_id


def _check_client_version(path: str, data: dict[str, Any]) -> None:
    """The engine-version guard on the client: a definition that needs a newer Relayflow
    than this client is not published by it (the API checks its own engine too)."""
    from relayflow.definition.problems import Problem
    from relayflow.engine import BadSpecifier, unmet_requirement

    requires = data.get("requires")
    if not isinstance(requires, str):
        return
    try:
        unmet = unmet_requirement(requires)
    except BadSpecifier:
        return  # the API names the malformed specifier with the definition's other problems
    if unmet is not None:
        raise DefinitionError(
            [Problem(path, "requires", "engine-version", f"{unmet}; upgrade the client")]
        )


def _children_first(texts: dict[str, str]) -> list[str]:
    """The files in the order to register them: a workflow after the workflows among them
    that its ``sub_workflow`` steps start (the API refuses a child it does not know yet);
    otherwise as given. Unreadable files keep their place (their PUT reports them)."""
    from relayflow.definition.loader import parse_text

    ids: dict[str, str] = {}
    children: dict[str, set[str]] = {}
    for path, text in texts.items():
        # The loader refuses YAML aliases before it builds anything (an alias bomb would
        # expand here otherwise); a file it cannot read keeps its place.
        fmt = "json" if Path(path).suffix.lower() == ".json" else "yaml"
        data = parse_text(text, path, fmt=fmt).data
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            continue
        ids[data["id"]] = path
        steps = data.get("steps") if isinstance(data.get("steps"), dict) else {}
        children[path] = {
            step["workflow_id"]
            for step in steps.values()
            if isinstance(step, dict)
            and step.get("type") == "sub_workflow"
            and isinstance(step.get("workflow_id"), str)
        }
    ordered: list[str] = []
    visiting: set[str] = set()

    def visit(path: str) -> None:
        if path in ordered or path in visiting:
            return  # placed already, or a cycle (a workflow may start itself)
        visiting.add(path)
        for child in sorted(children.get(path, ())):
            if child in ids:
                visit(ids[child])
        visiting.discard(path)
        ordered.append(path)

    for path in texts:
        visit(path)
    return ordered


def cmd_deploy(args: argparse.Namespace) -> int:
    status = EXIT_OK
    texts: dict[str, str] = {}
    for path in args.files:
        try:
            texts[path] = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{path}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise UsageError(f"{path}: not UTF-8 text (byte {exc.start} is invalid)") from exc
    with api_client(args) as api:
        for path in _children_first(texts):
            text = texts[path]
            try:
                workflow_id = _definition_id(path, text)
            except DefinitionError as exc:
                print(f"✗ {path}: {len(exc.problems)} problem(s)", file=sys.stderr)
                print_problems(exc, sys.stderr)
                status = EXIT_INVALID
                continue
            media_type = _MEDIA_TYPES.get(Path(path).suffix.lower(), "application/yaml")
            try:
                code, result = api.call(
                    "PUT",
                    f"/workflows/{segment(workflow_id)}",
                    content=text.encode("utf-8"),
                    headers={"Content-Type": media_type},
                )
            except ApiFailure as exc:
                if exc.status == 422:
                    problems = exc.body.get("details") or []
                    print(f"✗ {path}: {len(problems)} problem(s)", file=sys.stderr)
                    print_api_failure(exc, sys.stderr, file=path)
                    status = EXIT_INVALID
                else:
                    print(f"✗ {path}", file=sys.stderr)
                    print_api_failure(exc, sys.stderr, file=path)
                    bug = exc.body.get("code") == COMPILER_BUG_CODE
                    status = max(status, EXIT_COMPILER_BUG if bug else EXIT_RUN_FAILED)
                continue
            verb = "created" if code == 201 else "updated"
            print(
                f"✓ {path}: workflow '{result['workflow_id']}' {verb}, version "
                f"{result['version']} (live {result['live_version']})"
            )
            for warning in result.get("warnings") or []:
                print(f"  warning: {warning}")
    return status


def add_deploy_command(sub: Any) -> None:
    """``relayflow deploy FILE...``."""
    api_command(
        sub,
        "deploy",
        "register (PUT) workflow definitions with the control API",
        cmd_deploy,
        arg("files", nargs="+"),
    )
