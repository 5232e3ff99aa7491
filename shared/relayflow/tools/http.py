"""HTTP tools: APIs declared once under ``http_tools`` and called by tool steps.

``http.<name>`` takes ``method``, ``path``, ``query``, ``headers`` and ``body`` from the
step's args. ``http.<name>.<operation>`` renders the operation's templates against the state
document plus ``args`` (the step's rendered args). Either way the URL is ``base_url`` +
path: a path cannot change the scheme, host or port, nor climb out of the base path.

Requests go through :mod:`relayflow.net.http` (SSRF guard, pinned connections, named errors
for non-2xx answers). Auth secrets come from :mod:`relayflow.tools.secrets` and never reach
a log line, an error message or the step output.

The helpers :func:`encode_body` and :func:`response_output` are shared with the
``webhook_out`` and ``custom`` steps, so every outbound call encodes and reports the same way.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from relayflow.errors import InvalidArgsError, ToolNotFound
from relayflow.expressions import render
from relayflow.expressions.templates import text_form

#: The methods an HTTP tool call (and a webhook_out step) may use.
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
#: Methods that carry no request body: a body configured for them is never sent.
BODYLESS_METHODS = frozenset({"GET", "HEAD"})
#: Response headers a step output keeps (the others are rarely useful and often large).
KEPT_RESPONSE_HEADERS = ("content-type", "etag", "location")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DOT_SEGMENT = re.compile(r"(^|/)(\.|%2e){1,2}(/|$)", re.IGNORECASE)


# --------------------------------------------------------------------------- shared helpers


def encode_body(body: Any) -> tuple[bytes | None, str | None]:
    """The exact bytes sent for ``body`` and their content type: nothing for ``None``, UTF-8
    text for a string, compact JSON for every other value."""
    if body is None:
        return None, None
    if isinstance(body, str):
        return body.encode(), "text/plain; charset=utf-8"
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode(), "application/json"


def header_values(headers: Mapping[str, Any] | None) -> dict[str, str]:
    """Rendered headers as text; a header whose value rendered to null is left out."""
    return {
        str(name): text_form(value) for name, value in (headers or {}).items() if value is not None
    }


def has_header(headers: Mapping[str, str], name: str) -> bool:
    return any(key.lower() == name.lower() for key in headers)


def response_output(response: Any) -> dict[str, Any]:
    """A step output for an HTTP answer: status, the kept headers, the parsed body."""
    from relayflow.net.http import parse_body

    kept = {
        name: response.headers[name] for name in KEPT_RESPONSE_HEADERS if name in response.headers
    }
    return {"status": response.status_code, "headers": kept, "body": parse_body(response)}


def query_params(query: Mapping[str, Any] | None) -> dict[str, str | list[str]]:
    """Query values as text: null dropped, lists repeated, booleans ``true``/``false``."""
    params: dict[str, str | list[str]] = {}
    for name, value in (query or {}).items():
        if value is None:
            continue
        if isinstance(value, list):
            params[str(name)] = [text_form(item) for item in value if item is not None]
        else:
            params[str(name)] = text_form(value)
    return params


def join_url(base_url: str, path: Any, *, tool: str) -> str:
    """``base_url`` + ``path``, refusing any path that would leave the declared API."""
    if path is None:
        path = ""
    if not isinstance(path, str):
        raise InvalidArgsError(f"{tool}: path must be a string", tool=tool, field="path")
    target = path.split("?", 1)[0].split("#", 1)[0]
    if (
        "://" in path
        or path.startswith("//")
        or "\\" in path
        or _SCHEME.match(path)
        or _DOT_SEGMENT.search(target)
    ):
        raise InvalidArgsError(
            f"{tool}: path {path!r} must be relative to the tool's base_url (no scheme, host, "
            "'//', '\\' or '..' segments)",
            tool=tool,
            field="path",
        )
    if _CONTROL.search(path):
        raise InvalidArgsError(
            f"{tool}: path must not hold control characters", tool=tool, field="path"
        )
    if path and not path.startswith(("/", "?")):
        path = "/" + path
    url = base_url.rstrip("/") + path
    import httpx

    from relayflow.errors import SsrfBlocked
    from relayflow.net.ssrf import redact_url

    # httpx refuses some URLs the guard never sees (an octal address such as 0177.0.0.1, a
    # control character): a named error, never httpx's InvalidURL.
    try:
        base = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise SsrfBlocked(
            f"blocked: {tool}'s base_url is not a URL the HTTP client accepts ({exc})",
            tool=tool,
            url=redact_url(base_url),
            rule="invalid-url",
        ) from None
    try:
        joined = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise InvalidArgsError(
            f"{tool}: path {path!r} does not make a valid URL ({exc})", tool=tool, field="path"
        ) from None
    if (base.scheme, base.host, base.port) != (joined.scheme, joined.host, joined.port):
        raise InvalidArgsError(
            f"{tool}: path {path!r} changes the tool's host", tool=tool, field="path"
        )
    return url


# --------------------------------------------------------------------------- templates + args


def render_with_args(value: Any, doc: Mapping[str, Any], args: Any) -> Any:
    """Render an operation's templates against the document with the step's rendered
    ``args`` as one more root."""
    return render(value, {**doc, "args": args})


# --------------------------------------------------------------------------- calls


class HttpCallArgs(BaseModel):
    """Args of a generic ``http.<name>`` call."""

    model_config = ConfigDict(extra="forbid")

    method: str = Field("GET", description="GET, POST, PUT, PATCH or DELETE.")
    path: str = Field("/", description="Appended to base_url.")
    query: dict[str, Any] = Field(default_factory=dict)
    headers: dict[str, Any] = Field(default_factory=dict)
    body: Any = None


@dataclass
class Call:
    """One rendered request of an HTTP tool, before auth and encoding."""

    method: str
    path: Any
    query: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, Any] = field(default_factory=dict)
    body: Any = None


def _declaration(tool: str, declaration: Any) -> Any:
    from relayflow.definition.models import HttpTool

    if isinstance(declaration, HttpTool):
        return declaration
    try:
        return HttpTool.model_validate(declaration)
    except ValidationError as exc:
        raise InvalidArgsError(
            f"{tool}: malformed HTTP tool declaration: {exc.errors(include_url=False)}",
            tool=tool,
        ) from exc


def _generic_call(tool: str, args: Any) -> Call:
    if not isinstance(args, Mapping):
        raise InvalidArgsError(f"{tool}: args must be an object", tool=tool)
    try:
        parsed = HttpCallArgs.model_validate(args)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidArgsError(
            f"{tool}: args.{where}: {first['msg']}", tool=tool, field=where
        ) from None
    method = parsed.method.upper()
    if method not in HTTP_METHODS:
        raise InvalidArgsError(
            f"{tool}: method must be one of {', '.join(HTTP_METHODS)}, got {parsed.method!r}",
            tool=tool,
            field="method",
        )
    return Call(method, parsed.path, parsed.query, parsed.headers, parsed.body)


def _operation_call(operation: Any, doc: Mapping[str, Any], args: Any) -> Call:
    return Call(
        method=operation.method,
        path=render_with_args(operation.path, doc, args),
        query=render_with_args(operation.query, doc, args),
        headers=render_with_args(operation.headers, doc, args),
        body=render_with_args(operation.body, doc, args),
    )


def auth_headers(auth: Any, body: bytes) -> dict[str, str]:
    """The headers that authenticate a request (values read from the secret store)."""
    from relayflow.tools.secrets import resolve_secret

    if auth is None:
        return {}
    if auth.type == "bearer":
        return {"Authorization": f"Bearer {resolve_secret(auth.token)}"}
    if auth.type == "basic":
        pair = f"{auth.username}:{resolve_secret(auth.password)}".encode()
        return {"Authorization": f"Basic {base64.b64encode(pair).decode()}"}
    if auth.type == "api_key":
        return {auth.header: resolve_secret(auth.key)}
    from relayflow.net.http import sign_body

    return {auth.header: sign_body(body, resolve_secret(auth.secret))}


@dataclass
class PreparedCall:
    """An HTTP tool's request, rendered and encoded, before its credentials are added."""

    tool: Any
    name: str
    method: str
    url: str
    headers: dict[str, str]
    params: dict[str, str | list[str]]
    content: bytes | None
    body: Any

    def auth_header_names(self) -> frozenset[str]:
        """The headers the tool's auth sets (their values are secrets)."""
        auth = self.tool.auth
        if auth is None:
            return frozenset()
        if auth.type in ("bearer", "basic"):
            return frozenset({"Authorization"})
        return frozenset({auth.header})


