"""Helpers for the integration tests that run a function's sample events (``events/<function>``)
against a recording HTTP server on 127.0.0.1."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from relayflow_testing import Reply, Server, load_event, load_handler, set_step_config, step_config


def at_server(event: dict[str, Any], server: Server) -> dict[str, Any]:
    """The sample with its URL's origin replaced by the local server's."""
    config = step_config(event)
    config["url"] = f"{server.url}{urlsplit(config['url']).path}"
    return set_step_config(event, config)


def run_at_server(
    server: Server, function: str, sample: str, reply: Reply, context: Any, **run: Any
) -> dict[str, Any]:
    """``functions/<function>``'s handler run on its ``sample`` aimed at the local server (the
    run's fields updated with ``run``), the server answering every request with ``reply``."""
    event = at_server(load_event(function, sample), server)
    event["doc"]["run"].update(run)
    server.reply = lambda r: reply
    return load_handler(function).handler(event, context)
