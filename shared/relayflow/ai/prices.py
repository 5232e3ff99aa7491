"""The price table: US dollars per million tokens for each model Relayflow knows, and the
batch discount. The one place prices live; the agent's ``usage`` and the cost benchmark read
it. Prices are list prices (on-demand, us-east-1 for Bedrock) and change: update them here.
A model that is not listed has no estimate (``estimated_cost_usd`` is null), never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from relayflow.ai.messages import Usage


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float
    #: Fraction of the price a batch job pays (Anthropic, OpenAI and Bedrock batch: 50 %).
    batch_factor: float = 0.5


#: Model id (without the provider prefix) → price. Bedrock ids keep their vendor prefix.
PRICES: dict[str, Price] = {
    # Anthropic (Messages API and Bedrock)
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
    "anthropic.claude-sonnet-4-5": Price(3.0, 15.0),
    "anthropic.claude-sonnet-4": Price(3.0, 15.0),
    "anthropic.claude-haiku-4-5": Price(1.0, 5.0),
    "anthropic.claude-3-5-haiku": Price(0.8, 4.0),
    "anthropic.claude-3-haiku": Price(0.25, 1.25),
    # Amazon Nova (Bedrock)
    "amazon.nova-pro-v1": Price(0.8, 3.2),
    "amazon.nova-lite-v1": Price(0.06, 0.24),
    "amazon.nova-micro-v1": Price(0.035, 0.14),
    # OpenAI
    "gpt-4o": Price(2.5, 10.0),
    "gpt-4o-mini": Price(0.15, 0.6),
    "gpt-4.1": Price(2.0, 8.0),
    "gpt-4.1-mini": Price(0.4, 1.6),
}
#: The scripted provider costs nothing.
FREE = Price(0.0, 0.0, 1.0)


def price_for(provider: str, model_id: str) -> Price | None:
    """The price of ``model_id``: an exact entry, else the longest entry the id starts with
    (dated and versioned ids such as ``claude-sonnet-4-5-20250929`` or
    ``anthropic.claude-3-haiku-20240307-v1:0``); cross-region inference profile prefixes
    (``us.``, ``eu.``, ``apac.``, ``global.``) are ignored."""
    if provider == "scripted":
        return FREE
    model = model_id
    for region in ("us.", "eu.", "apac.", "global."):
        if provider == "bedrock" and model.startswith(region):
            model = model[len(region) :]
            break
    if model in PRICES:
        return PRICES[model]
    matches = [name for name in PRICES if model.startswith(name)]
    return PRICES[max(matches, key=len)] if matches else None


def estimate_cost(
    provider: str, model_id: str, usage: Usage, *, batch: bool = False
) -> float | None:
    """Dollars for ``usage`` at the table's price, rounded to a millionth of a dollar; ``None``
    for a model the table does not list."""
    price = price_for(provider, model_id)
    if price is None:
        return None
    factor = price.batch_factor if batch else 1.0
    dollars = (
        usage.input_tokens * price.input_per_mtok + usage.output_tokens * price.output_per_mtok
    ) / 1_000_000
    return round(dollars * factor, 6)
