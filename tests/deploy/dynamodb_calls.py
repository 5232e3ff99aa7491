"""Record the DynamoDB calls each deployed function makes on the Relayflow table.

A call is attributed to the function whose ``functions/<name>/app.py`` handler is on the call
stack (the local runtime, ``relayflow serve`` and the tests all load handlers from there), so
the same recorder works in-process for the samples and across the integration suite. Each call
becomes ``(function, IAM action, GSI or "", partition key with its variable parts as "*")``:
a transaction becomes one row per item action, as IAM authorizes it.

As a pytest plugin it records a whole test run into ``tests/deploy/dynamodb_calls.json``, the
snapshot ``test_iam_agreement.py`` checks against the template. Refresh it after a DAL change:

    PYTHONPATH=tests/deploy .venv/bin/python -m pytest -p dynamodb_calls -n 2 \\
        tests/integration tests/deploy/test_handler_samples.py
    .venv/bin/python tests/deploy/dynamodb_calls.py      # merges the workers' parts
"""

from __future__ import annotations

import json
import re
import sys
import threading
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).with_name("dynamodb_calls.json")
#: Literal parts of the table's keys (relayflow.dal.keys and friends); anything else is an id.
KEY_TOKENS = frozenset(
    [
        "TENANT",
        "WF",
        "WFS",
        "RUN",
        "RUNS",
        "STEP",
        "HOOK",
        "HOOKS",
        "KEY",
        "KEYID",
        "KEYS",
        "WAIT",
        "WAITPOINTS",
        "APPROVALS",
        "PARKS",
        "FLOW",
        "BREAKER",
        "BREAKERS",
        "DLQ",
        "DLQS",
        "DUE",
        "STATS",
        "RATE",
        "DLV",
        "GATE",
        "DEBOUNCE",
        "BATCH",
        "SCHED",
        "SIGFAIL",
        "STEPEV",
        "EXPRESS",
    ]
)
#: Literal heads of key parts that carry dotted ids after them.
DOTTED_TOKENS = frozenset(["EVENT"])
_TRANSACT_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
_HANDLER = re.compile(r"functions[/\\]([a-z_]+)[/\\]app\.py$")

Call = tuple[str, str, str, str]


def key_pattern(partition: str) -> str:
    return "#".join(_part_pattern(part) for part in partition.split("#"))


def _part_pattern(part: str) -> str:
    if part in KEY_TOKENS:
        return part
    # A literal head before dotted ids (event waits: ``WAIT#EVENT.<workflow>.<digest>``).
    head, dot, _ = part.partition(".")
    return f"{head}.*" if dot and head in DOTTED_TOKENS else "*"


def _value(attribute: Any) -> Any:
    return attribute.get("S") if isinstance(attribute, dict) else attribute


def _function() -> str | None:
    frame = sys._getframe(3)
    while frame is not None:
        found = _HANDLER.search(frame.f_code.co_filename)
        if found:
            return found.group(1)
        frame = frame.f_back
    return None


def calls_of(operation: str, params: dict[str, Any], table: str) -> list[tuple[str, str, str]]:
    """(action, index, key pattern) for each item a request on ``table`` touches."""
    found = []
    if operation in ("GetItem", "PutItem", "UpdateItem", "DeleteItem"):
        if params.get("TableName") == table:
            item = params.get("Key") or params.get("Item") or {}
            found.append((f"dynamodb:{operation}", "", key_pattern(str(_value(item.get("pk"))))))
    elif operation == "Query":
        if params.get("TableName") == table:
            names = params.get("ExpressionAttributeNames") or {}
            values = params.get("ExpressionAttributeValues") or {}
            condition = params.get("KeyConditionExpression") or ""
            for name, placeholder in re.findall(r"(#?\w+)\s*=\s*(:\w+)", condition):
                if names.get(name, name) in ("pk", "gsi1pk"):
                    key = str(_value(values.get(placeholder)))
                    found.append(
                        ("dynamodb:Query", params.get("IndexName") or "", key_pattern(key))
                    )
    elif operation in ("TransactWriteItems", "TransactGetItems"):
        for entry in params.get("TransactItems") or []:
            for kind, op in entry.items():
                if op.get("TableName") != table:
                    continue
                action = "dynamodb:GetItem" if kind == "Get" else _TRANSACT_ACTIONS[kind]
                item = op.get("Key") or op.get("Item") or {}
                found.append((action, "", key_pattern(str(_value(item.get("pk"))))))
    elif params.get("TableName") == table or operation.startswith("Batch"):
        # Scan, batch calls: recorded as they are, so that the agreement test refuses them.
        found.append((f"dynamodb:{operation}", params.get("IndexName") or "", "?"))
    return found


class Recorder:
    """Records, while open, every attributed call on the Relayflow table into :attr:`calls`
    (a context manager; it patches botocore process-wide)."""

    def __init__(self) -> None:
        self.calls: set[Call] = set()
        self._lock = threading.Lock()
        self._original: Any = None

    def __enter__(self) -> Recorder:
        import botocore.client

        from relayflow.settings import get_settings

        original = self._original = botocore.client.BaseClient._make_api_call
        recorder = self

        def record(client: Any, operation: str, params: dict[str, Any]) -> Any:
            if client.meta.service_model.service_name == "dynamodb":
                kind = _function()
                if kind is not None:
                    rows = calls_of(operation, params, get_settings().table_name)
                    with recorder._lock:
                        recorder.calls.update((kind, *row) for row in rows)
            return original(client, operation, params)

        botocore.client.BaseClient._make_api_call = record  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        import botocore.client

        botocore.client.BaseClient._make_api_call = self._original  # type: ignore[method-assign]


def load_snapshot() -> set[Call]:
    return {tuple(row) for row in json.loads(SNAPSHOT.read_text())}  # type: ignore[misc]


def merge_parts() -> int:
    """Fold the plugin's per-process parts into the snapshot (and remove them)."""
    parts = sorted(SNAPSHOT.parent.glob("dynamodb_calls.*.part"))
    merged: set[Call] = set()
    for part in parts:
        merged |= {tuple(row) for row in json.loads(part.read_text())}  # type: ignore[misc]
        part.unlink()
    SNAPSHOT.write_text(json.dumps(sorted(merged), indent=0) + "\n")
    return len(merged)


# ----------------------------------------------------------------------------- the plugin

_plugin_recorder: Recorder | None = None


def pytest_configure(config: Any) -> None:
    global _plugin_recorder
    _plugin_recorder = Recorder().__enter__()


def pytest_unconfigure(config: Any) -> None:
    import os

    if _plugin_recorder is None:
        return
    _plugin_recorder.__exit__()
    part = SNAPSHOT.parent / f"dynamodb_calls.{os.getpid()}.part"
    part.write_text(json.dumps(sorted(_plugin_recorder.calls)))


if __name__ == "__main__":
    print(f"{merge_parts()} distinct calls in {SNAPSHOT.name}")
