"""The record of a call a dry run would have made (:mod:`relayflow.steps.dry_run`): its
shapes, ``{"kind": "aws", "tool", "action", "args"}`` and ``{"kind": "http", "method",
"url", "headers", "body"}``, with every credential header's value replaced by
:data:`REDACTED`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: What a credential or signature header's value is recorded as.
REDACTED = "[redacted]"
#: Header names whose values are credentials, whatever the step declared.
CREDENTIAL_HEADER_NAMES = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "x-relayflow-signature"}
)


def redacted_headers(
    headers: Mapping[str, Any], secret_names: frozenset[str] = frozenset()
) -> dict[str, str]:
    """``headers`` with the values of credential headers (and ``secret_names``, any case)
    replaced by :data:`REDACTED`."""
    hidden = CREDENTIAL_HEADER_NAMES | {name.lower() for name in secret_names}
    return {
        str(name): (REDACTED if str(name).lower() in hidden else str(value))
        for name, value in headers.items()
    }


def http_call(
    method: str,
    url: str,
    headers: Mapping[str, Any],
    body: Any,
    *,
    secret_names: frozenset[str] = frozenset(),
    query: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The would-be HTTP call: method, URL, headers without secrets, body (as rendered)."""
    call: dict[str, Any] = {
        "kind": "http",
        "method": method,
        "url": url,
        "headers": redacted_headers(headers, secret_names),
        "body": body,
    }
    if query:
        call["query"] = dict(query)
    return call


def aws_call(tool: str, action: str | None, args: Any) -> dict[str, Any]:
    """The would-be AWS call: the tool, its IAM action (``dynamodb:PutItem``) and args."""
    return {"kind": "aws", "tool": tool, "action": action, "args": args}
