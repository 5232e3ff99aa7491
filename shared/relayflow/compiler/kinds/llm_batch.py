"""llm_batch: submit in the step's Lambda, then a compiled poll loop (Choice → Wait → status
Task → Choice) until the job ended, so no Lambda waits for the provider."""

from __future__ import annotations

from relayflow.compiler.emitter import Emitter
from relayflow.compiler.states import Choice, Wait
from relayflow.definition.models import LlmBatchStep


def emit_llm_batch(ctx: Emitter, key: str, step: LlmBatchStep) -> None:
    """``<key>`` submits; ``<key>.check`` goes on once ``output.state`` is no longer
    ``in_progress`` (an ended output large enough to be offloaded has no ``state`` field: it
    goes on too); ``<key>.wait`` waits ``poll_interval_seconds``; ``<key>.poll`` (the same
    function, told apart by its state name) writes the job's status over the step's result.
    Both Tasks carry the step's retries and failure route; the function raises
    ``Relayflow.BatchDeadline`` past ``deadline_seconds``."""
    check, wait, poll = f"{key}.check", f"{key}.wait", f"{key}.poll"
    ctx.machine.add(key, ctx.lambda_task(key, step, "llm_batch", None, then=check))
    state = f"{ctx.step_result_path(key)}.output.state"
    onward = ctx.route(key, step.on_success) or ctx.end_state(key)
    ctx.machine.add(
        check,
        Choice(
            choices=[
                {"Not": {"Variable": state, "IsPresent": True}, "Next": onward},
                {"Variable": state, "StringEquals": "in_progress", "Next": wait},
            ],
            default=onward,
        ),
    )
    ctx.machine.add(wait, Wait(seconds=step.poll_interval_seconds, next=poll))
    ctx.machine.add(poll, ctx.lambda_task(key, step, "llm_batch", None, then=check))
