"""The record formats of Bedrock batch inference, per model family.

A batch job's JSONL records are ``{"recordId", "modelInput"}``, ``modelInput`` being the
``InvokeModel`` request body of the job's model, and each output record carries the
``InvokeModel`` response body as ``modelOutput``. Those bodies differ per model family:

=========================  =======================================  ===========================
family (model id prefix)   ``modelInput``                           ``modelOutput`` read
=========================  =======================================  ===========================
``anthropic.``             Messages: ``anthropic_version``,          ``content[].text``,
                           ``max_tokens``, ``messages``, ``system``  ``usage.input_tokens`` …
                           (no ``temperature``)
``amazon.nova-``           ``schemaVersion: messages-v1``,           ``output.message.content[]
                           ``messages`` (``content: [{text}]``),     .text``, ``usage.inputTokens``
                           ``system: [{text}]``, ``inferenceConfig``  / ``outputTokens``
                           (``maxTokens``, ``temperature``)
``meta.llama3``            ``prompt`` in the Llama 3 chat template,  ``generation``,
                           ``max_gen_len``, ``temperature``          ``prompt_token_count`` /
                                                                     ``generation_token_count``
``mistral.`` (text)        ``prompt`` as ``<s>[INST] … [/INST]``,    ``outputs[0].text`` (no
                           ``max_tokens``, ``temperature``           token counts)
``mistral.mistral-large-   chat: ``messages`` (system, user),        ``choices[0].message.
2407``                     ``max_tokens``, ``temperature``           content`` (no token counts)
=========================  =======================================  ===========================

Cross-region profile prefixes (``us.``, ``eu.``, ``apac.``, ``global.``) are ignored. Any
other model (Amazon Titan, Cohere, AI21, Llama 2, Nova embeddings…) is refused: validation
names the rule ``model-provider``, and a payload that reaches the step anyway gets
``Relayflow.InvalidArgs``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from relayflow.errors import InvalidArgsError

ANTHROPIC_VERSION = "bedrock-2023-05-31"
#: Model families whose batch record format Relayflow writes, for messages and docs.
FAMILIES_TEXT = (
    "Anthropic (anthropic.…), Amazon Nova (amazon.nova-…), Meta Llama 3 (meta.llama3…) and "
    "Mistral (mistral.…) models"
)
_REGIONS = ("us.", "eu.", "apac.", "global.")


@dataclass(frozen=True)
class RecordFormat:
    """How one family's records are written and its output records read."""

    family: str
    #: ``(prompt, system, max_tokens, temperature) -> modelInput``
    build: Callable[[str, str | None, int, float | None], dict[str, Any]]
    #: ``modelOutput -> (text, usage or None when the family reports no token counts)``
    read: Callable[[Mapping[str, Any]], tuple[str, dict[str, int] | None]]


def _base_id(model_id: str) -> str:
    for region in _REGIONS:
        if model_id.startswith(region):
            return model_id[len(region) :]
    return model_id


def _tokens(input_tokens: Any, output_tokens: Any) -> dict[str, int]:
    return {"input_tokens": int(input_tokens or 0), "output_tokens": int(output_tokens or 0)}


# --------------------------------------------------------------------------- Anthropic


def _anthropic_in(
    prompt: str, system: str | None, max_tokens: int, temperature: float | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "anthropic_version": ANTHROPIC_VERSION,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
    }
    if system:
        body["system"] = system
    # No temperature: Anthropic models take none (relayflow.ai.capabilities refuses one
    # before a record is written).
    return body


def _anthropic_out(output: Mapping[str, Any]) -> tuple[str, dict[str, int] | None]:
    text = "".join(
        b.get("text", "") for b in output.get("content") or [] if b.get("type") == "text"
    )
    usage = output.get("usage") or {}
    return text, _tokens(usage.get("input_tokens"), usage.get("output_tokens"))


# --------------------------------------------------------------------------- Amazon Nova


