"""The webhook_out step: one HTTP request built from templates, signed when a secret is named.

The body is sent as compact JSON, or as UTF-8 text when it renders to a string. With
``secret``, ``X-Relayflow-Signature: sha256=<hex>`` (or the step's ``signature_header``,
e.g. the ``X-Webhook-Signature`` preset) is the HMAC-SHA256 of exactly the bytes sent, so a
receiver verifies the raw body before parsing it (``docs/tools.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.document import StepTask
from relayflow.errors import InvalidArgsError
from relayflow.expressions import render
from relayflow.steps.task import parse_task, result
from relayflow.tools.http import encode_body, has_header, header_values, response_output

DEFAULT_TIMEOUT_SECONDS = 30.0
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def deliver(
    task: StepTask,
    *,
    method: str,
    url: Any,
    headers: Mapping[str, Any] | None,
    body: Any,
    secret: Any,
    timeout: float,
    signature_header: str | None = None,
) -> Any:
    """Send one request for ``task``'s step and return the 2xx response.

    ``url``, ``headers`` and ``body`` are already rendered. Adds the content type, the
    Relayflow headers (run id, step, a delivery id that stays the same across retries) and,
    with ``secret``, the signature (in ``signature_header``, default
    ``X-Relayflow-Signature``). Non-2xx answers raise through ``raise_for_status``."""
    from relayflow.net.http import SIGNATURE_HEADER, raise_for_status, request, sign_body

    key = task.step.key
    if not isinstance(url, str) or not url.strip():
        raise InvalidArgsError(f"step {key!r}: url must render to a non-empty string", step=key)
    method = method.upper()
    if method not in METHODS:
        raise InvalidArgsError(f"step {key!r}: method must be one of {', '.join(METHODS)}")
    sent = header_values(headers)
    content, content_type = encode_body(body)
    if content_type and not has_header(sent, "content-type"):
        sent["Content-Type"] = content_type
    run_id = str((task.doc.get("run") or {}).get("id") or "")
    delivery = f"{run_id}:{key}"
    if task.doc.get("index") is not None:
        delivery += f":{task.doc['index']}"
    sent.update({"X-Relayflow-Run-Id": run_id, "X-Relayflow-Step": key})
    sent["X-Relayflow-Delivery"] = delivery
    if secret:
        from relayflow.tools.secrets import resolve_secret

        signed = sign_body(content or b"", resolve_secret(secret))
        sent[signature_header or SIGNATURE_HEADER] = signed
    response = request(method, url.strip(), headers=sent, content=content, timeout=timeout)
    raise_for_status(response)
    return response


def timeout_of(config: Mapping[str, Any]) -> float:
    value = config.get("request_timeout_seconds")
    return float(value) if value else DEFAULT_TIMEOUT_SECONDS


def run(event: Any) -> dict[str, Any]:
    """Render url, headers and body; send; the output is ``{"status", "headers", "body"}``
    (headers: content-type, etag, location; body parsed by content type)."""
    task = parse_task(event)
    config = task.step.config
    response = deliver(
        task,
        method=str(config.get("method") or "POST"),
        url=render(config.get("url"), task.doc),
        headers=render(config.get("headers") or {}, task.doc),
        body=render(config.get("body"), task.doc),
        secret=config.get("secret"),
        timeout=timeout_of(config),
        signature_header=config.get("signature_header"),
    )
    return result(response_output(response), task=task)
