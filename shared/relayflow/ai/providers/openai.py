"""OpenAI-compatible Chat Completions (``POST {base_url}/chat/completions``) over the guarded
client. ``base_url`` defaults to OpenAI's; any compatible server (vLLM, Ollama, LiteLLM…)
works with its own, and without ``api_key`` no Authorization header is sent."""

from __future__ import annotations

import json
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
from relayflow.errors import ModelResponseInvalid

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_STOP: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refused",
}


class OpenAIProvider(HttpApi):
    name = "openai"
    default_base_url = DEFAULT_BASE_URL

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The request body (``CompletionCreateParams`` of the official SDK). The output
        limit travels as ``max_completion_tokens`` (``max_tokens`` is deprecated, and
        reasoning models refuse it); a temperature the model does not take is
        ``Relayflow.InvalidArgs``."""
        temperature = checked_temperature(self.name, request.model_id, request.temperature)
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for message in wire_messages(request.messages):
            messages.extend(_messages(message))
        body: dict[str, Any] = {
            "model": request.model_id,
            "messages": messages,
            "max_completion_tokens": request.max_tokens,
        }
        if temperature is not None:
            body["temperature"] = temperature
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                }
                for t in request.tools
            ]
        return body

    def headers(self) -> dict[str, str]:
        """The bearer key header, or none without a key (a compatible local server)."""
        key = self.key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def complete(self, request: ModelRequest) -> ModelTurn:
        headers = self.headers()
        answer = post_json(
            self.name, f"{self.base_url}/chat/completions", headers, self.body(request)
        )
        return parse_response(answer)


def _messages(message: Message) -> list[dict[str, Any]]:
    """One neutral message → Chat Completions messages: tool results become one ``tool``
    message each; an assistant's tool calls travel in ``tool_calls``."""
    text = "\n\n".join(b["text"] for b in message["content"] if b["type"] == "text")
    if message["role"] == "assistant":
        calls = [
            {
                "id": b["id"],
                "type": "function",
                "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
            }
            for b in message["content"]
            if b["type"] == "tool_call"
        ]
        out: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            out["tool_calls"] = calls
        return [out]
    results = [
        {"role": "tool", "tool_call_id": b["id"], "content": tool_result_text(b["content"])}
        for b in message["content"]
        if b["type"] == "tool_result"
    ]
    return results + ([{"role": "user", "content": text}] if text else [])


def parse_response(answer: dict[str, Any]) -> ModelTurn:
    """A chat completion → a :class:`ModelTurn` (the first choice)."""
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelResponseInvalid("openai answered without choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ModelResponseInvalid("openai answered a choice without a message")
    blocks: list[dict[str, Any]] = []
    if isinstance(message.get("content"), str) and message["content"]:
        blocks.append(text_block(message["content"]))
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise ModelResponseInvalid("openai answered a tool call without a function")
        raw = function.get("arguments") or "{}"
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            raise ModelResponseInvalid(
                f"openai answered tool call {function.get('name')!r} with arguments that are "
                "not JSON"
            ) from None
        blocks.append(tool_call_block(call.get("id"), function.get("name"), arguments, "openai"))
    usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
    return ModelTurn(
        content=blocks,
        stop_reason=_STOP.get(str(choices[0].get("finish_reason")), "other"),
        usage=Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)),
    )
