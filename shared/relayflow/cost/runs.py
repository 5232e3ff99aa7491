"""A run item's estimated cost, from the counts the recorder stored on it (Standard) or from
its duration (Express)."""

from __future__ import annotations

from relayflow.cost.bill import (
    PLATFORM,
    Engine,
    Platform,
    RunUsage,
    lambda_dollars,
    platform_lines,
    state_machine_lines,
)


def run_cost_usd(
    transitions: int | None,
    lambda_invocations: int | None,
    lambda_ms: float | None,
    *,
    duration_ms: float | None = None,
    engine: Engine = "standard",
    platform: Platform = PLATFORM,
) -> float | None:
    """Dollars one recorded run cost, rounded to a millionth of a dollar, or ``None`` when
    the run carries too little to price it.

    Standard: its state transitions, its step Lambdas (requests and duration at 512 MB) and
    the recording of its end (two recorder invocations and two lifecycle events); ``None``
    without counts (still running, or its history could not be read).

    Express: one request and ``duration_ms`` (at 64 MB), the recording of its end (the
    machine's ``UpdateItem``, the deadline marker and the sweep that settles it) and, when
    counted, its step Lambdas (an Express run has no history to count them from, so usually
    they are left out); ``None`` without a duration (still running).

    Not included on either: the start (an API call, a webhook or a schedule), the steps'
    DynamoDB and other calls, logs."""
    if engine == "express":
        if duration_ms is None:
            return None
    elif transitions is None or lambda_invocations is None:
        return None
    usage = RunUsage(
        transitions or 0, lambda_invocations or 0, lambda_ms or 0.0, duration_ms or 0.0
    )
    dollars = sum(line.dollars for line in state_machine_lines(usage, engine))
    dollars += lambda_dollars(lambda_invocations or 0, lambda_ms or 0.0)
    dollars += sum(line.dollars for line in platform_lines(engine, platform, start=False))
    return round(dollars, 6)
