"""moto's DynamoDB made atomic per request, as DynamoDB is: moto checks a condition and
writes in two steps, so concurrent tests serialise its requests.

On pytest's ``pythonpath`` (pyproject.toml), so any test imports it by name.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest


def serialise_dynamodb(monkeypatch: pytest.MonkeyPatch, served: list[str] | None = None) -> None:
    """From now until ``monkeypatch`` undoes it, moto serves one DynamoDB request at a time,
    appending each request's action name (``PutItem``, ``Query``…) to ``served`` when given."""
    from moto.dynamodb.responses import DynamoHandler

    lock = threading.RLock()
    original = DynamoHandler.call_action

    def one_at_a_time(self: Any) -> Any:
        with lock:
            if served is not None:
                served.append(self._get_action().split(".")[-1])
            return original(self)

    monkeypatch.setattr(DynamoHandler, "call_action", one_at_a_time)
