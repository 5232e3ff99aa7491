"""noop: a native Pass with a null output."""

from __future__ import annotations

from relayflow.compiler.asl import SUCCEEDED
from relayflow.compiler.emitter import Emitter
from relayflow.compiler.states import Pass
from relayflow.definition.models import NoopStep


def emit_noop(ctx: Emitter, key: str, step: NoopStep) -> None:
    ctx.c.runners[key] = "native"
    record = {"output": None, "status": SUCCEEDED}
    if key in ctx.c.liveness.folds and ctx.mode != "item":
        state = Pass(**ctx.fold(key, record))
    else:
        state = Pass(result=record, result_path=ctx.step_result_path(key))
    ctx.machine.add(key, ctx.flow(state, key, step.on_success))
