"""One outbound request of a ``webhook_out`` or ``custom`` step: checked and encoded from
its rendered parts (:func:`prepare`), then signed and sent (:func:`send`) or, in a dry run,
recorded (:func:`would_deliver`).

The body is sent as compact JSON, or as UTF-8 text when it renders to a string. With a
secret, ``X-Relayflow-Signature: sha256=<hex>`` (or the step's ``signature_header``) is the
HMAC-SHA256 of exactly the bytes sent, so a receiver verifies the raw body before parsing
it (``docs/tools.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relayflow.document import StepTask
from relayflow.errors import InvalidArgsError
from relayflow.tools.http import (
    BODYLESS_METHODS,
    HTTP_METHODS,
    encode_body,
    has_header,
    header_values,
)

DEFAULT_TIMEOUT_SECONDS = 30.0


@dataclass
class Delivery:
    """One rendered request of a webhook_out or custom step, before it is signed."""

    method: str
    url: str
    headers: dict[str, str]
    content: bytes | None
    body: Any
    secret: Any
    signature_header: str


def prepare(
    task: StepTask,
    *,
    method: str,
    url: Any,
    headers: Mapping[str, Any] | None,
    body: Any,
    secret: Any,
    signature_header: str | None = None,
) -> Delivery:
    """Check and encode the request for ``task``'s step: ``url``, ``headers`` and ``body``
    are already rendered. Adds the content type and the Relayflow headers (run id, step, a
    delivery id that stays the same across retries); reads no secret."""
    from relayflow.net.http import SIGNATURE_HEADER

    key = task.step.key
    if not isinstance(url, str) or not url.strip():
        raise InvalidArgsError(f"step {key!r}: url must render to a non-empty string", step=key)
    method = method.upper()
    if method not in HTTP_METHODS:
        raise InvalidArgsError(f"step {key!r}: method must be one of {', '.join(HTTP_METHODS)}")
    sent = header_values(headers)
    if method in BODYLESS_METHODS:
        # GET and HEAD carry no body (validation warns when one is configured): nothing is
        # encoded, sent, signed or recorded.
        body = None
    content, content_type = encode_body(body)
    if content_type and not has_header(sent, "content-type"):
        sent["Content-Type"] = content_type
    run_id = str((task.doc.get("run") or {}).get("id") or "")
    delivery = f"{run_id}:{key}"
    if task.doc.get("index") is not None:
        delivery += f":{task.doc['index']}"
    sent.update({"X-Relayflow-Run-Id": run_id, "X-Relayflow-Step": key})
    sent["X-Relayflow-Delivery"] = delivery
    return Delivery(
        method, url.strip(), sent, content, body, secret, signature_header or SIGNATURE_HEADER
    )


def would_deliver(delivery: Delivery) -> dict[str, Any]:
    """The would-be call of a dry run: the signature (when signed) recorded redacted."""
    from relayflow.tools import call_records

    headers = dict(delivery.headers)
    secret_names: frozenset[str] = frozenset()
    if delivery.secret:
        headers[delivery.signature_header] = call_records.REDACTED
        secret_names = frozenset({delivery.signature_header})
    return call_records.http_call(
        delivery.method, delivery.url, headers, delivery.body, secret_names=secret_names
    )


def send(delivery: Delivery, *, timeout: float) -> Any:
    """Sign (with a secret: ``sha256=<hex>`` of the exact bytes in the delivery's signature
    header) and send; return the 2xx response. Non-2xx answers raise through
    ``raise_for_status``."""
    from relayflow.net.http import raise_for_status, request, sign_body

    sent = dict(delivery.headers)
    if delivery.secret:
        from relayflow.tools.secrets import resolve_secret

        signed = sign_body(delivery.content or b"", resolve_secret(delivery.secret))
        sent[delivery.signature_header] = signed
    response = request(
        delivery.method, delivery.url, headers=sent, content=delivery.content, timeout=timeout
    )
    raise_for_status(response)
    return response


def timeout_of(config: Mapping[str, Any]) -> float:
    """The step's ``request_timeout_seconds``, or :data:`DEFAULT_TIMEOUT_SECONDS`."""
    value = config.get("request_timeout_seconds")
    return float(value) if value else DEFAULT_TIMEOUT_SECONDS
