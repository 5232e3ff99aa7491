"""The text ``relayflow compile --cost`` prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.cost.bill import ENGINES
from relayflow.cost.estimate import DEFAULT_ITEMS, estimate


def cost_report(asl: Mapping[str, Any], *, items: int = DEFAULT_ITEMS) -> str:
    """The estimated cost per 1,000,000 runs of ``asl`` on both engines, for its cheapest and
    its dearest path, with the counts and assumptions behind it (docs/cost.md)."""
    found = estimate(asl, items=items)
    lines = [
        f"estimated cost of '{asl.get('Comment', '')}' per 1,000,000 runs, us-east-1 list "
        "prices, all-in (API start and recording included)",
        f"assumed: steps succeed at their first attempt, each loop body runs once, each "
        f"for_each runs {found.items} items, a step Lambda takes {found.lambda_ms:g} ms and "
        f"other states {found.state_ms:g} ms (the Express duration)",
        f"{'path':<9} {'transitions':>11} {'lambdas':>7} {'waits':>8} "
        + " ".join(f"{engine:>12}" for engine in ENGINES)
        + f" {'saving':>8}",
    ]
    for name, cost in (("cheapest", found.cheapest), ("dearest", found.dearest)):
        standard = found.per_million(name, "standard")
        express = found.per_million(name, "express")
        lines.append(
            f"{name:<9} {cost.transitions:>11} {cost.lambda_invocations:>7} "
            f"{cost.wait_seconds:>7g}s "
            + " ".join(f"{'$' + format(found.per_million(name, e), ',.2f'):>12}" for e in ENGINES)
            + f" {standard / express:>7.1f}x"
        )
    lines.append(
        "Express runs at most 5 minutes, at least once, without an execution history: "
        "whether this workflow may use it is the engine choice's call (docs/cost.md)."
    )
    return "\n".join(lines) + "\n"
