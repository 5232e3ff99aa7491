"""The Anthropic Messages API (``POST {base_url}/v1/messages``) over the guarded client."""

from __future__ import annotations

from typing import Any

from relayflow.ai.capabilities import checked_temperature
from relayflow.ai.messages import (
    Message,
    ModelRequest,
    ModelTurn,
    StopReason,
    Usage,
    text_block,
    tool_call_block,
    wire_messages,
)
from relayflow.ai.providers.http_common import HttpApi, post_json, tool_result_text
from relayflow.errors import InvalidArgsError, ModelResponseInvalid

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
_STOP: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "refusal": "refused",
}


class AnthropicProvider(HttpApi):
    name = "anthropic"
    default_base_url = DEFAULT_BASE_URL

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The request body (Messages API, ``MessageCreateParams`` of the official SDK). The
        API takes no ``temperature``: a request with one is ``Relayflow.InvalidArgs``."""
        checked_temperature(self.name, request.model_id, request.temperature)
        body: dict[str, Any] = {
            "model": request.model_id,
            "max_tokens": request.max_tokens,
            "messages": [_message(m) for m in wire_messages(request.messages)],
        }
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
        return body

    def headers(self) -> dict[str, str]:
        """The API key and version headers (the key is required)."""
        key = self.key()
        if key is None:
            raise InvalidArgsError("the anthropic provider needs api_key (a secret reference)")
        return {"x-api-key": key, "anthropic-version": API_VERSION}

    def complete(self, request: ModelRequest) -> ModelTurn:
        headers = self.headers()
        answer = post_json(self.name, f"{self.base_url}/v1/messages", headers, self.body(request))
        return parse_response(answer)


def _message(message: Message) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for block in message["content"]:
        kind = block["type"]
        if kind == "text":
            blocks.append({"type": "text", "text": block["text"]})
        elif kind == "tool_call":
            blocks.append(
                {
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": block["input"],
                }
            )
        elif kind == "tool_result":
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": block["id"],
                    "content": tool_result_text(block["content"]),
                    "is_error": bool(block.get("is_error")),
                }
            )
    return {"role": message["role"], "content": blocks}


def parse_response(answer: dict[str, Any]) -> ModelTurn:
    """A Messages API response → a :class:`ModelTurn` (text and tool_use blocks kept;
    thinking and other block types dropped)."""
    content = answer.get("content")
    if not isinstance(content, list):
        raise ModelResponseInvalid("anthropic answered without a content list")
    blocks: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict):
            raise ModelResponseInvalid(
                "anthropic answered with a content block that is not an object"
            )
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            blocks.append(text_block(block["text"]))
        elif block.get("type") == "tool_use":
            blocks.append(
                tool_call_block(block.get("id"), block.get("name"), block.get("input"), "anthropic")
            )
    usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
    return ModelTurn(
        content=blocks,
        stop_reason=_STOP.get(str(answer.get("stop_reason")), "other"),
        usage=Usage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)),
    )
