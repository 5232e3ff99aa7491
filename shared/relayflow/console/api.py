"""The console's client of the control API: every read and action goes through the public
HTTP API with the caller's API key, so the console sees and does exactly what that key's
tenant may (another tenant's runs are 404 here too).

The transport is injected: ``relayflow serve`` hands the console its own request dispatcher
(the same authorizer, rate limit and API function an HTTP client reaches), so no socket is
opened to itself; anything that answers ``(method, path, headers, body) → (status, body)``
will do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

#: ``(method, path with query, headers, body) → (status, body)``.
Transport = Callable[[str, str, list[tuple[str, str]], bytes], tuple[int, bytes]]


class ApiFailure(Exception):
    """An API answer of 400 or more: its status and the error model's code, message, details."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details


def segment(value: str) -> str:
    """A path segment, escaped (ids come from URLs and forms)."""
    return quote(value, safe="")


class ConsoleApi:
    """The control API for one API key."""

    def __init__(self, transport: Transport, key: str) -> None:
        self._transport = transport
        self._key = key

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
    ) -> Any:
        """The JSON answer; :class:`ApiFailure` for an error answer."""
        params = {k: v for k, v in (query or {}).items() if v not in (None, "")}
        target = f"{path}?{urlencode(params)}" if params else path
        headers = [("X-Api-Key", self._key), ("Accept", "application/json")]
        data = b""
        if body is not None:
            headers.append(("Content-Type", "application/json"))
            data = json.dumps(body).encode()
        status, raw = self._transport(method, target, headers, data)
        try:
            answer = json.loads(raw) if raw else None
        except ValueError:
            answer = None
        if status >= 400:
            error = answer if isinstance(answer, dict) else {}
            raise ApiFailure(
                status,
                str(error.get("code") or "error"),
                str(error.get("message") or f"the API answered {status}"),
                error.get("details"),
            )
        return answer

    def get(self, path: str, **query: Any) -> Any:
        return self.call("GET", path, query=query)

    def post(self, path: str, body: Any = None) -> Any:
        return self.call("POST", path, body if body is not None else {})

    def pages(self, path: str, *, limit: int = 100, most: int = 500, **query: Any) -> list[Any]:
        """Every item of a paged listing (at most ``most``)."""
        items: list[Any] = []
        token = None
        while len(items) < most:
            page = self.get(path, limit=limit, next_token=token, **query)
            items.extend(page.get("items") or [])
            token = page.get("next_token")
            if not token:
                break
        return items[:most]
