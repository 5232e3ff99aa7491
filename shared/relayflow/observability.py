"""One place that sets up logging for every function.

Powertools Logger writes JSON lines; :func:`step_handler` puts run id, workflow id, step key,
attempt and tenant on every line a step writes. ``POWERTOOLS_SERVICE_NAME`` and
``POWERTOOLS_LOG_LEVEL`` come from the template's Globals.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger

#: stderr: Lambda sends it to CloudWatch like stdout, and locally it keeps a command's stdout
#: (``relayflow run --json``) free of log lines.
logger = Logger(service="relayflow", stream=sys.stderr)

Handler = Callable[[dict[str, Any], Any], Any]


def step_keys(event: dict[str, Any]) -> dict[str, Any]:
    """The correlation keys of a step Task payload (missing ones are left out)."""
    step = event.get("step") or {}
    doc = event.get("doc") or {}
    run = doc.get("run") or {}
    context = event.get("context") or {}
    keys = {
        "run_id": run.get("id"),
        "workflow_id": run.get("workflow_id"),
        "tenant": run.get("tenant"),
        "step_key": step.get("key"),
        "step_type": step.get("type"),
        "attempt": context.get("attempt"),
    }
    return {k: v for k, v in keys.items() if v is not None}


def step_handler(func: Handler) -> Handler:
    """Decorate a step function's handler: correlation keys on every log line, one line per
    outcome. Exceptions propagate unchanged: their class name is the ASL error name."""

    @functools.wraps(func)
    def wrapper(event: dict[str, Any], context: Any) -> Any:
        keys = step_keys(event if isinstance(event, dict) else {})
        logger.append_keys(**keys)
        try:
            result = func(event, context)
        except Exception as exc:
            logger.warning("step failed", extra={"error": type(exc).__name__, "reason": str(exc)})
            raise
        finally:
            logger.remove_keys(list(keys))
        return result

    return wrapper
