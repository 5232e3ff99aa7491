"""agent: the agent Lambda, then (with ``outcomes``) a native Choice on the outcome it picked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from relayflow.compiler.asl import SUCCEEDED
from relayflow.compiler.states import Choice
from relayflow.definition.graph import INHERIT
from relayflow.definition.models import AgentStep
from relayflow.errors import AgentOutcomeInherited

#: The branch an agent returns when a tool call waits for a person.
AWAITING_APPROVAL = "awaiting_approval"

if TYPE_CHECKING:
    from relayflow.compiler.scope import ScopeContext


def agent_config(config: dict[str, Any], step: AgentStep, http_tools: Mapping[str, Any]) -> None:
    """Complete an agent step's Lambda config: the outcome *names* (their targets are
    routing) and the declarations of the HTTP tools it may call (as a tool step carries its
    own)."""
    config.pop("approval_channels", None)  # the approval state's, not the Lambda's
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
    into the step's failure route (``on_failure`` or the workflow's), or fails the run.

    With ``require_approval_tools``: agent Task → ``<key>.gate`` (a Choice on the branch
    ``awaiting_approval``) → ``<key>.approval`` (the approval function's callback Task, the
    decision at ``$.steps.<key>.approval``) → the agent Task again, which resumes the loop.
    No Lambda waits for the person."""
    route = f"{key}.route"
    inherited = f"{key}.inherited"
    wired = any(target != INHERIT for target in (step.outcomes or {}).values())
    if not step.outcomes:
        after: str | None = None
    else:
        after = route if wired else inherited
    if step.require_approval_tools:
        gate = f"{key}.gate"
        task = ctx.lambda_task(key, step, "agent", None, then=gate)
        task.result_selector = {
            "output.$": "$.Payload.output",
            "branch.$": "$.Payload.branch",
            "status": SUCCEEDED,
        }
        ctx.machine.add(key, task)
        emit_approval_gate(ctx, key, step, gate, after)
    elif after is None:
        ctx.machine.add(key, ctx.lambda_task(key, step, "agent", step.on_success))
        return
    else:
        ctx.machine.add(key, ctx.lambda_task(key, step, "agent", None, then=after))
    if not step.outcomes:
        return
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


#: What the approval of a gated tool call shows (rendered by the approval function).
APPROVAL_TITLE = "Agent step '{key}' asks to run {{{{ steps.{key}.output.pending.tool }}}}"
APPROVAL_PROMPT = "Arguments: {{{{ steps.{key}.output.pending.input }}}}"


def emit_approval_gate(
    ctx: ScopeContext, key: str, step: AgentStep, gate: str, after: str | None
) -> None:
    """The Choice after the agent Task and the approval callback Task it leads to. The
    approval is the ``approval`` step's own function and request (guest links, notification
    channels, the respond API), scoped to the pending call."""
    from relayflow.compiler.asl import LAMBDA_INVOKE
    from relayflow.compiler.states import Task
    from relayflow.document import StepRef, task_parameters
    from relayflow.errors import TransientError

    approval = f"{key}.approval"
    onward = after or ctx.route(key, step.on_success) or ctx.end_state(key)
    branch = f"{ctx.step_result_path(key)}.branch"
    ctx.machine.add(
        gate,
        Choice(
            choices=[
                {
                    "And": [
                        {"Variable": branch, "IsString": True},
                        {"Variable": branch, "StringEquals": AWAITING_APPROVAL},
                    ],
                    "Next": approval,
                }
            ],
            default=onward,
        ),
    )
    config: dict[str, Any] = {
        "title": APPROVAL_TITLE.format(key=key),
        "prompt": APPROVAL_PROMPT.format(key=key),
        "options": ["approve", "reject"],
        "timeout_action": "fail",
        "scope": f"{{{{ steps.{key}.output.pending.scope }}}}",
    }
    if step.approval_channels:
        config["notification_channels"] = step.approval_channels
    ref = StepRef(key=key, type="approval", config=config)
    # Not a step of its own: recorded under its state name so the compiled IAM statements
    # let the state machine invoke the approval function.
    ctx.c.runners[approval] = "approval"
    ctx.machine.add(
        approval,
        Task(
            resource=f"{LAMBDA_INVOKE}.waitForTaskToken",
            parameters=task_parameters(ctx.c.options.arn("approval"), ref, task_token=True),
            result_path=f"{ctx.step_result_path(key)}.approval",
            retry=[
                *ctx.retriers(None),
                {
                    "ErrorEquals": [TransientError.error_name],
                    "IntervalSeconds": 1,
                    "MaxAttempts": 3,
                    "BackoffRate": 2.0,
                    "JitterStrategy": "FULL",
                },
            ],
            catch=ctx.catchers(key, None),
            next=key,
        ),
    )
