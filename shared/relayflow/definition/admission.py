"""Run admission settings of a workflow: ``singleton``, ``concurrency``, ``debounce``, ``batch``.

They decide what a trigger (API, event, webhook or schedule) does when it asks for a run:
start it, queue it, skip it, or fold it into a run that starts later. The rules are enforced
in DynamoDB by :mod:`relayflow.control.admission`; ``docs/flow-control.md`` documents them.

Durations are whole seconds or a string such as ``30s``, ``5m``, ``1h`` or ``1d``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

_DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h|d)?\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, None: 1}


def parse_duration(value: Any) -> int:
    """Seconds of ``value`` (an integer, or digits with an ``s``/``m``/``h``/``d`` suffix)."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string like '30s' or '5m'")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    raise ValueError(
        f"{value!r} is not a duration: use seconds (30) or a string like '30s', '5m', '1h', '1d'"
    )


Duration = Annotated[int, BeforeValidator(parse_duration)]


def _template(value: str) -> str:
    from relayflow.expressions.templates import check_template

    check_template(value)
    return value


#: The key template: rendered with the trigger as ``trigger``; its text picks the key.
KeyTemplate = Annotated[
    str,
    AfterValidator(_template),
    Field(
        min_length=1,
        max_length=1000,
        description="Template over the trigger ({{ trigger.order_id }}); its rendered text is "
        "the key the rule counts per.",
    ),
]


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SingletonSettings(_Settings):
    """At most one running run per key."""

    key: KeyTemplate = "default"
    mode: Literal["skip", "cancel_running"] = Field(
        "skip",
        description="skip: a new trigger starts nothing and the answer names the running run; "
        "cancel_running: the running run is cancelled and the new one starts.",
    )


class ConcurrencySettings(_Settings):
    """At most ``limit`` running runs per key; the rest wait in a FIFO queue per key."""

    limit: int = Field(ge=1, le=1000, description="Runs of one key that may run at once.")
    key: KeyTemplate = "default"


class DebounceSettings(_Settings):
    """Triggers of one key within ``period`` of each other collapse into one run, started
    with the last trigger once the key has been quiet for ``period`` (or ``max_wait`` after
    its first trigger, whichever is sooner)."""

    key: KeyTemplate = "default"
    period: Duration = Field(ge=1, le=86_400, description="Quiet time that starts the run.")
    max_wait: Duration | None = Field(
        None, ge=1, le=86_400 * 7, description="Longest a busy key can delay its run."
    )

    @model_validator(mode="after")
    def _max_wait_covers_period(self) -> DebounceSettings:
        if self.max_wait is not None and self.max_wait < self.period:
            raise ValueError("max_wait must be at least the period")
        return self


class BatchSettings(_Settings):
    """Event and webhook triggers of one key are collected; one run receives up to
    ``max_size`` of them as a list, once the batch is full or ``timeout`` after its first."""

    max_size: int = Field(100, ge=2, le=1000, description="Triggers per run at most.")
    timeout: Duration = Field(60, ge=1, le=86_400, description="Longest a batch stays open.")
    key: KeyTemplate = "default"


class CancelOn(_Settings):
    """A matching event on the Relayflow bus cancels the workflow's running runs it matches."""

    event: str = Field(
        min_length=1, max_length=256, description="The event's detail-type, e.g. order.cancelled."
    )
    source: str | None = Field(None, max_length=256, description="Only events of this source.")
    match: str | None = Field(
        None,
        max_length=4000,
        description="CEL over the run's trigger (trigger) and the event (event, shaped like an "
        "event trigger); a run is cancelled when it is true. Absent: every running run.",
    )

    @model_validator(mode="after")
    def _match_parses(self) -> CancelOn:
        from relayflow.expressions.cel import ExpressionSyntaxError, check_expression

        if self.match is not None:
            try:
                check_expression(self.match)
            except ExpressionSyntaxError as exc:
                raise ValueError(f"match is not valid CEL: {exc}") from exc
        return self


@dataclass(frozen=True)
class Subscription:
    """An event subscription trigger sync makes besides the triggers: for a ``cancel_on``
    entry (``delivery`` ``cancel``) or a ``wait_for_event`` step (``wait_event``); ``index``
    is the entry's position (for a wait, unused)."""

    delivery: str
    index: int
    event: str
    source: str | None
    type: str = "subscription"


def subscriptions_of(definition: Any) -> list[Subscription]:
    """The subscriptions a workflow (model or stored JSON) needs beyond its triggers."""
    data = definition if isinstance(definition, dict) else definition.model_dump(mode="json")
    found: list[Subscription] = []
    for i, raw in enumerate(data.get("cancel_on") or []):
        entry = CancelOn.model_validate(raw)
        found.append(Subscription("cancel", i, entry.event, entry.source))
    waits = {
        (raw["event"], raw.get("source"))
        for raw in (data.get("steps") or {}).values()
        if isinstance(raw, dict) and raw.get("type") == "wait_for_event"
    }
    for i, (event, source) in enumerate(sorted(waits, key=lambda w: (w[0], w[1] or ""))):
        found.append(Subscription("wait_event", i, event, source))
    return found


class CatchUpSettings(_Settings):
    """Missed ticks of a cron trigger (a disabled workflow, an open breaker, a deploy gap)
    run once each, oldest first, when they are at most ``window`` old; older ones are
    recorded as skipped."""

    window: Duration = Field(ge=60, le=86_400 * 7, description="How far back ticks still run.")
