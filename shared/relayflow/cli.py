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
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from relayflow.definition import DefinitionError, Workflow, load_workflow

EXIT_OK, EXIT_RUN_FAILED, EXIT_INVALID, EXIT_COMPILER_BUG = 0, 1, 2, 3


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
            from relayflow.compiler.docsize import document_size_problems

            warnings = document_size_problems(workflow)
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


def cmd_compile(args: argparse.Namespace) -> int:
    from relayflow.compiler import compile_workflow
    from relayflow.compiler.check import assert_valid_machine

    compiled = compile_workflow(_load(args.file))
    assert_valid_machine(compiled.asl)
    text = json.dumps(compiled.asl, indent=2) + "\n"
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
        print(f"    ! {failed.get('error', 'failed')}", file=sys.stderr, flush=True)


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
    headers = ("step", "type", "runs on", "status", "attempts", "ms", "output / error")
    rows = []
    for step in result.steps:
        simulated = would_call_summary(step.dry_run)
        detail = f"{step.error}: {step.cause}" if step.error else _summary(step.output)
        detail = simulated or detail
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
    """The workflows ``workflow``'s sub_workflow steps start (and theirs, in turn), found by
    ``id`` among the definitions in ``directory``. Files that do not load are skipped unless
    one of them is needed."""
    wanted = {s.workflow_id for s in workflow.steps.values() if s.type == "sub_workflow"}
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
        pending += [s.workflow_id for s in child.steps.values() if s.type == "sub_workflow"]
    return found_all


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


