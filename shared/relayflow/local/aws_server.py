"""The local runtime's in-memory AWS, served on a local port.

moto keeps its state in process-wide backends, so a moto server thread started in the process
that holds an open :class:`~relayflow.local.runtime.LocalRuntime` answers from the very same
tables, buckets, buses and state machines. A handler running elsewhere — a ``sam local
invoke`` container, a fresh Python process — then works against what ``relayflow serve`` sees,
given ``RELAYFLOW_AWS_ENDPOINT_URL=http://<host>:<port>`` (``events/env.json`` sets it).

    with LocalServer(...) as server, ExposedAws(port=4566) as aws:
        print(aws.url)
"""

from __future__ import annotations

from typing import Any

from relayflow.local.lifecycle import OpenedInWith

#: The port ``relayflow serve --aws-port`` suggests (LocalStack's, familiar to AWS tooling).
DEFAULT_AWS_PORT = 4566


class ExposedAws(OpenedInWith):
    """A moto server thread on ``host:port`` over the process's moto state (a context
    manager). Port 0 picks a free port; :attr:`url` tells which."""

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_AWS_PORT) -> None:
        self.host = host
        self.port = port
        self._server: Any = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the AWS endpoint is not started")
        host, port = self._server.get_host_and_port()
        return f"http://{host}:{port}"

    def open(self) -> None:
        import logging

        from moto.server import ThreadedMotoServer

        # One access-log line per AWS call would drown serve's own output.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        server.start()
        self._server = server

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