def prepare_http_tool(
    name: str, operation: str | None, declaration: Any, args: Any, doc: Mapping[str, Any]
) -> PreparedCall:
    """Render and encode one call of the HTTP tool ``name`` (an operation, or a generic
    call), without reading any secret. Bad args raise ``Relayflow.InvalidArgs``."""
    tool_name = f"http.{name}" + (f".{operation}" if operation else "")
    tool = _declaration(tool_name, declaration)
    if operation is None:
        call = _generic_call(tool_name, args)
    else:
        declared = tool.operations.get(operation)
        if declared is None:
            raise ToolNotFound(f"HTTP tool {name!r} has no operation {operation!r}", tool=tool_name)
        call = _operation_call(declared, doc, args)
    url = join_url(tool.base_url, call.path, tool=tool_name)
    headers = {**tool.headers, **header_values(call.headers)}
    content, content_type = encode_body(call.body)
    if content_type and not has_header(headers, "content-type"):
        headers["Content-Type"] = content_type
    return PreparedCall(
        tool, tool_name, call.method, url, headers, query_params(call.query), content, call.body
    )


def call_http_tool(
    name: str, operation: str | None, declaration: Any, args: Any, doc: Mapping[str, Any]
) -> dict[str, Any]:
    """Call the HTTP tool ``name`` (one of its operations, or a generic call) and return
    ``{"status", "headers", "body"}``. Non-2xx answers raise through ``raise_for_status``."""
    prepared = prepare_http_tool(name, operation, declaration, args, doc)
    tool, headers, content = prepared.tool, prepared.headers, prepared.content
    secret_headers = auth_headers(tool.auth, content or b"")
    for key in [k for k in headers if any(k.lower() == s.lower() for s in secret_headers)]:
        del headers[key]
    headers.update(secret_headers)

    from relayflow.net.http import raise_for_status, request

    response = request(
        prepared.method,
        prepared.url,
        headers=headers,
        params=prepared.params or None,
        content=content,
        timeout=tool.timeout_seconds,
        # The client drops Authorization on a cross-origin redirect, but not a custom key
        # header: an api_key tool follows no redirect, so its key never reaches another host.
        max_redirects=0 if tool.auth is not None and tool.auth.type == "api_key" else 5,
    )
    raise_for_status(response, secret_headers.values())
    return response_output(response)
