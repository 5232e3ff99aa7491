"""The HTTP server and request handler bases of the local runtime's two servers (the Lambda
Invoke endpoint and ``relayflow serve``)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ThreadedServer(ThreadingHTTPServer):
    """A thread per request; those threads never keep the process alive, and a port just
    closed can be bound again at once."""

    daemon_threads = True
    allow_reuse_address = True


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 (connections are kept alive), and no access-log line on stderr: a server
    writes its own log, or none."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Write nothing (BaseHTTPRequestHandler writes every request to stderr)."""
