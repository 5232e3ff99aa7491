"""The ``relayflow`` commands that talk to a control API (``deploy``, ``runs``, ``dlq``,
``approvals``, ``waitpoints``, ``keys``) and ``serve``, which runs one locally; the local
commands, the parser and ``main`` are in :mod:`relayflow.cli`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from relayflow.cli import (
    EXIT_COMPILER_BUG,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_RUN_FAILED,
    UsageError,
    _json_option,
    _print_problems,
    _read_input,
    _summary,
    would_call_summary,
)
from relayflow.cli_serve import cmd_serve
from relayflow.definition import DefinitionError

# ----------------------------------------------------------------------------- the control API

API_URL_ENV, API_KEY_ENV = "RELAYFLOW_API_URL", "RELAYFLOW_API_KEY"
#: The API's error code for a compiled machine that fails :mod:`relayflow.compiler.check`.
COMPILER_BUG_CODE = "compiler_bug"
_MEDIA_TYPES = {".json": "application/json"}


class ApiFailure(Exception):
    """The API answered with an error: reported with its code and message, exit code 1
    (2 for a definition it found invalid)."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body if isinstance(body, dict) else {"message": str(body)}
        super().__init__(f"{status} {self.body.get('code', 'error')}: {self.body.get('message')}")


class ApiUnreachable(Exception):
    """No answer from the API (connection refused, timeout): exit code 1."""


