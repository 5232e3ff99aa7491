"""Amazon Bedrock Converse through boto3 ``bedrock-runtime``: IAM auth, no key to store.

The call goes to the regional AWS endpoint through botocore (not the HTTP tool client): it
is signed with the function's role, whose policy allows ``bedrock:InvokeModel*`` on the
configured model ids only (``template.yaml``)."""

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
from relayflow.errors import ModelError, ModelResponseInvalid, TransientError

#: Converse error codes that may pass on their own.
TRANSIENT_CODES = frozenset(
    {
        "ThrottlingException",
        "ServiceUnavailableException",
        "ModelTimeoutException",
        "InternalServerException",
        "ModelNotReadyException",
    }
)
_STOP: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "guardrail_intervened": "refused",
    "content_filtered": "refused",
}


class BedrockProvider:
    name = "bedrock"

    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            from relayflow.adapters.aws import client

            self._client = client("bedrock-runtime")
        return self._client

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The ``Converse`` parameters (botocore's ``bedrock-runtime`` model). A temperature
        the model does not take (above 1; any, for Anthropic models) is
        ``Relayflow.InvalidArgs``."""
        temperature = checked_temperature(self.name, request.model_id, request.temperature)
        params: dict[str, Any] = {
            "modelId": request.model_id,
            "messages": [_message(m) for m in wire_messages(request.messages)],
            "inferenceConfig": {"maxTokens": request.max_tokens},
        }
        if temperature is not None:
            params["inferenceConfig"]["temperature"] = temperature
        if request.system:
            params["system"] = [{"text": request.system}]
        if request.tools:
            params["toolConfig"] = {
                "tools": [
                    {
                        "toolSpec": {
                            "name": t.name,
                            "description": t.description,
                            "inputSchema": {"json": t.input_schema},
                        }
                    }
                    for t in request.tools
                ]
            }
        return params

    def complete(self, request: ModelRequest) -> ModelTurn:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self.client.converse(**self.params(request))
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code") or "ClientError")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            message = f"bedrock {request.model_id}: {code}: {error.get('Message') or ''}".rstrip(
                ": "
            )
            if code in TRANSIENT_CODES or (isinstance(status, int) and status >= 500):
                raise TransientError(message, provider=self.name, code=code) from None
            raise ModelError(message, provider=self.name, code=code, status=status) from None
        except BotoCoreError as exc:  # connection, read timeout
            raise TransientError(f"bedrock {request.model_id}: {exc}", provider=self.name) from None
        return parse_response(answer)


def _message(message: Message) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for block in message["content"]:
        kind = block["type"]
        if kind == "text":
            content.append({"text": block["text"]})
        elif kind == "tool_call":
            content.append(
                {
                    "toolUse": {
                        "toolUseId": block["id"],
                        "name": block["name"],
                        "input": block["input"],
                    }
                }
            )
        elif kind == "tool_result":
            value = block["content"]
            part = {"json": value} if isinstance(value, dict) else {"text": _text(value)}
            content.append(
                {
                    "toolResult": {
                        "toolUseId": block["id"],
                        "content": [part],
                        "status": "error" if block.get("is_error") else "success",
                    }
                }
            )
    return {"role": message["role"], "content": content}


def _text(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def parse_response(answer: dict[str, Any]) -> ModelTurn:
    """A ``Converse`` response → a :class:`ModelTurn`."""
    message = (answer.get("output") or {}).get("message")
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        raise ModelResponseInvalid("bedrock answered without an output message")
    blocks: list[dict[str, Any]] = []
    for block in message["content"]:
        if "text" in block:
            blocks.append(text_block(block["text"]))
        elif "toolUse" in block:
            use = block["toolUse"]
            blocks.append(
                tool_call_block(use.get("toolUseId"), use.get("name"), use.get("input"), "bedrock")
            )
    usage = answer.get("usage") or {}
    return ModelTurn(
        content=blocks,
        stop_reason=_STOP.get(str(answer.get("stopReason")), "other"),
        usage=Usage(int(usage.get("inputTokens") or 0), int(usage.get("outputTokens") or 0)),
    )
