"""The webhook_out step: one HTTP request built from templates, signed when a secret is named
(:mod:`relayflow.steps.delivery`)."""

from __future__ import annotations

from typing import Any

from relayflow.expressions import render
from relayflow.steps.delivery import prepare, timeout_of
from relayflow.steps.effects import Effects
from relayflow.steps.task import parse_task, result
from relayflow.tools.http import BODYLESS_METHODS, response_output


def run(event: Any, effects: Effects) -> dict[str, Any]:
    """Render url, headers and body; send; the output is ``{"status", "headers", "body"}``
    (headers: content-type, etag, location; body parsed by content type). In a dry run the
    request is built, recorded and not sent (:mod:`relayflow.steps.dry_run`)."""
    task = parse_task(event)
    config = task.step.config
    method = str(config.get("method") or "POST")
    body = None if method.upper() in BODYLESS_METHODS else config.get("body")
    delivery = prepare(
        task,
        method=method,
        url=render(config.get("url"), task.doc),
        headers=render(config.get("headers") or {}, task.doc),
        body=render(body, task.doc),
        secret=config.get("secret"),
        signature_header=config.get("signature_header"),
    )
    return effects.deliver(
        task,
        delivery,
        timeout=timeout_of(config),
        answer=lambda response: result(response_output(response), task=task),
    )
