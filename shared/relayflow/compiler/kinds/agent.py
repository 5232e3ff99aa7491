"""agent: the agent Lambda, then (with ``outcomes``) a native Choice on the outcome it picked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from relayflow.compiler.states import Choice
from relayflow.definition.graph import INHERIT
from relayflow.definition.models import AgentStep
from relayflow.errors import AgentOutcomeInherited

if TYPE_CHECKING:
    from relayflow.compiler.scope import ScopeContext


def agent_config(config: dict[str, Any], step: AgentStep, http_tools: Mapping[str, Any]) -> None:
    """Complete an agent step's Lambda config: the outcome *names* (their targets are
    routing) and the declarations of the HTTP tools it may call (as a tool step carries its
    own)."""
    if step.outcomes:
        config["outcomes"] = sorted(step.outcomes)
    names = {
        tool.split(".")[1]
        for tool in [*(step.tools or []), *(step.allowed_tools or [])]
        if tool.startswith("http.")
    }
    if names:
        config["http_tools"] = {
            name: http_tools[name].model_dump(mode="json", exclude_none=True)
            for name in sorted(names)
            if name in http_tools
        }


def emit_agent(ctx: ScopeContext, key: str, step: AgentStep) -> None:
    """Without ``outcomes`` the agent Task takes ``on_success``. With them, a Choice on
    ``$.steps.<key>.output.outcome`` routes each wired outcome to its step; an ``inherit``
    outcome (and, defensively, any other value) raises ``Relayflow.AgentOutcomeInherited``
    into the step's failure route (``on_failure`` or the workflow's), or fails the run."""
    if not step.outcomes:
        ctx.machine.add(key, ctx.lambda_task(key, step, "agent", step.on_success))
        return
    route = f"{key}.route"
    wired = any(target != INHERIT for target in step.outcomes.values())
    inherited = f"{key}.inherited"
    task = ctx.lambda_task(key, step, "agent", None, then=route if wired else inherited)
    ctx.machine.add(key, task)
    outcome = f"{ctx.step_result_path(key)}.output.outcome"
    ctx.raise_error(
        inherited,
        AgentOutcomeInherited.error_name,
        f"agent step '{key}' picked an outcome that inherits its failure handling",
        ctx.failure_target(key),
    )
    choices: list[dict[str, Any]] = [
        {
            "And": [
                {"Variable": outcome, "IsString": True},
                {"Variable": outcome, "StringEquals": name},
            ],
            "Next": ctx.route(key, target),
        }
        for name, target in sorted(step.outcomes.items())
        if target != INHERIT
    ]
    if choices:
        ctx.machine.add(route, Choice(choices=choices, default=inherited))
