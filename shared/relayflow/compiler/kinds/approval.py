"""approval: a callback Task the decision completes, then a Choice on the decision."""

from __future__ import annotations

from typing import Any

from relayflow.compiler.asl import SUCCEEDED
from relayflow.compiler.emitter import Emitter
from relayflow.compiler.states import Choice, Pass
from relayflow.definition.models import ApprovalStep

#: The fields of an approval step its function needs to record the request.
APPROVAL_CONFIG = {
    "title",
    "description",
    "prompt",
    "options",
    "form_schema",
    "assigned_to",
    "assigned_role",
    "timeout_action",
    "timeout_seconds",
    "notification_channels",
}


def emit_approval(ctx: Emitter, key: str, step: ApprovalStep) -> None:
    """The decision ``{approved, option, data, responder, responded_at, timed_out}`` lands
    at ``$.steps.<key>.output``; a Choice routes on the option (``branches``), then on
    ``approved`` (``on_approve`` / ``on_reject``). Expiry (``States.Timeout``): ``fail``
    takes the failure route; ``approve`` / ``reject`` write that decision with
    ``timed_out: true`` and route like one; ``route`` takes ``on_timeout``."""
    config = step.model_dump(mode="json", include=APPROVAL_CONFIG, exclude_none=True)
    task = ctx.callback_task(key, step, config, {"output.$": "$", "status": SUCCEEDED})
    route = f"{key}.route"
    output = f"$.steps.{key}.output"
    choices: list[dict[str, Any]] = [
        {
            "And": [
                {"Variable": f"{output}.option", "IsString": True},
                {"Variable": f"{output}.option", "StringEquals": name},
            ],
            "Next": ctx.route(key, target),
        }
        for name, target in sorted((step.branches or {}).items())
    ]
    for decided, target in ((True, step.on_approve), (False, step.on_reject)):
        if target:
            choices.append(
                {
                    "Variable": f"{output}.approved",
                    "BooleanEquals": decided,
                    "Next": ctx.route(key, target),
                }
            )
    timeout_catch: dict[str, Any] | None = None
    if step.timeout_action in ("approve", "reject"):
        timed_out = f"{key}.timed_out"
        decision = {
            "approved": step.timeout_action == "approve",
            "option": step.timeout_action if step.timeout_action in step.options else None,
            "data": None,
            "responder": None,
            "responded_at": None,
            "timed_out": True,
        }
        ctx.machine.add(
            timed_out,
            Pass(
                result={"output": decision, "status": SUCCEEDED},
                result_path=ctx.step_result_path(key),
                next=route if choices else None,
                end=not choices,
            ),
        )
        timeout_catch = {"ErrorEquals": ["States.Timeout"], "ResultPath": None}
        timeout_catch["Next"] = timed_out
    elif step.timeout_action == "route" and step.on_timeout:
        timeout_catch = {
            "ErrorEquals": ["States.Timeout"],
            "ResultPath": "$.error",
            "Next": ctx.route(key, step.on_timeout),
        }
    if timeout_catch is not None:
        task.catch = [timeout_catch, *task.catch]
    if not choices:
        ctx.machine.add(key, ctx.flow(task, key, None))
        return
    task.next = route
    ctx.machine.add(key, task)
    ctx.machine.add(route, Choice(choices=choices, default=ctx.end_state(key)))
