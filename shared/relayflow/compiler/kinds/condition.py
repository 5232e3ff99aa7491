"""condition: a native Choice when the expression compiles to Choice rules, else the
condition Lambda and a Choice on its boolean result."""

from __future__ import annotations

from relayflow.compiler.emitter import Emitter
from relayflow.compiler.states import Choice
from relayflow.definition.models import ConditionStep
from relayflow.expressions import condition_to_choice


def emit_condition(ctx: Emitter, key: str, step: ConditionStep) -> None:
    on_true = ctx.route(key, step.on_true) or ctx.end_state(key)
    on_false = ctx.route(key, step.on_false) or ctx.end_state(key)
    rule = condition_to_choice(step.expression)
    if rule is not None and not ctx.must_catch(step):
        ctx.c.runners[key] = "native"
        ctx.machine.add(key, Choice(choices=[{**rule, "Next": on_true}], default=on_false))
        return
    route = f"{key}.route"
    task = ctx.lambda_task(key, step, "condition", None, then=route)
    ctx.machine.add(key, task)
    ctx.machine.add(
        route,
        Choice(
            choices=[
                {
                    "Variable": f"$.steps.{key}.output.result",
                    "BooleanEquals": True,
                    "Next": on_true,
                }
            ],
            default=on_false,
        ),
    )
