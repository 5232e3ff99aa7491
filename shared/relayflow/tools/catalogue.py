"""The tool catalogue: which tool names exist, a cheap static check for definitions, and the
dispatch a tool step runs.

Tool names:

* ``aws.<service>.<action>``: a built-in AWS action (:data:`relayflow.tools.aws.AWS_TOOLS`);
* ``http.<name>``: a call to the HTTP tool declared as ``http_tools.<name>``, with
  ``method``, ``path``, ``query``, ``headers`` and ``body`` in the step's args;
* ``http.<name>.<operation>``: one of that tool's declared operations, whose templates see
  the step's rendered args as ``args``.

Nothing here imports boto3 or httpx at module import; each is loaded by the call that needs
it, so validation and cold starts stay cheap.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from relayflow.errors import ToolNotFound
from relayflow.tools.http import HTTP_METHODS

#: Arg names of the generic ``http.<name>`` call.
HTTP_CALL_ARGS = ("method", "path", "query", "headers", "body")

Problem = tuple[str, str, str]


def aws_tool_names() -> list[str]:
    """Every built-in AWS tool, sorted."""
    from relayflow.tools.aws import AWS_TOOLS

    return sorted(AWS_TOOLS)


def split_http_tool(tool: str) -> tuple[str, str | None]:
    """``http.billing.create_invoice`` → ``("billing", "create_invoice")``."""
    parts = tool.split(".")
    if len(parts) not in (2, 3) or parts[0] != "http" or not parts[1]:
        raise ToolNotFound(
            f"{tool!r} is not an HTTP tool name (http.<name> or http.<name>.<operation>)",
            tool=tool,
        )
    return parts[1], (parts[2] if len(parts) == 3 else None)


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


def _suggest(name: str, candidates: list[str], cutoff: float = 0.6) -> str:
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=cutoff)
    if close:
        return "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    if candidates:
        return "; known: " + ", ".join(candidates)
    return ""


def _operations(declaration: Any) -> list[str]:
    if isinstance(declaration, Mapping):
        operations = declaration.get("operations")
    else:
        operations = getattr(declaration, "operations", None)
    return sorted(operations) if isinstance(operations, Mapping) else []


def check_tool(tool: str, args: Any, http_tools: Mapping[str, Any]) -> list[Problem]:
    """Static problems of a tool step, as ``(path suffix, rule, message)``.

    The suffix is relative to the step (``tool``, ``args``, ``args.tabel``). Rules:
    ``unknown-tool`` (not in the catalogue, an undeclared HTTP tool or operation) and
    ``tool-args`` (args not an object; for AWS tools, missing required or unknown arg
    names). Args that are one template (``"{{ steps.x.output }}"``) are only checked at run
    time. No I/O, no boto3."""
    if not isinstance(tool, str):
        return [("tool", "unknown-tool", "tool must be a string such as aws.sqs.send_message")]
    problems: list[Problem] = []
    if not _is_template(args) and not isinstance(args, Mapping):
        problems.append(("args", "tool-args", f"args must be an object, got {_kind(args)}"))
    if tool.startswith("aws."):
        return _check_aws(tool, args) + problems
    if tool.startswith("http."):
        return _check_http(tool, args, http_tools) + problems
    return [
        (
            "tool",
            "unknown-tool",
            f"unknown tool {tool!r}: tool names start with aws. or http.",
        )
    ]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), f"a {type(value).__name__}"
    )


def _check_aws(tool: str, args: Any) -> list[Problem]:
    from relayflow.tools.aws import AWS_TOOLS

    spec = AWS_TOOLS.get(tool)
    if spec is None:
        return [
            (
                "tool",
                "unknown-tool",
                f"unknown tool {tool!r}{_suggest(tool, sorted(AWS_TOOLS), 0.8)}",
            )
        ]
    if not isinstance(args, Mapping):
        return []
    problems: list[Problem] = []
    allowed = spec.arg_names()
    for name in spec.required_args():
        if name not in args:
            problems.append(("args", "tool-args", f"{tool} needs args.{name}"))
    for name in args:
        if name not in allowed:
            problems.append(
                (
                    f"args.{name}",
                    "tool-args",
                    f"{tool} has no arg {name!r}{_suggest(str(name), allowed)}",
                )
            )
    return problems


def _check_http(tool: str, args: Any, http_tools: Mapping[str, Any]) -> list[Problem]:
    try:
        name, operation = split_http_tool(tool)
    except ToolNotFound as exc:
        return [("tool", "unknown-tool", exc.message)]
    declared = sorted(http_tools)
    if name not in http_tools:
        return [
            (
                "tool",
                "unknown-tool",
                f"HTTP tool {name!r} is not declared under http_tools{_suggest(name, declared)}",
            )
        ]
    if operation is not None:
        operations = _operations(http_tools[name])
        if operation not in operations:
            return [
                (
                    "tool",
                    "unknown-tool",
                    f"HTTP tool {name!r} has no operation {operation!r}"
                    f"{_suggest(operation, operations)}",
                )
            ]
        return []
    problems: list[Problem] = []
    if isinstance(args, Mapping):
        for key in args:
            if key not in HTTP_CALL_ARGS:
                problems.append(
                    (
                        f"args.{key}",
                        "tool-args",
                        f"{tool} takes {', '.join(HTTP_CALL_ARGS)}; not {key!r}",
                    )
                )
        method = args.get("method")
        if isinstance(method, str) and not _is_template(method) and method not in HTTP_METHODS:
            problems.append(
                ("args.method", "tool-args", f"method must be one of {', '.join(HTTP_METHODS)}")
            )
    return problems


def _aws_spec(tool: str) -> Any:
    """The built-in AWS tool named ``tool``; ``Relayflow.ToolNotFound`` when there is none."""
    from relayflow.tools.aws import AWS_TOOLS

    spec = AWS_TOOLS.get(tool)
    if spec is None:
        raise ToolNotFound(
            f"unknown tool {tool!r}{_suggest(tool, sorted(AWS_TOOLS), 0.8)}", tool=tool
        )
    return spec


def _http_name(tool: str, http_tool: Any) -> tuple[str, str | None]:
    """``(name, operation)`` of an HTTP tool whose declaration the step's config carries."""
    name, operation = split_http_tool(tool)
    if http_tool is None:
        raise ToolNotFound(
            f"HTTP tool {name!r} has no declaration in the step's config "
            "(declare it under http_tools)",
            tool=tool,
        )
    return name, operation


