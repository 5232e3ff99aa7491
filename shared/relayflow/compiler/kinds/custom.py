"""custom: the custom Lambda, then a Choice on the branch it names."""

from __future__ import annotations

from relayflow.compiler.asl import BRANCH_RESULT
from relayflow.compiler.emitter import Emitter
from relayflow.compiler.states import Choice
from relayflow.definition.models import CustomStep


def emit_custom(ctx: Emitter, key: str, step: CustomStep) -> None:
    """The custom Lambda answers with a branch name (or null); a Choice routes on it and
    falls back to on_success (or the end) for no branch or an undeclared one."""
    if not step.branches:
        ctx.machine.add(key, ctx.lambda_task(key, step, "custom", step.on_success))
        return
    route = f"{key}.route"
    task = ctx.lambda_task(key, step, "custom", None, then=route)
    task.result_selector = dict(BRANCH_RESULT)
    ctx.machine.add(key, task)
    default = ctx.route(key, step.on_success) or ctx.end_state(key)
    choices = [
        {
            "And": [
                {"Variable": f"$.steps.{key}.branch", "IsString": True},
                {"Variable": f"$.steps.{key}.branch", "StringEquals": name},
            ],
            "Next": ctx.route(key, target),
        }
        for name, target in sorted(step.branches.items())
    ]
    ctx.machine.add(route, Choice(choices=choices, default=default))
