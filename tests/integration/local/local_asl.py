"""Small builders for hand-written ASL used by the local-runtime tests."""

from __future__ import annotations

import time
from typing import Any

INVOKE = "arn:aws:states:::lambda:invoke"
INVOKE_WAIT_FOR_TOKEN = "arn:aws:states:::lambda:invoke.waitForTaskToken"


def machine(states: dict[str, Any], start: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"StartAt": start or next(iter(states)), "States": states, **extra}


def task(
    function: str,
    *,
    payload: Any = None,
    next_state: str | None = None,
    resource: str = INVOKE,
    **extra: Any,
) -> dict[str, Any]:
    """A ``lambda:invoke`` Task whose result (the Payload) replaces the state's input."""
    state: dict[str, Any] = {
        "Type": "Task",
        "Resource": resource,
        "Parameters": {
            "FunctionName": function,
            **({"Payload.$": "$"} if payload is None else {"Payload": payload}),
        },
        "OutputPath": "$.Payload",
        **extra,
    }
    if resource == INVOKE_WAIT_FOR_TOKEN:
        state.pop("OutputPath")
    if next_state is None:
        state["End"] = True
    else:
        state["Next"] = next_state
    return state


def pass_state(next_state: str | None = None, **extra: Any) -> dict[str, Any]:
    state: dict[str, Any] = {"Type": "Pass", **extra}
    if next_state is None:
        state["End"] = True
    else:
        state["Next"] = next_state
    return state


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.01) -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that. The deadline
    only bounds a failing test: a loaded machine may take seconds to get there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")
