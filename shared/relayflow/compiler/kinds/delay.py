"""delay: a native Wait (``Seconds``, ``SecondsPath``, ``Timestamp`` or ``TimestampPath``)."""

from __future__ import annotations

from relayflow.compiler.asl import json_path_of_placeholder
from relayflow.compiler.emitter import Emitter
from relayflow.compiler.states import Wait
from relayflow.definition.models import DelayStep


def emit_delay(ctx: Emitter, key: str, step: DelayStep) -> None:
    ctx.c.runners[key] = "native"
    state = Wait()
    if isinstance(step.seconds, int):
        state.seconds = step.seconds
    elif isinstance(step.seconds, str):
        state.seconds_path = json_path_of_placeholder(step.seconds)
    elif step.until is not None:
        path = json_path_of_placeholder(step.until)
        if path is not None:
            state.timestamp_path = path
        else:
            state.timestamp = step.until.strip()
    ctx.machine.add(key, ctx.flow(state, key, step.on_success))
