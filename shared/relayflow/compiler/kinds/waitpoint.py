"""waitpoint: a callback Task that an external completion (or failure) ends."""

from __future__ import annotations

from relayflow.compiler.asl import SUCCEEDED
from relayflow.compiler.emitter import Emitter
from relayflow.definition.models import WaitpointStep


def emit_waitpoint(ctx: Emitter, key: str, step: WaitpointStep) -> None:
    """The completion data is the output; ``/fail`` fails the step with
    ``Relayflow.WaitpointFailed`` (routed like any failure); expiry takes ``on_timeout``
    when set, else fails the step with ``States.Timeout``."""
    config = step.model_dump(
        mode="json", include={"label", "idempotency_key", "timeout_seconds"}, exclude_none=True
    )
    task = ctx.callback_task(key, step, config, {"output.$": "$.data", "status": SUCCEEDED})
    if step.on_timeout:
        timeout_catch = {
            "ErrorEquals": ["States.Timeout"],
            "ResultPath": "$.error",
            "Next": ctx.route(key, step.on_timeout),
        }
        task.catch = [timeout_catch, *task.catch]
    ctx.machine.add(key, ctx.flow(task, key, step.on_success))
