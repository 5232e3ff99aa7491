"""Outbound network access: the SSRF guard (:mod:`.ssrf`) and the guarded HTTP client
(:mod:`.http`). Every outbound HTTP call of a step goes through ``relayflow.net.http.request``.

The guard is imported eagerly (standard library only). The HTTP client imports httpx, so its
names load on first use and importing this package stays cheap at cold start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from relayflow.net.ssrf import Target, blocked_reason, check_url, redact_url

if TYPE_CHECKING:
    from relayflow.net.http import (
        parse_body,
        raise_for_status,
        request,
        sign_body,
        verify_signature,
    )

_HTTP_NAMES = frozenset(
    {"request", "raise_for_status", "parse_body", "sign_body", "verify_signature"}
)

__all__ = [
    "Target",
    "blocked_reason",
    "check_url",
    "parse_body",
    "raise_for_status",
    "redact_url",
    "request",
    "sign_body",
    "verify_signature",
]


def __getattr__(name: str) -> Any:
    if name in _HTTP_NAMES:
        from relayflow.net import http

        return getattr(http, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