def _unknown(tool: str) -> ToolNotFound:
    return ToolNotFound(f"unknown tool {tool!r}: tool names start with aws. or http.", tool=tool)


def run_tool(tool: str, args: Any, *, doc: Mapping[str, Any], http_tool: Any = None) -> Any:
    """Perform ``tool`` with its rendered ``args``; the step's output.

    ``http_tool`` is the HTTP tool declaration the compiler baked into the step's config
    (needed for ``http.*`` tools). An unknown name is ``Relayflow.ToolNotFound``."""
    if tool.startswith("aws."):
        from relayflow.tools.aws import run_aws_tool

        _aws_spec(tool)
        return run_aws_tool(tool, args)
    if tool.startswith("http."):
        from relayflow.tools.http import call_http_tool

        name, operation = _http_name(tool, http_tool)
        return call_http_tool(name, operation, http_tool, args, doc)
    raise _unknown(tool)


def would_call(
    tool: str, args: Any, *, doc: Mapping[str, Any], http_tool: Any = None
) -> dict[str, Any]:
    """The call ``run_tool`` would make, for a dry run (:mod:`relayflow.tools.call_records`):
    args are checked as for a real call (bad ones raise the same named errors) and no
    secret is read, so credential headers are recorded redacted."""
    from relayflow.tools import call_records

    if tool.startswith("aws."):
        from relayflow.tenancy import TenantBoundary
        from relayflow.tools.aws import parse_args
        from relayflow.tools.guard import check_tool_call
        from relayflow.triggers.publish import reserved_problem

        spec = _aws_spec(tool)
        # A dry run refuses what the real call would refuse.
        parsed = parse_args(spec, args)
        if check_tool_call(tool, parsed):
            problem = reserved_problem(parsed.source, parsed.detail_type)
            if problem is not None:
                raise TenantBoundary(f"{tool}: {problem}", tool=tool, field=problem.field)
        else:
            from relayflow.tenancy import acting_tenant
            from relayflow.tools.tenant_data import check_tenant_data

            check_tenant_data(tool, parsed, acting_tenant(), dry_run=True)
        return call_records.aws_call(tool, spec.iam_action, args)
    if tool.startswith("http."):
        from relayflow.tools.http import prepare_http_tool

        name, operation = _http_name(tool, http_tool)
        prepared = prepare_http_tool(name, operation, http_tool, args, doc)
        secrets = prepared.auth_header_names()
        headers = {**prepared.headers, **dict.fromkeys(secrets, call_records.REDACTED)}
        return call_records.http_call(
            prepared.method,
            prepared.url,
            headers,
            prepared.body,
            secret_names=secrets,
            query=prepared.params,
        )
    raise _unknown(tool)


def iam_actions(tool: str) -> list[str]:
    """IAM actions the tool function needs to run ``tool`` (none for HTTP tools; their
    secrets need ``secretsmanager:GetSecretValue`` or ``ssm:GetParameter``)."""
    if not tool.startswith("aws."):
        return []
    from relayflow.tools.aws import AWS_TOOLS

    spec = AWS_TOOLS.get(tool)
    return [spec.iam_action] if spec is not None else []
