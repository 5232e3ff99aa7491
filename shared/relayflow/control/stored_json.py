"""JSON as the control plane stores it and as Step Functions hands it over (execution input
and output). Kept apart from :mod:`relayflow.control.records`, whose models and item types the
recorder does not need to read an event's input."""

from __future__ import annotations

import json
from typing import Any


def to_json(value: Any) -> str:
    """Compact JSON, as definitions, triggers and execution inputs are stored."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=json_default)


def json_default(value: Any) -> Any:
    """YAML gives dates and times as objects; a definition stores them as ISO text."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def loads_optional(text: str | None) -> Any:
    """Stored JSON text as a value (``None`` stays ``None``)."""
    return None if text is None else json.loads(text)


def loads_or_none(text: Any) -> Any:
    """JSON text as a value; ``None`` for no text, for text that is not JSON and for what is
    not text at all."""
    if not text or not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
