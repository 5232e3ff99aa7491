"""A failed run's compensation record, read from its failure cause.

A run that compensated fails with its original error name and, as the cause, the report the
compiled walk builds (:mod:`relayflow.compiler.compensation`)::

    {"cause": "<the original cause>",
     "compensation": {"key": "c", "prev": {"key": "b", "error": {…}, "prev": {"key": "a", …}}}}

:func:`split_cause` gives back the original cause and the run's ``compensation``::

    {"status": "compensated" | "partially_compensated",
     "steps": ["c", "b", "a", "items[0]", …],     # every compensation, in the order it ran
     "errors": [{"step": "b", "error": "…", "cause": "…"}, …]}   # the ones that failed

A for_each's compensation lists each item it compensated as ``<for_each key>[<index>]``.
"""

from __future__ import annotations

import json
from typing import Any

from relayflow.causes import public_cause

COMPENSATED = "compensated"
PARTIALLY_COMPENSATED = "partially_compensated"


def _nodes(linked: Any) -> list[dict[str, Any]]:
    """A linked list (newest first) as a Python list, oldest first."""
    nodes: list[dict[str, Any]] = []
    while isinstance(linked, dict) and "key" in linked:
        nodes.append(linked)
        linked = linked.get("prev")
    return nodes[::-1]


def _error(step: str, error: Any) -> dict[str, Any]:
    error = error if isinstance(error, dict) else {}
    return {
        "step": step,
        "error": error.get("Error"),
        "cause": public_cause(error.get("Cause")),
    }


def compensation_record(done: Any) -> dict[str, Any] | None:
    """The ``compensation`` of a run from the walk's ``done`` list; ``None`` when empty."""
    steps: list[str] = []
    errors: list[dict[str, Any]] = []
    for node in _nodes(done):
        key = str(node["key"])
        if "items" not in node:
            steps.append(key)
            if "error" in node:
                errors.append(_error(key, node["error"]))
            continue
        for item in node["items"] if isinstance(node["items"], list) else []:
            if not isinstance(item, dict) or item.get("skipped"):
                continue
            label = f"{key}[{item.get('index')}]"
            steps.append(label)
            if "error" in item:
                errors.append(_error(label, item["error"]))
    if not steps and not errors:
        return None
    status = PARTIALLY_COMPENSATED if errors else COMPENSATED
    return {"status": status, "steps": steps, "errors": errors}


def split_cause(cause: str | None) -> tuple[str | None, dict[str, Any] | None]:
    """``(original cause, compensation)`` of a failed run's cause; a cause without a
    compensation report comes back unchanged with ``None``."""
    if not cause or not cause.startswith("{"):
        return cause, None
    try:
        report = json.loads(cause)
    except ValueError:
        return cause, None
    if not isinstance(report, dict) or set(report) != {"cause", "compensation"}:
        return cause, None
    original = report["cause"]
    return (original if isinstance(original, str) else None), compensation_record(
        report["compensation"]
    )