def _nova_in(
    prompt: str, system: str | None, max_tokens: int, temperature: float | None
) -> dict[str, Any]:
    config: dict[str, Any] = {"maxTokens": max_tokens}
    if temperature is not None:
        config["temperature"] = temperature
    body: dict[str, Any] = {
        "schemaVersion": "messages-v1",
        "messages": [{"role": "user", "content": [{"text": prompt}]}],
        "inferenceConfig": config,
    }
    if system:
        body["system"] = [{"text": system}]
    return body


def _nova_out(output: Mapping[str, Any]) -> tuple[str, dict[str, int] | None]:
    message = (output.get("output") or {}).get("message") or {}
    text = "".join(str(b.get("text", "")) for b in message.get("content") or [] if "text" in b)
    usage = output.get("usage") or {}
    return text, _tokens(usage.get("inputTokens"), usage.get("outputTokens"))


# --------------------------------------------------------------------------- Meta Llama 3


def _llama3_in(
    prompt: str, system: str | None, max_tokens: int, temperature: float | None
) -> dict[str, Any]:
    text = "<|begin_of_text|>"
    if system:
        text += f"<|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>"
    text += (
        f"<|start_header_id|>user<|end_header_id|>\n\n{prompt}<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    body: dict[str, Any] = {"prompt": text, "max_gen_len": max_tokens}
    if temperature is not None:
        body["temperature"] = temperature
    return body


def _llama3_out(output: Mapping[str, Any]) -> tuple[str, dict[str, int] | None]:
    return str(output.get("generation") or ""), _tokens(
        output.get("prompt_token_count"), output.get("generation_token_count")
    )


# --------------------------------------------------------------------------- Mistral


def _mistral_text_in(
    prompt: str, system: str | None, max_tokens: int, temperature: float | None
) -> dict[str, Any]:
    # The text-completion template has no system role: the system text leads the
    # instruction.
    instruction = f"{system}\n\n{prompt}" if system else prompt
    body: dict[str, Any] = {"prompt": f"<s>[INST] {instruction} [/INST]", "max_tokens": max_tokens}
    if temperature is not None:
        body["temperature"] = temperature
    return body


def _mistral_chat_in(
    prompt: str, system: str | None, max_tokens: int, temperature: float | None
) -> dict[str, Any]:
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": prompt})
    body: dict[str, Any] = {"messages": messages, "max_tokens": max_tokens}
    if temperature is not None:
        body["temperature"] = temperature
    return body


def _mistral_out(output: Mapping[str, Any]) -> tuple[str, dict[str, int] | None]:
    outputs = output.get("outputs")
    if isinstance(outputs, list) and outputs:
        return str(outputs[0].get("text") or ""), None
    choices = output.get("choices")
    if isinstance(choices, list) and choices:
        return str((choices[0].get("message") or {}).get("content") or ""), None
    return "", None


FORMATS: dict[str, RecordFormat] = {
    "anthropic": RecordFormat("anthropic", _anthropic_in, _anthropic_out),
    "amazon-nova": RecordFormat("amazon-nova", _nova_in, _nova_out),
    "meta-llama3": RecordFormat("meta-llama3", _llama3_in, _llama3_out),
    "mistral-text": RecordFormat("mistral-text", _mistral_text_in, _mistral_out),
    "mistral-chat": RecordFormat("mistral-chat", _mistral_chat_in, _mistral_out),
}


def family_of(model_id: str) -> str | None:
    """The record-format family of a Bedrock model id, or ``None`` when Relayflow does not
    write its batch records."""
    base = _base_id(model_id)
    if base.startswith("anthropic."):
        return "anthropic"
    if base.startswith("amazon.nova-") and "embed" not in base:
        return "amazon-nova"
    if base.startswith("meta.llama3"):
        return "meta-llama3"
    if base.startswith("mistral.mistral-large-2407"):
        return "mistral-chat"
    if base.startswith("mistral."):
        return "mistral-text"
    return None


def record_format(model_id: str) -> RecordFormat:
    """The record format of ``model_id``; ``Relayflow.InvalidArgs`` for any other family."""
    family = family_of(model_id)
    if family is None:
        raise InvalidArgsError(
            f"Bedrock batch inference records are written for {FAMILIES_TEXT}; not for {model_id!r}"
        )
    return FORMATS[family]