class ApiClient:
    """A small httpx client for the control API (and a local server's admin routes)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        admin_token: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        import httpx

        headers = {"User-Agent": "relayflow-cli"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        if admin_token:
            headers["X-Admin-Token"] = admin_token
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)
        self.url = url

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def call(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        """Send one request; the status and the decoded JSON body. Raises :class:`ApiFailure`
        for an error status and :class:`ApiUnreachable` when no answer comes."""
        import httpx

        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiUnreachable(f"cannot reach the API at {self.url}: {exc}") from exc
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = {"message": response.text[:200]}
        if response.status_code >= 400:
            raise ApiFailure(response.status_code, body)
        return response.status_code, body


def api_client(args: argparse.Namespace) -> ApiClient:
    url = args.api or os.environ.get(API_URL_ENV)
    key = args.api_key or os.environ.get(API_KEY_ENV)
    if not url:
        raise UsageError(f"pass --api URL (or set {API_URL_ENV})")
    if not key:
        raise UsageError(f"pass --api-key KEY (or set {API_KEY_ENV})")
    return ApiClient(url, api_key=key)


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def _print_api_failure(exc: ApiFailure, out: TextIO, file: str | None = None) -> None:
    body = exc.body
    print(f"relayflow: {exc.status} {body.get('code', 'error')}: {body.get('message')}", file=out)
    details = body.get("details")
    if isinstance(details, list):
        for item in details:
            print(f"  {_detail_line(item, file)}", file=out)
    elif details:
        print(f"  {json.dumps(details, default=str)}", file=out)


def _detail_line(item: Any, file: str | None) -> str:
    from relayflow.definition import Problem

    if isinstance(item, dict) and {"path", "rule", "message"} <= set(item):
        return str(Problem(file or item.get("file"), item["path"], item["rule"], item["message"]))
    if isinstance(item, dict) and {"rule", "state", "message"} <= set(item):
        where = f"state {item['state']!r}" if item["state"] is not None else "the state machine"
        return f"[{item['rule']}] {where}: {item['message']}"
    if isinstance(item, dict) and {"path", "message"} <= set(item):
        return f"{item['path']}: {item['message']}"
    return json.dumps(item, default=str)


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
    from urllib.parse import quote

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
                _print_problems(exc, sys.stderr)
                status = EXIT_INVALID
                continue
            media_type = _MEDIA_TYPES.get(Path(path).suffix.lower(), "application/yaml")
            try:
                code, result = api.call(
                    "PUT",
                    f"/workflows/{quote(workflow_id, safe='')}",
                    content=text.encode("utf-8"),
                    headers={"Content-Type": media_type},
                )
            except ApiFailure as exc:
                if exc.status == 422:
                    problems = exc.body.get("details") or []
                    print(f"✗ {path}: {len(problems)} problem(s)", file=sys.stderr)
                    _print_api_failure(exc, sys.stderr, file=path)
                    status = EXIT_INVALID
                else:
                    print(f"✗ {path}", file=sys.stderr)
                    _print_api_failure(exc, sys.stderr, file=path)
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


def _run_line(run: dict[str, Any]) -> str:
    ms = f" in {run['duration_ms']:.0f} ms" if run.get("duration_ms") is not None else ""
    error = f" ({run['error']})" if run.get("error") else ""
    outcome = f", outcome {run['outcome']}" if run.get("outcome") else ""
    return (
        f"run {run['run_id']}: {str(run['status']).upper()}{ms}{error}{outcome} "
        f"(workflow {run['workflow_id']}, version {run.get('version')})"
    )


def cmd_runs_start(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    body: dict[str, Any] = {"input": _read_input(args.input)}
    if args.version is not None:
        body["version"] = args.version
    if args.dry_run:
        body["dry_run"] = True
    if args.step_through:
        body["step_through"] = True
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else {}
    with api_client(args) as api:
        code, run = api.call(
            "POST",
            f"/workflows/{quote(args.workflow_id, safe='')}/runs",
            json=body,
            headers=headers,
        )
    if args.json:
        print_json(run)
    else:
        note = "" if code == 201 else " — already started with this Idempotency-Key"
        print(_run_line(run) + note)
    return EXIT_OK


def cmd_runs_get(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    with api_client(args) as api:
        _, run = api.call("GET", f"/runs/{quote(args.run_id, safe='')}")
    if args.json:
        print_json(run)
        return EXIT_OK
    print(_run_line(run))
    if run.get("failing_step"):
        print(f"failed at step {run['failing_step']}: {run.get('cause') or run.get('error')}")
    elif run.get("cause"):
        print(f"cause: {run['cause']}")
    headers = ("step", "type", "status", "attempts", "ms", "output / error")
    rows = []
    for step in run.get("steps") or []:
        detail = would_call_summary(step.get("dry_run")) or (
            f"{step['error']}: {step.get('cause')}"
            if step.get("error")
            else _summary(step.get("output"))
        )
        ms = f"{step['duration_ms']:.0f}" if step.get("duration_ms") is not None else ""
        rows.append(
            (step["key"], step["type"], step["status"], str(step["attempts"]), ms, detail[:60])
        )
    _table(headers, rows, sys.stdout)
    return EXIT_OK


def cmd_runs_list(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    if args.parked:
        from relayflow.cli_parks import cmd_runs_list_parked

        return cmd_runs_list_parked(args)
    if not args.workflow:
        raise SystemExit("relayflow runs list: --workflow is required (or --parked)")
    params = page_query(args)
    with api_client(args) as api:
        _, page = api.call("GET", f"/workflows/{quote(args.workflow, safe='')}/runs", params=params)
    return print_page(
        args,
        page,
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


def cmd_runs_cancel(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    with api_client(args) as api:
        _, run = api.call("POST", f"/runs/{quote(args.run_id, safe='')}/cancel")
    if args.json:
        print_json(run)
    else:
        print(_run_line(run))
    return EXIT_OK


def cmd_dlq_list(args: argparse.Namespace) -> int:
    params = page_query(args)
    with api_client(args) as api:
        _, page = api.call("GET", "/dlq", params=params)
    return print_page(
        args,
        page,
        ("run", "workflow", "status", "step", "error", "retries", "next retry"),
        lambda entry: (
            entry["run_id"],
            entry["workflow_id"],
            entry["status"],
            entry.get("failing_step") or "",
            entry.get("error") or "",
            str(entry["attempts"]),
            entry.get("next_retry_at") or "",
        ),
    )


def cmd_dlq_get(args: argparse.Namespace) -> int:
    return _show(args, f"/dlq/{_segment(args.run_id)}")


def cmd_dlq_retry(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    with api_client(args) as api:
        _, result = api.call("POST", f"/dlq/{quote(args.run_id, safe='')}/retry")
    if args.json:
        print_json(result)
    else:
        print(f"run {result['run_id']} restarted (attempt {result['attempt']})")
    return EXIT_OK


def cmd_dlq_discard(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    with api_client(args) as api:
        _, entry = api.call("DELETE", f"/dlq/{quote(args.run_id, safe='')}")
    if args.json:
        print_json(entry)
    else:
        print(f"run {entry['run_id']} discarded from the DLQ")
    return EXIT_OK


def _approval_line(approval: dict[str, Any]) -> str:
    decision = approval.get("decision") or {}
    decided = f"  {decision['option']} by {decision['responder']}" if decision else ""
    return f"{approval['approval_id']}  {approval['status']}  {approval['title']}{decided}"


def cmd_approvals_list(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": args.limit, "status": args.status}
    if args.next_token:
        params["next_token"] = args.next_token
    with api_client(args) as api:
        _, page = api.call("GET", "/approvals", params=params)
    return print_page(
        args,
        page,
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
    return _show(args, f"/approvals/{_segment(args.approval_id)}")


def cmd_approvals_respond(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    body: dict[str, Any] = {"option": args.option}
    data = _json_option(args.data, "--data")
    if data is not None:
        body["data"] = data
    with api_client(args) as api:
        _, approval = api.call(
            "POST", f"/approvals/{quote(args.approval_id, safe='')}/respond", json=body
        )
    if args.json:
        print_json(approval)
    else:
        print(_approval_line(approval))
    return EXIT_OK


def _waitpoint_line(waitpoint: dict[str, Any]) -> str:
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
            print(_waitpoint_line(waitpoint))
    return EXIT_OK


def cmd_waitpoints_get(args: argparse.Namespace) -> int:
    return _show(args, f"/waitpoints/{_segment(args.waitpoint_id)}")


def cmd_waitpoints_complete(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    body = {"data": _json_option(args.data, "--data")}
    with api_client(args) as api:
        _, waitpoint = api.call(
            "POST", f"/waitpoints/{quote(args.waitpoint_id, safe='')}/complete", json=body
        )
    if args.json:
        print_json(waitpoint)
    else:
        print(_waitpoint_line(waitpoint))
    return EXIT_OK


def cmd_waitpoints_fail(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    body = {"error": args.error, "message": args.message}
    with api_client(args) as api:
        _, waitpoint = api.call(
            "POST", f"/waitpoints/{quote(args.waitpoint_id, safe='')}/fail", json=body
        )
    if args.json:
        print_json(waitpoint)
    else:
        print(_waitpoint_line(waitpoint))
    return EXIT_OK


def page_query(args: argparse.Namespace) -> dict[str, Any]:
    """``limit``, and ``status`` (where the command has it) and ``next_token`` when given, of a
    list command."""
    params: dict[str, Any] = {"limit": args.limit}
    if getattr(args, "status", None):
        params["status"] = args.status
    if args.next_token:
        params["next_token"] = args.next_token
    return params


def _segment(value: str) -> str:
    """``value`` as one URL path segment."""
    from urllib.parse import quote

    return quote(value, safe="")


def _show(args: argparse.Namespace, path: str) -> int:
    """A get command: the API's JSON answer for ``path``."""
    with api_client(args) as api:
        _, answer = api.call("GET", path)
    print_json(answer)
    return EXIT_OK


