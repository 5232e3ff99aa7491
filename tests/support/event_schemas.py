"""The published JSON Schemas of Relayflow's bus events (docs/events/*.schema.json), for the
tests that capture what the recorder and the step-events function put on the bus."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "events"


@cache
def schemas() -> dict[str, dict[str, Any]]:
    """Detail-type prefix (``relayflow.run.``) → its schema."""
    found = {}
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        found[path.name.removesuffix("schema.json")] = json.loads(path.read_text())
    return found


def validate_event(event: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``event`` (as EventBridge delivers it) is
    valid against the schema of its detail-type; ``LookupError`` when none covers it."""
    import jsonschema

    detail_type = str(event.get("detail-type", ""))
    for prefix, schema in schemas().items():
        if detail_type.startswith(prefix):
            jsonschema.Draft4Validator(
                schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER
            ).validate(event)
            return
    raise LookupError(f"no published schema for {detail_type!r} (docs/events/)")
