"""``relayflow run``'s stderr without ``--verbose``: the progress lines and one concise line
per failed step, not the step Lambdas' JSON log lines (with their tracebacks) and the local
interpreter's error dumps, which repeat the same failure at length."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Loggers that write a failing step's details again: Powertools' (the step functions') and
#: moto's Step Functions interpreter.
_NOISY = ("relayflow", "moto")


@contextmanager
def quiet_logs(enabled: bool = True) -> Iterator[None]:
    """Raise the noisy loggers to CRITICAL while a local run runs (restored afterwards)."""
    if not enabled:
        yield
        return
    # Powertools sets its logger's level when the logger is made: make it first.
    import relayflow.observability  # noqa: F401

    loggers = [logging.getLogger(name) for name in _NOISY]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for log, level in zip(loggers, levels, strict=True):
            log.setLevel(level)


def readable_cause(cause: Any, limit: int | None = None) -> str:
    """A Lambda error's message from its JSON cause (``{"errorType", "errorMessage",
    "stackTrace"}``), else the cause as it is; cut at ``limit`` characters."""
    text = "" if cause is None else str(cause)
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("errorMessage"), str):
        text = parsed["errorMessage"]
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text
