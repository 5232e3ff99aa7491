"""boto3 clients, created lazily and reused across invocations of a warm Lambda.

Clients are cached per service and per endpoint configuration, so a test or local run that
points a service at another endpoint (``AWS_ENDPOINT_URL_<SERVICE>``) gets a fresh client.
``RELAYFLOW_AWS_ENDPOINT_URL`` (declared blank in template.yaml, so that ``sam local invoke
--env-vars events/env.json`` can set it) sends every service without an endpoint of its own to
one place: the in-memory AWS that ``relayflow serve --aws-port`` exposes.
boto3 is imported on first use: a handler that never calls AWS never pays for it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
_clients: dict[tuple[str, str | None, str | None], Any] = {}
_reset_hooks: list[Callable[[], None]] = []


#: One endpoint for every AWS service (blank or unset: AWS's own endpoints).
LOCAL_ENDPOINT_ENV = "RELAYFLOW_AWS_ENDPOINT_URL"


def _endpoint_key(service: str) -> tuple[str | None, str | None]:
    env = f"AWS_ENDPOINT_URL_{service.upper().replace('-', '_')}"
    endpoint = (
        os.environ.get(env)
        or os.environ.get("AWS_ENDPOINT_URL")
        or os.environ.get(LOCAL_ENDPOINT_ENV)
    )
    return endpoint or None, os.environ.get("AWS_REGION")


def client(service: str) -> Any:
    """A cached boto3 client for ``service`` (``dynamodb``, ``s3``, ``sqs`` …)."""
    key = (service, *_endpoint_key(service))
    found = _clients.get(key)
    if found is not None:
        return found
    with _lock:
        found = _clients.get(key)
        if found is None:
            import boto3
            from botocore.config import Config

            config = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5)
            # boto3 reads AWS_ENDPOINT_URL(_<SERVICE>) itself; only the Relayflow variable
            # has to be passed.
            endpoint = key[1] if key[1] == os.environ.get(LOCAL_ENDPOINT_ENV) else None
            found = boto3.session.Session().client(service, config=config, endpoint_url=endpoint)
            _clients[key] = found
    return found


def reset_clients() -> None:
    """Forget every cached client (the local runtime calls this when it opens and closes)."""
    with _lock:
        _clients.clear()
    for hook in list(_reset_hooks):
        hook()


def on_reset(hook: Callable[[], None]) -> None:
    """Run ``hook`` on every :func:`reset_clients` (a cache of clients built elsewhere, such
    as the tenants' assumed sessions, forgets them too)."""
    if hook not in _reset_hooks:
        _reset_hooks.append(hook)
