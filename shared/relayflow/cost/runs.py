"""A run item's estimated cost, from the counts the recorder stored on it."""

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
    """Dollars one recorded run cost, rounded to a millionth of a dollar: its state
    transitions on ``engine``, its step Lambdas (requests and duration at 512 MB), and the
    recording of its end (two recorder invocations and two lifecycle events on Standard).
    Not included: the start (an API call, a webhook or a schedule), the steps' DynamoDB and
    other calls, logs. ``None`` when the run has no counts (still running, or its history
    could not be read). The counts come from an execution history, which only Standard
    executions have, hence the default engine (Express bills ``duration_ms``)."""
    if transitions is None or lambda_invocations is None:
        return None
    usage = RunUsage(transitions, lambda_invocations, lambda_ms or 0.0, duration_ms or 0.0)
    dollars = sum(line.dollars for line in state_machine_lines(usage, engine))
    dollars += lambda_dollars(lambda_invocations, lambda_ms or 0.0)
    dollars += sum(line.dollars for line in platform_lines(engine, platform, start=False))
    return round(dollars, 6)