def print_page(
    args: argparse.Namespace,
    page: dict[str, Any],
    headers: tuple[str, ...],
    row: Callable[[dict[str, Any]], tuple[str, ...]],
) -> int:
    """A page of a list command: the API's JSON with ``--json``, else a table and, when there
    is more, the ``--next-token`` to pass (on stderr)."""
    if args.json:
        print_json(page)
        return EXIT_OK
    _table(headers, [row(item) for item in page["items"]], sys.stdout)
    if page.get("next_token"):
        print(f"more: --next-token {page['next_token']}", file=sys.stderr)
    return EXIT_OK


def _table(headers: tuple[str, ...], rows: list[tuple[str, ...]], out: TextIO) -> None:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)


def _keys_backend(args: argparse.Namespace) -> tuple[str, Any]:
    """``("table", ControlPlane)`` for ``--table``, else ``("api", ApiClient)`` for a local
    server's admin routes."""
    if args.table:
        from relayflow.control.service import ControlPlane
        from relayflow.dal import Dal

        return "table", ControlPlane(dal=Dal(table_name=args.table))
    url = args.api or os.environ.get(API_URL_ENV)
    if not url or not args.admin_token:
        raise UsageError(
            "pass --table NAME (a deployed table), or --api URL --admin-token TOKEN (a local "
            "server started with `relayflow serve`)"
        )
    return "api", ApiClient(url, admin_token=args.admin_token)


