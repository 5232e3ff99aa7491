"""boto3 clients, created lazily and reused across invocations of a warm Lambda.

Clients are cached per service and per endpoint configuration, so a test or local run that
points a service at another endpoint (``AWS_ENDPOINT_URL_<SERVICE>``) gets a fresh client.
boto3 is imported on first use: a handler that never calls AWS never pays for it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_lock = threading.Lock()
_clients: dict[tuple[str, str | None, str | None], Any] = {}


def _endpoint_key(service: str) -> tuple[str | None, str | None]:
    env = f"AWS_ENDPOINT_URL_{service.upper().replace('-', '_')}"
    return os.environ.get(env) or os.environ.get("AWS_ENDPOINT_URL"), os.environ.get("AWS_REGION")


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
            found = boto3.session.Session().client(service, config=config)
            _clients[key] = found
    return found


def reset_clients() -> None:
    """Forget every cached client (the local runtime calls this when it opens and closes)."""
    with _lock:
        _clients.clear()
