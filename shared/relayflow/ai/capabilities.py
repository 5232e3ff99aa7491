"""Which sampling parameters each provider and model accepts: one table, read by validation
(a definition is refused with the step's path) and by the providers (a request never carries
a parameter its API refuses).

=======================================  ===============  =========================
provider / model                         ``temperature``  output-token limit sent as
=======================================  ===============  =========================
``anthropic:<any>``                      not accepted     ``max_tokens``
``bedrock:anthropic.…`` (Converse and    not accepted     ``maxTokens`` /
batch records)                                            ``max_tokens``
``bedrock:<other model>``                0–1              ``maxTokens`` (Converse)
``openai:o1…``, ``o3…``, ``o4…``,        not accepted     ``max_completion_tokens``
``gpt-5…`` (reasoning models)
``openai:<other model>``                 0–2              ``max_completion_tokens``
``scripted:<fixture>``                   0–2 (ignored)    —
=======================================  ===============  =========================

The sources: the official ``anthropic`` SDK's ``MessageCreateParams`` has no
``temperature`` (nor ``top_p``/``top_k``), and Anthropic's models on Bedrock take the same
body; botocore's ``bedrock-runtime`` model caps ``InferenceConfiguration.temperature`` at 1;
the ``openai`` SDK documents ``max_tokens`` as deprecated in favour of
``max_completion_tokens``, which reasoning models require, and those models refuse a
``temperature``. ``tests/unit/test_ai_conformance.py`` holds the providers' requests to the
SDKs' request models, so a new SDK that changes any of this fails there first.
"""

from __future__ import annotations

from dataclasses import dataclass

from relayflow.errors import InvalidArgsError

#: Cross-region inference profile prefixes of Bedrock model ids.
_BEDROCK_REGIONS = ("us.", "eu.", "apac.", "global.", "us-gov.", "jp.", "au.")
#: OpenAI reasoning model families (they refuse ``temperature``).
_OPENAI_REASONING = ("o1", "o3", "o4", "gpt-5")


@dataclass(frozen=True)
class Sampling:
    """What one model accepts. ``temperature`` is the accepted ``(low, high)`` range, or
    ``None`` when the model takes no temperature; ``why`` says so in a person's words."""

    temperature: tuple[float, float] | None
    why: str


def _bedrock_base(model_id: str) -> str:
    for prefix in _BEDROCK_REGIONS:
        if model_id.startswith(prefix):
            return model_id[len(prefix) :]
    return model_id


def sampling(provider: str, model_id: str) -> Sampling:
    """The sampling parameters ``<provider>:<model_id>`` accepts (see the module table)."""
    if provider == "anthropic":
        return Sampling(None, "Anthropic's Messages API takes no temperature")
    if provider == "bedrock":
        if _bedrock_base(model_id).startswith("anthropic."):
            return Sampling(None, "Anthropic models take no temperature, on Bedrock too")
        return Sampling((0.0, 1.0), "Bedrock accepts a temperature from 0 to 1")
    if provider == "openai":
        name = model_id.rsplit("/", 1)[-1].lower()
        if name.startswith(_OPENAI_REASONING):
            return Sampling(None, f"OpenAI reasoning models ({name}) take no temperature")
        return Sampling((0.0, 2.0), "OpenAI accepts a temperature from 0 to 2")
    return Sampling((0.0, 2.0), "a temperature from 0 to 2")


def temperature_problem(provider: str, model_id: str, temperature: float | None) -> str | None:
    """Why ``temperature`` cannot be sent to the model, or ``None`` when it can (or is
    unset)."""
    if temperature is None:
        return None
    rules = sampling(provider, model_id)
    if rules.temperature is None:
        return f"{rules.why}; remove temperature for {provider}:{model_id}"
    low, high = rules.temperature
    if not low <= float(temperature) <= high:
        return f"{rules.why}; {temperature} is outside it ({provider}:{model_id})"
    return None


def checked_temperature(provider: str, model_id: str, temperature: float | None) -> float | None:
    """``temperature`` when the model accepts it; ``Relayflow.InvalidArgs`` otherwise
    (validation reports the same problem with the step's path before a run starts)."""
    problem = temperature_problem(provider, model_id, temperature)
    if problem is not None:
        raise InvalidArgsError(problem, field="temperature")
    return temperature