def cmd_keys_create(args: argparse.Namespace) -> int:
    kind, backend = _keys_backend(args)
    if kind == "table":
        key = backend.create_api_key(args.tenant, args.name).model_dump(mode="json")
    else:
        with backend:
            _, key = backend.call(
                "POST", "/admin/keys", json={"tenant": args.tenant, "name": args.name}
            )
    if args.json:
        print_json(key)
    else:
        print(f"key {key['key_id']} for tenant {key['tenant']} ({key['name']})")
        print(f"secret (shown once): {key['secret']}")
    return EXIT_OK


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    kind, backend = _keys_backend(args)
    if kind == "table":
        key = backend.revoke_api_key(args.key_id).model_dump(mode="json")
    else:
        with backend:
            _, key = backend.call("DELETE", f"/admin/keys/{quote(args.key_id, safe='')}")
    if args.json:
        print_json(key)
    else:
        print(f"key {key['key_id']} of tenant {key['tenant']} revoked at {key['revoked_at']}")
    return EXIT_OK


def _api_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api", help=f"control API URL (default: ${API_URL_ENV})")
    parser.add_argument("--api-key", help=f"API key (default: ${API_KEY_ENV})")
    parser.add_argument("--json", action="store_true", help="print the API's JSON answer")


def _keys_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", help="the deployed Relayflow DynamoDB table (direct access)")
    parser.add_argument("--api", help=f"a local server's URL (default: ${API_URL_ENV})")
    parser.add_argument("--admin-token", help="the admin token `relayflow serve` printed")
    parser.add_argument("--json", action="store_true", help="print the key as JSON")


