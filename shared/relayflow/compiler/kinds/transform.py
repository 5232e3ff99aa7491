"""transform: a native Pass when the mapping compiles to Parameters, else the transform
Lambda."""

from __future__ import annotations

from relayflow.compiler.asl import SUCCEEDED
from relayflow.compiler.emitter import Emitter
from relayflow.compiler.states import Pass
from relayflow.definition.models import TransformStep
from relayflow.expressions import template_to_parameters


def emit_transform(ctx: Emitter, key: str, step: TransformStep) -> None:
    params = template_to_parameters({"output": step.mapping})
    if params is not None and not ctx.must_catch(step):
        ctx.c.runners[key] = "native"
        state = Pass(**ctx.fold(key, {**params, "status": SUCCEEDED}))
        ctx.machine.add(key, ctx.flow(state, key, step.on_success))
        return
    ctx.machine.add(key, ctx.lambda_task(key, step, "transform", step.on_success))
