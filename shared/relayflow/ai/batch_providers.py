"""Which batch provider an ``llm_batch`` step's model names (:mod:`relayflow.ai.batch`,
:mod:`relayflow.ai.bedrock_batch`)."""

from __future__ import annotations

from typing import Any

from relayflow.ai.batch import (
    BATCH_PROVIDERS,
    AnthropicBatch,
    BatchProvider,
    OpenAIBatch,
    ScriptedBatch,
)
from relayflow.ai.bedrock_batch import BedrockBatch
from relayflow.errors import InvalidArgsError


def batch_provider_for(provider: str, connection: dict[str, Any]) -> BatchProvider:
    if provider == "scripted":
        return ScriptedBatch()
    if provider == "anthropic":
        return AnthropicBatch(connection.get("base_url"), connection.get("api_key"))
    if provider == "openai":
        return OpenAIBatch(connection.get("base_url"), connection.get("api_key"))
    if provider == "bedrock":
        return BedrockBatch()
    raise InvalidArgsError(
        f"llm_batch supports the providers {', '.join(BATCH_PROVIDERS)}, not {provider!r}"
    )
