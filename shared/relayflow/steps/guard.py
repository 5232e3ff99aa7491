"""The flow-control guard every step function's handler wears, under ``@step_handler``.

A step whose config has neither ``concurrency`` nor ``rate_limit`` goes straight to its logic:
no import of the flow-control code and no table call, so an unlimited step costs nothing. A
flow-controlled one runs only once admitted (:mod:`relayflow.reliability.flow`): a refusal
raises ``Relayflow.Throttled`` before the step's logic starts, and a held slot is released
however the logic ends. A dry run never reaches it (:mod:`relayflow.steps.boundary`): it is
not counted.
"""

from __future__ import annotations

import functools
from typing import Any

from relayflow.observability import Handler

#: The config fields that turn flow control on (``relayflow.definition.models``).
FLOW_FIELDS = ("concurrency", "rate_limit")


def is_flow_controlled(event: Any) -> bool:
    """Whether a step Task payload asks for flow control (a malformed one does not: the
    step's own parsing reports it)."""
    from relayflow.document import config_of

    config = config_of(event.get("step") if isinstance(event, dict) else None)
    return config is not None and any(config.get(name) for name in FLOW_FIELDS)


def flow_controlled(func: Handler) -> Handler:
    """Decorate a step handler: run it within the step's concurrency and rate limits."""

    @functools.wraps(func)
    def wrapper(event: dict[str, Any], context: Any) -> Any:
        if not is_flow_controlled(event):
            return func(event, context)
        from relayflow.reliability.flow import step_admission

        with step_admission(event, context):
            return func(event, context)

    return wrapper
