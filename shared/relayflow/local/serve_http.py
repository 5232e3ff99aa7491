"""The HTTP side of ``relayflow serve``: responses, the per-key token bucket (API Gateway's
throttling, locally) and the threaded HTTP server that hands each request to
:meth:`relayflow.local.serve.LocalServer.dispatch`."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from relayflow.local.httpd import QuietHandler, ThreadedServer

#: API Gateway refuses bodies over 10 MB before any function runs.
MAX_REQUEST_BYTES = 10 * 1024 * 1024
#: A refused body is read and discarded up to this many bytes before the 413 is written: a
#: client still sending when the server closed would see a connection reset, not the status.
#: A body announced (or sent) beyond it is cut off by closing the connection.
MAX_DRAIN_BYTES = 4 * MAX_REQUEST_BYTES
#: Seconds the drain waits for the client's next bytes before giving up on it.
DRAIN_TIMEOUT_SECONDS = 5.0
#: Requests per second per API key, and the burst above it (generous: tests stay far below).
DEFAULT_RATE_PER_SECOND = 50.0
DEFAULT_RATE_BURST = 200


@dataclass(frozen=True)
class LocalResponse:
    """What the local server writes back for one request."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


class RequestDispatcher(Protocol):
    """What the HTTP server hands each request to (:class:`relayflow.local.serve.LocalServer`):
    ``dispatch(method, target, headers, body, client_ip)`` answers it, and
    ``log_request(method, target, status, started)`` writes its access-log line."""

    dispatch: Callable[[str, str, list[tuple[str, str]], bytes, str], LocalResponse]
    log_request: Callable[[str, str, int, float], None]


def json_response(
    status: int, body: Any, headers: Mapping[str, str] | None = None
) -> LocalResponse:
    """A JSON answer (compact, unknown types as text)."""
    data = json.dumps(body, separators=(",", ":"), default=str).encode()
    return LocalResponse(
        status, [("Content-Type", "application/json"), *(headers or {}).items()], data
    )


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> LocalResponse:
    """The API's error body ``{code, message, details: null}``."""
    return json_response(status, {"code": code, "message": message, "details": None}, headers)


# ----------------------------------------------------------------------------- rate limit


class RateLimiter:
    """A token bucket per API key: ``per_second`` requests on average, ``burst`` at once."""

    def __init__(
        self, per_second: float = DEFAULT_RATE_PER_SECOND, burst: int = DEFAULT_RATE_BURST
    ) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}
        self.configure(per_second, burst)

    def configure(self, per_second: float, burst: int) -> None:
        """Change the limit (and forget every bucket)."""
        if per_second <= 0 or burst < 1:
            raise ValueError("per_second must be > 0 and burst >= 1")
        with self._lock:
            self.per_second, self.burst = float(per_second), int(burst)
            self._buckets.clear()

    def acquire(self, key: str) -> float | None:
        """Take one request from ``key``'s bucket: ``None`` when allowed, else the seconds
        until the next request would be."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.per_second)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return None
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.per_second


def from_proxy_result(result: Mapping[str, Any]) -> LocalResponse:
    """The HTTP answer of a Lambda proxy result (multi-value headers win over single ones)."""
    status = int(result.get("statusCode") or 500)
    headers: list[tuple[str, str]] = []
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers.extend((name, str(v)) for v in values)
    seen = {name.lower() for name, _ in headers}
    headers.extend(
        (name, str(value))
        for name, value in (result.get("headers") or {}).items()
        if name.lower() not in seen
    )
    body = result.get("body") or ""
    data = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode()
    return LocalResponse(status, headers, data)


class LocalHTTPServer(ThreadedServer):
    request_queue_size = 128
    app: RequestDispatcher


class RequestHandler(QuietHandler):
    """Hands each request to the server's :class:`RequestDispatcher`, which also writes the
    access log."""

    server: LocalHTTPServer

    def _serve(self) -> None:
        started = time.perf_counter()
        app = self.server.app
        try:
            body = self._read_body()
        except _TooLarge as exc:
            self._drain(exc)
            response = error_response(413, "payload_too_large", "the body is larger than 10 MB")
            self.close_connection = True
        except ValueError:
            response = error_response(400, "bad_request", "unreadable request body")
            self.close_connection = True
        else:
            try:
                response = app.dispatch(
                    self.command,
                    self.path,
                    list(self.headers.items()),
                    body,
                    self.client_address[0],
                )
            except Exception as exc:
                from relayflow.observability import logger

                logger.exception("local server error", extra={"reason": str(exc)})
                response = error_response(500, "internal_error", "the local server failed")
        self._write(response)
        app.log_request(self.command, self.path, response.status, started)

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked()
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0:
            raise ValueError("negative Content-Length")
        if length > MAX_REQUEST_BYTES:
            raise _TooLarge(length)
        return self.rfile.read(length) if length else b""

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline().strip():
                    pass
                return b"".join(chunks)
            total += size
            if total > MAX_REQUEST_BYTES:
                raise _TooLarge(None, chunk_left=size)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def _drain(self, refused: _TooLarge) -> None:
        """Read and discard what is left of a refused body (the announced length, or the rest
        of a chunked one), at most :data:`MAX_DRAIN_BYTES` and never waiting longer than
        :data:`DRAIN_TIMEOUT_SECONDS` for the next bytes, so the client reads the 413."""
        budget = MAX_DRAIN_BYTES
        self.connection.settimeout(DRAIN_TIMEOUT_SECONDS)
        try:
            if refused.remaining is not None:
                if refused.remaining <= budget:
                    self._discard(refused.remaining)
                return
            if refused.chunk_left > budget:
                return
            budget -= refused.chunk_left
            self._discard(refused.chunk_left)
            self.rfile.readline(1024)
            while budget > 0:
                line = self.rfile.readline(1024)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0 or size > budget:
                    return
                budget -= size
                self._discard(size)
                self.rfile.readline(1024)
        except (OSError, ValueError):
            return  # the client stopped sending or sent garbage: the connection closes anyway

    def _discard(self, count: int) -> None:
        while count > 0:
            piece = self.rfile.read(min(count, 1 << 16))
            if not piece:
                return
            count -= len(piece)

    def _write(self, response: LocalResponse) -> None:
        self.send_response(response.status)
        for name, value in response.headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve


class _TooLarge(Exception):
    """The body is over :data:`MAX_REQUEST_BYTES`: ``remaining`` bytes of it are unread (None
    for a chunked body, whose current chunk has ``chunk_left`` bytes unread)."""

    def __init__(self, remaining: int | None, *, chunk_left: int = 0) -> None:
        super().__init__(remaining)
        self.remaining = remaining
        self.chunk_left = chunk_left