def cmd_run(args: argparse.Namespace) -> int:
    from relayflow.cli_runmodes import step_prompt
    from relayflow.runner import run_workflow_within

    workflow = _load(args.file)
    trigger = _read_input(args.input)
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
        result = run_workflow_within(
            max(0.0, args.timeout - _spent(args)),
            workflow,
            trigger,
            time_scale=args.time_scale,
            on_event=None if args.json else _progress,
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
        print(
            f"run {result.run_id}: {result.status.upper()} in {ms}, "
            f"{result.lambda_invocations} Lambda invocation(s)"
        )
        _print_ai_usage(result, sys.stdout)
        if result.error:
            print(f"error: {result.error}: {result.cause}")
        else:
            steps = (result.output or {}).get("steps") if isinstance(result.output, dict) else None
            print("output steps:", json.dumps(steps, indent=2, default=str))
    return EXIT_OK if result.succeeded else EXIT_RUN_FAILED


def cmd_schedule_preview(args: argparse.Namespace) -> int:
    from datetime import datetime

    from relayflow.triggers.cron import (
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
    plural = "s (either fires)" if len(expressions) > 1 else ""
    print(f"EventBridge Scheduler expression{plural}, ScheduleExpressionTimezone {tz}:")
    for expression in expressions:
        print(f"  {expression}")
    print(f"next {len(times)} fire times (croniter):")
    for fire_time in times:
        note = scheduler_dst_note(args.cron, fire_time)
        print(f"  {fire_time.isoformat()}" + (f"  ! {note}" if note else ""))
    return EXIT_OK


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


def _api_client(args: argparse.Namespace) -> ApiClient:
    url = args.api or os.environ.get(API_URL_ENV)
    key = args.api_key or os.environ.get(API_KEY_ENV)
    if not url:
        raise UsageError(f"pass --api URL (or set {API_URL_ENV})")
    if not key:
        raise UsageError(f"pass --api-key KEY (or set {API_KEY_ENV})")
    return ApiClient(url, api_key=key)


def _print_json(value: Any) -> None:
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
    with _api_client(args) as api:
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
    return (
        f"run {run['run_id']}: {str(run['status']).upper()}{ms}{error} "
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
    with _api_client(args) as api:
        code, run = api.call(
            "POST",
            f"/workflows/{quote(args.workflow_id, safe='')}/runs",
            json=body,
            headers=headers,
        )
    if args.json:
        _print_json(run)
    else:
        note = "" if code == 201 else " — already started with this Idempotency-Key"
        print(_run_line(run) + note)
    return EXIT_OK


def cmd_runs_get(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    with _api_client(args) as api:
        _, run = api.call("GET", f"/runs/{quote(args.run_id, safe='')}")
    if args.json:
        _print_json(run)
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

    params = _page_query(args)
    with _api_client(args) as api:
        _, page = api.call("GET", f"/workflows/{quote(args.workflow, safe='')}/runs", params=params)
    return _print_page(
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

    with _api_client(args) as api:
        _, run = api.call("POST", f"/runs/{quote(args.run_id, safe='')}/cancel")
    if args.json:
        _print_json(run)
    else:
        print(_run_line(run))
    return EXIT_OK


def cmd_dlq_list(args: argparse.Namespace) -> int:
    params = _page_query(args)
    with _api_client(args) as api:
        _, page = api.call("GET", "/dlq", params=params)
    return _print_page(
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

    with _api_client(args) as api:
        _, result = api.call("POST", f"/dlq/{quote(args.run_id, safe='')}/retry")
    if args.json:
        _print_json(result)
    else:
        print(f"run {result['run_id']} restarted (attempt {result['attempt']})")
    return EXIT_OK


def cmd_dlq_discard(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    with _api_client(args) as api:
        _, entry = api.call("DELETE", f"/dlq/{quote(args.run_id, safe='')}")
    if args.json:
        _print_json(entry)
    else:
        print(f"run {entry['run_id']} discarded from the DLQ")
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


def _approval_line(approval: dict[str, Any]) -> str:
    decision = approval.get("decision") or {}
    decided = f"  {decision['option']} by {decision['responder']}" if decision else ""
    return f"{approval['approval_id']}  {approval['status']}  {approval['title']}{decided}"


def cmd_approvals_list(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": args.limit, "status": args.status}
    if args.next_token:
        params["next_token"] = args.next_token
    with _api_client(args) as api:
        _, page = api.call("GET", "/approvals", params=params)
    return _print_page(
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
    with _api_client(args) as api:
        _, approval = api.call(
            "POST", f"/approvals/{quote(args.approval_id, safe='')}/respond", json=body
        )
    if args.json:
        _print_json(approval)
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
    with _api_client(args) as api:
        _, page = api.call("GET", "/waitpoints", params=params)
    if args.json:
        _print_json(page)
    else:
        for waitpoint in page["items"]:
            print(_waitpoint_line(waitpoint))
    return EXIT_OK


def cmd_waitpoints_get(args: argparse.Namespace) -> int:
    return _show(args, f"/waitpoints/{_segment(args.waitpoint_id)}")


def cmd_waitpoints_complete(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    body = {"data": _json_option(args.data, "--data")}
    with _api_client(args) as api:
        _, waitpoint = api.call(
            "POST", f"/waitpoints/{quote(args.waitpoint_id, safe='')}/complete", json=body
        )
    if args.json:
        _print_json(waitpoint)
    else:
        print(_waitpoint_line(waitpoint))
    return EXIT_OK


def cmd_waitpoints_fail(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    body = {"error": args.error, "message": args.message}
    with _api_client(args) as api:
        _, waitpoint = api.call(
            "POST", f"/waitpoints/{quote(args.waitpoint_id, safe='')}/fail", json=body
        )
    if args.json:
        _print_json(waitpoint)
    else:
        print(_waitpoint_line(waitpoint))
    return EXIT_OK


def _page_query(args: argparse.Namespace) -> dict[str, Any]:
    """``limit``, and ``status`` and ``next_token`` when given, of a list command."""
    params: dict[str, Any] = {"limit": args.limit}
    if args.status:
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
    with _api_client(args) as api:
        _, answer = api.call("GET", path)
    _print_json(answer)
    return EXIT_OK


def _print_page(
    args: argparse.Namespace,
    page: dict[str, Any],
    headers: tuple[str, ...],
    row: Callable[[dict[str, Any]], tuple[str, ...]],
) -> int:
    """A page of a list command: the API's JSON with ``--json``, else a table and, when there
    is more, the ``--next-token`` to pass (on stderr)."""
    if args.json:
        _print_json(page)
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
        _print_json(key)
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
        _print_json(key)
    else:
        print(f"key {key['key_id']} of tenant {key['tenant']} revoked at {key['revoked_at']}")
    return EXIT_OK


def _stop_on_sigterm() -> None:
    """SIGTERM (a process manager, ``kill``) stops the server as Ctrl-C does."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def cmd_serve(args: argparse.Namespace) -> int:
    import threading

    from relayflow.local.serve import LocalServer

    try:
        server = LocalServer(
            args.host,
            args.port,
            time_scale=args.time_scale,
            rate_per_second=args.rate_limit,
            rate_burst=max(1, int(args.rate_limit * 4)),
            access_log=sys.stderr,
            maintenance_interval=60.0,
        )
        server.__enter__()
        aws = _expose_aws(args.host, args.aws_port)
    except OSError as exc:
        print(
            f"relayflow: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr
        )
        return EXIT_RUN_FAILED
    try:
        print(f"Relayflow control API on {server.url} (Swagger UI: {server.url}/swagger)")
        print(f"API key of tenant 'local': {server.bootstrap_key}")
        print(f"admin token (relayflow keys --admin-token): {server.admin_token}")
        print(f"  export {API_URL_ENV}={server.url} {API_KEY_ENV}={server.bootstrap_key}")
        if aws is not None:
            print(f"in-memory AWS on {aws.url} (sam local invoke --env-vars events/env.json)")
        print("Ctrl-C stops the server; everything lives in memory until then.", flush=True)
        _stop_on_sigterm()
        threading.Event().wait()
    except KeyboardInterrupt:
        print("stopping", file=sys.stderr)
    finally:
        if aws is not None:
            aws.stop()
        server.__exit__(None, None, None)
    return EXIT_OK


def _expose_aws(host: str, port: int | None) -> Any:
    """``--aws-port``: serve's in-memory AWS on a port (relayflow.local.aws_server)."""
    if port is None:
        return None
    from relayflow.local.aws_server import ExposedAws

    return ExposedAws(host, port).__enter__()


def _api_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api", help=f"control API URL (default: ${API_URL_ENV})")
    parser.add_argument("--api-key", help=f"API key (default: ${API_KEY_ENV})")
    parser.add_argument("--json", action="store_true", help="print the API's JSON answer")


def _keys_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", help="the deployed Relayflow DynamoDB table (direct access)")
    parser.add_argument("--api", help=f"a local server's URL (default: ${API_URL_ENV})")
    parser.add_argument("--admin-token", help="the admin token `relayflow serve` printed")
    parser.add_argument("--json", action="store_true", help="print the key as JSON")


def _add_api_commands(sub: Any) -> None:
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
        "invoke --env-vars events/env.json` (docs/operations.md)",
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
    p = runs.add_parser("list", help="a workflow's runs, newest first")
    p.add_argument("--workflow", required=True)
    p.add_argument(
        "--status", choices=("queued", "running", "succeeded", "failed", "timed_out", "aborted")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relayflow", description=__doc__.split("\n")[0])
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
    p.set_defaults(func=cmd_schedule_preview)
    _add_api_commands(sub)
    from relayflow.cli_ops import add_ops_commands

    add_ops_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from relayflow.compiler.check import CompiledMachineInvalid

    called_at = time.monotonic()
    args = build_parser().parse_args(argv)
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
