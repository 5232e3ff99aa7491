"""Scripted AI fixtures for tests of agent and LLM steps: the files the ``scripted:<name>``
model reads, written into a folder the settings point the scripted provider at.

On pytest's ``pythonpath`` (pyproject.toml), so any test imports it by name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from relayflow.settings import override_settings


@contextmanager
def scripted_turns(folder: Path) -> Iterator[Callable[..., str]]:
    """``write(name, *turns)`` writes a scripted fixture the agent step reads (its turns, in
    order) and returns ``name``; while open, the settings read fixtures from ``folder``."""

    def write(name: str, *turns: dict[str, Any]) -> str:
        (folder / f"{name}.json").write_text(json.dumps({"turns": list(turns)}))
        return name

    with override_settings(ai_fixtures_dir=str(folder)):
        yield write


#: The Lambda context the agent function gets in these tests (60 s left).
AGENT_CONTEXT = SimpleNamespace(
    function_name="relayflow-agent",
    aws_request_id="req-1",
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:relayflow-agent",
    get_remaining_time_in_millis=lambda: 60_000,
)