def add_api_commands(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the control API locally (local runtime, in memory)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument(
        "--time-scale",
        type=float,
        default=0.001,
        help="multiply Wait and retry delays by this (default 0.001; 1 = real time)",
    )
    p.add_argument(
        "--rate-limit",
        type=float,
        default=50.0,
        help="requests per second per API key before 429 (default 50, bursts of 4x)",
    )
    p.add_argument(
        "--aws-port",
        type=int,
        help="also serve the in-memory AWS (moto) on this port, e.g. 4566, for `sam local "
        "invoke --env-vars events/env.json` (docs/development.md)",
    )
    p.add_argument(
        "--aws-host",
        help="address the in-memory AWS listens on (default: --host). On Linux, a `sam local` "
        "container reaches the host through the Docker bridge, not 127.0.0.1: use 0.0.0.0 "
        "(or the bridge's address, e.g. 172.17.0.1)",
    )
    p.add_argument(
        "--resources",
        help="YAML file of tables, queues, buses, identities and secrets to create in moto "
        "first (as `relayflow run --resources`)",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("deploy", help="register (PUT) workflow definitions with the control API")
    p.add_argument("files", nargs="+")
    _api_options(p)
    p.set_defaults(func=cmd_deploy)

    runs = sub.add_parser("runs", help="start, inspect and cancel runs").add_subparsers(
        dest="runs_command", required=True
    )
    p = runs.add_parser("start", help="start a run of a workflow")
    p.add_argument("workflow_id")
    p.add_argument("--input", help="trigger payload: JSON text, or @file.json")
    p.add_argument("--idempotency-key", help="a repeat with the same key returns the same run")
    p.add_argument("--version", type=int, help="run this version instead of the live one")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="a dry run: steps that act record the call they would make instead",
    )
    p.add_argument(
        "--step-through",
        action="store_true",
        help="pause before each step until `relayflow runs continue`",
    )
    _api_options(p)
    p.set_defaults(func=cmd_runs_start)
    p = runs.add_parser("get", help="a run and its step timeline")
    p.add_argument("run_id")
    _api_options(p)
    p.set_defaults(func=cmd_runs_get)
    p = runs.add_parser("list", help="a workflow's runs, newest first (--parked: parked runs)")
    p.add_argument("--workflow")
    p.add_argument("--parked", action="store_true", help="the tenant's parked runs instead")
    p.add_argument(
        "--status",
        choices=("queued", "running", "parked", "succeeded", "failed", "timed_out", "aborted"),
    )
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--next-token")
    _api_options(p)
    p.set_defaults(func=cmd_runs_list)
    p = runs.add_parser("cancel", help="abort a running run")
    p.add_argument("run_id")
    _api_options(p)
    p.set_defaults(func=cmd_runs_cancel)
    from relayflow.cli_runmodes import add_continue_parser

    add_continue_parser(runs, _api_options)
    from relayflow.cli_parks import add_resume_parser

    add_resume_parser(runs, _api_options)
    from relayflow.cli_resources import add_rerun_parser, add_resource_commands

    add_rerun_parser(runs, _api_options)
    add_resource_commands(sub, _api_options)

    dlq = sub.add_parser("dlq", help="failed runs: list, retry, discard").add_subparsers(
        dest="dlq_command", required=True
    )
    p = dlq.add_parser("list", help="the dead-letter queue, newest first")
    p.add_argument("--status", choices=("pending", "retrying", "retried", "exhausted", "discarded"))
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--next-token")
    _api_options(p)
    p.set_defaults(func=cmd_dlq_list)
    for name, func, text in (
        ("get", cmd_dlq_get, "one entry: error, failing step, outputs so far, retry state"),
        ("retry", cmd_dlq_retry, "restart the run under its run id; finished steps are kept"),
        ("discard", cmd_dlq_discard, "no more retries for this run"),
    ):
        p = dlq.add_parser(name, help=text)
        p.add_argument("run_id")
        _api_options(p)
        p.set_defaults(func=func)

    approvals = sub.add_parser(
        "approvals", help="list and decide approval requests"
    ).add_subparsers(dest="approvals_command", required=True)
    p = approvals.add_parser("list", help="approval requests, oldest first (default: pending)")
    p.add_argument("--status", choices=("pending", "decided", "expired"), default="pending")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--next-token")
    _api_options(p)
    p.set_defaults(func=cmd_approvals_list)
    p = approvals.add_parser("get", help="one approval request")
    p.add_argument("approval_id")
    _api_options(p)
    p.set_defaults(func=cmd_approvals_get)
    p = approvals.add_parser("respond", help="decide an approval request; the run resumes")
    p.add_argument("approval_id")
    p.add_argument("--option", required=True, help="one of the request's options")
    p.add_argument("--data", help="form data as JSON, or @file")
    _api_options(p)
    p.set_defaults(func=cmd_approvals_respond)

    waitpoints = sub.add_parser(
        "waitpoints", help="find, complete and fail waitpoints"
    ).add_subparsers(dest="waitpoints_command", required=True)
    p = waitpoints.add_parser("list", help="a run's waitpoints, or the one a key names")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", help="a run id")
    which.add_argument("--key", help="a rendered idempotency key")
    _api_options(p)
    p.set_defaults(func=cmd_waitpoints_list)
    p = waitpoints.add_parser("get", help="one waitpoint")
    p.add_argument("waitpoint_id")
    _api_options(p)
    p.set_defaults(func=cmd_waitpoints_get)
    p = waitpoints.add_parser("complete", help="complete a waitpoint; the run resumes")
    p.add_argument("waitpoint_id")
    p.add_argument("--data", help="the step's output as JSON, or @file")
    _api_options(p)
    p.set_defaults(func=cmd_waitpoints_complete)
    p = waitpoints.add_parser("fail", help="fail a waitpoint; the run takes its failure route")
    p.add_argument("waitpoint_id")
    p.add_argument("--error", help="a short error code")
    p.add_argument("--message", help="what went wrong")
    _api_options(p)
    p.set_defaults(func=cmd_waitpoints_fail)

    keys = sub.add_parser("keys", help="create and revoke API keys").add_subparsers(
        dest="keys_command", required=True
    )
    p = keys.add_parser("create", help="create an API key (its secret is shown once)")
    p.add_argument("--tenant", required=True)
    p.add_argument("--name", required=True)
    _keys_options(p)
    p.set_defaults(func=cmd_keys_create)
    p = keys.add_parser("revoke", help="revoke an API key by its key id")
    p.add_argument("key_id")
    _keys_options(p)
    p.set_defaults(func=cmd_keys_revoke)
