"""The provider-neutral conversation every provider translates to and from its wire format.

A conversation is a list of messages ``{"role": "user" | "assistant", "content": [block…]}``
with three block types::

    {"type": "text", "text": "…"}
    {"type": "tool_call", "id": "…", "name": "…", "input": {…}}          (assistant)
    {"type": "tool_result", "id": "…", "content": <JSON>, "is_error": bool}  (user)

Plain JSON throughout, so a model turn can be recorded and replayed (idempotency) as is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from relayflow.errors import ModelResponseInvalid

StopReason = Literal["end_turn", "tool_use", "max_tokens", "refused", "other"]
Message = dict[str, Any]


@dataclass(frozen=True)
class ToolSpec:
    """A tool as a model sees it: a wire-safe name, a description, a JSON Schema."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


@dataclass(frozen=True)
class ModelRequest:
    """One call of a model: everything a provider needs, nothing provider-specific."""

    model_id: str
    messages: list[Message]
    system: str | None = None
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 1024
    temperature: float | None = None


@dataclass(frozen=True)
class ModelTurn:
    """What one model call answered: the assistant's content blocks, why it stopped, and the
    tokens it used."""

    content: list[dict[str, Any]]
    stop_reason: StopReason
    usage: Usage

    @property
    def text(self) -> str:
        return "".join(b["text"] for b in self.content if b.get("type") == "text")

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [
            ToolCall(b["id"], b["name"], b.get("input") or {})
            for b in self.content
            if b.get("type") == "tool_call"
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "stop_reason": self.stop_reason,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
            },
        }

    @classmethod
    def from_dict(cls, data: Any) -> ModelTurn:
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            raise ModelResponseInvalid("a recorded model turn has no content list")
        usage = data.get("usage") or {}
        return cls(
            content=data["content"],
            stop_reason=data.get("stop_reason") or "other",
            usage=Usage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)),
        )


def wire_messages(messages: list[Message]) -> list[Message]:
    """The conversation as the providers' APIs accept it: blank text blocks dropped, a
    message left without content dropped (a model's empty answer is kept in the recorded
    conversation, but no API takes an empty turn), and neighbours of the same role merged
    into one message (Bedrock requires the roles to alternate). Tool results stay ahead of
    text in a merged user message, as Anthropic requires."""
    merged: list[Message] = []
    for message in messages:
        content = [
            block
            for block in message["content"]
            if not (block.get("type") == "text" and not str(block.get("text") or "").strip())
        ]
        if not content:
            continue
        if merged and merged[-1]["role"] == message["role"]:
            previous = merged[-1]["content"]
            joined = previous + content
            results = [b for b in joined if b.get("type") == "tool_result"]
            merged[-1] = {
                "role": message["role"],
                "content": results + [b for b in joined if b.get("type") != "tool_result"],
            }
            continue
        merged.append({"role": message["role"], "content": content})
    return merged


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_call_block(call_id: str, name: str, arguments: Any, provider: str) -> dict[str, Any]:
    """A tool-call block, checked: a call needs an id, a name and an object of arguments."""
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise ModelResponseInvalid(f"{provider} returned a tool call without an id or a name")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ModelResponseInvalid(
            f"{provider} returned tool call {name!r} whose arguments are not an object"
        )
    return {"type": "tool_call", "id": call_id, "name": name, "input": arguments}


def tool_result_block(call_id: str, content: Any, *, is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "id": call_id, "content": content, "is_error": is_error}
