"""The scripted provider: replays a fixture of model turns, for the demo and the tests.

``model: scripted:<fixture>`` reads ``<fixture>.json`` from the directory in the
``RELAYFLOW_AI_FIXTURES_DIR`` setting, else from the fixtures shipped with Relayflow
(``relayflow/ai/fixtures``). A fixture is::

    {"turns": [{"content": [<text and tool_call blocks>],
                "usage": {"input_tokens": 120, "output_tokens": 40}}, …]}

Turn *n* answers the request that holds *n - 1* assistant messages, so the same conversation
always gets the same answer (a replayed or retried turn too). A tool call's ``name`` may be
the catalogue name (``aws.dynamodb.get_item``) or the wire name the model is shown.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from relayflow.ai.messages import ModelRequest, ModelTurn, Usage, tool_call_block
from relayflow.errors import InvalidArgsError, ModelResponseInvalid

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
SHIPPED = Path(__file__).resolve().parent.parent / "fixtures"


def fixture_path(name: str) -> Path:
    """Where fixture ``name`` lives (the configured directory first, then the shipped ones)."""
    from relayflow.settings import get_settings

    if not _NAME.match(name):
        raise InvalidArgsError(f"scripted fixture name {name!r} must match {_NAME.pattern}")
    configured = get_settings().ai_fixtures_dir
    for folder in ([Path(configured)] if configured else []) + [SHIPPED]:
        path = folder / f"{name}.json"
        if path.is_file():
            return path
    raise InvalidArgsError(f"scripted fixture {name!r} not found", fixture=name)


def load_fixture(name: str) -> list[dict[str, Any]]:
    data = json.loads(fixture_path(name).read_text())
    turns = data.get("turns") if isinstance(data, dict) else None
    if not isinstance(turns, list):
        raise InvalidArgsError(f"scripted fixture {name!r} has no turns list", fixture=name)
    return turns


class ScriptedProvider:
    name = "scripted"

    def __init__(self, fixture: str) -> None:
        self.fixture = fixture

    def complete(self, request: ModelRequest) -> ModelTurn:
        turns = load_fixture(self.fixture)
        index = sum(1 for m in request.messages if m["role"] == "assistant")
        if index >= len(turns):
            raise ModelResponseInvalid(
                f"scripted fixture {self.fixture!r} has no turn {index + 1}", fixture=self.fixture
            )
        turn = turns[index]
        blocks: list[dict[str, Any]] = []
        for block in turn.get("content") or []:
            if block.get("type") == "tool_call":
                blocks.append(
                    tool_call_block(
                        block.get("id"), block.get("name"), block.get("input"), "scripted"
                    )
                )
            else:
                blocks.append({"type": "text", "text": str(block.get("text", ""))})
        usage = turn.get("usage") or {}
        return ModelTurn(
            content=blocks,
            stop_reason="tool_use" if any(b["type"] == "tool_call" for b in blocks) else "end_turn",
            usage=Usage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)),
        )
