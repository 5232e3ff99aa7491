"""Model providers behind one interface: ``complete(ModelRequest) -> ModelTurn``.

A step names its model as ``<provider>:<model id>``:

* ``bedrock:<model or inference profile id>``: Amazon Bedrock Converse (IAM auth);
* ``anthropic:<model>``: the Anthropic Messages API;
* ``openai:<model>``: an OpenAI-compatible Chat Completions API (``base_url`` points it at a
  self-hosted server);
* ``scripted:<fixture>``: replays a fixture of model turns (the demo and the tests). It is
  only ever used when a definition names it: nothing falls back to it.

Every provider maps timeouts, 429 and 5xx to ``Relayflow.Transient``, refusals of the request
to ``Relayflow.ModelError`` and answers it cannot read to ``Relayflow.ModelResponseInvalid``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from relayflow.ai.messages import ModelRequest, ModelTurn
from relayflow.errors import InvalidArgsError

PROVIDERS: tuple[str, ...] = ("bedrock", "anthropic", "openai", "scripted")


class Provider(Protocol):
    name: str

    def complete(self, request: ModelRequest) -> ModelTurn:
        """One model call."""
        ...


def split_model(model: str) -> tuple[str, str]:
    """``anthropic:claude-sonnet-4-5`` → ``("anthropic", "claude-sonnet-4-5")``; a value
    without a known provider prefix is ``Relayflow.InvalidArgs`` (validation reports it
    earlier with its path)."""
    provider, sep, model_id = model.partition(":")
    if not sep or provider not in PROVIDERS or not model_id:
        raise InvalidArgsError(
            f"model {model!r} must be <provider>:<model id> with provider one of "
            f"{', '.join(PROVIDERS)}",
            model=model,
        )
    return provider, model_id


def provider_for(model: str, connection: Mapping[str, Any] | None = None) -> tuple[Provider, str]:
    """The provider a step's ``model`` names and the model id to send it. ``connection``
    holds ``base_url`` and ``api_key`` (a secret reference) for the HTTP providers."""
    name, model_id = split_model(model)
    settings = dict(connection or {})
    if name == "bedrock":
        from relayflow.ai.providers.bedrock import BedrockProvider

        return BedrockProvider(), model_id
    if name == "anthropic":
        from relayflow.ai.providers.anthropic import AnthropicProvider

        return AnthropicProvider(settings.get("base_url"), settings.get("api_key")), model_id
    if name == "openai":
        from relayflow.ai.providers.openai import OpenAIProvider

        return OpenAIProvider(settings.get("base_url"), settings.get("api_key")), model_id
    from relayflow.ai.providers.scripted import ScriptedProvider

    return ScriptedProvider(model_id), model_id
