"""agent: the agent Lambda, then (with ``outcomes``) a native Choice on the outcome it picked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.compiler.asl import (
    BRANCH_RESULT,
    LAMBDA_INVOKE,
    LIVE_ALIAS,
    START_EXECUTION_SYNC,
    TRANSIENT_RETRY,
    child_run_input,
)
from relayflow.compiler.emitter import Emitter
from relayflow.compiler.states import Choice, Task
from relayflow.definition.agent_tools import workflow_tools
from relayflow.definition.graph import INHERIT
from relayflow.definition.models import AgentStep
from relayflow.document import StepRef, task_parameters
from relayflow.errors import AgentOutcomeInherited

#: The branch an agent returns when a tool call waits for a person.
AWAITING_APPROVAL = "awaiting_approval"
#: The branch an agent returns when a tool call runs another workflow (a child run).
AWAITING_WORKFLOW = "awaiting_workflow"
#: Errors of starting a child run that a second try can clear (too many open executions).
#: The child's name is the same on each try, so a start that did happen is not repeated.
START_RETRY_ERRORS = ("StepFunctions.ExecutionLimitExceededException",)


def agent_config(
    config: dict[str, Any],
    step: AgentStep,
    http_tools: Mapping[str, Any],
    workflow_schemas: Mapping[str, Any] | None = None,
) -> None:
    """Complete an agent step's Lambda config: the outcome *names* (their targets are
    routing), the declarations of the HTTP tools it may call (as a tool step carries its
    own) and the ``input_schema`` of each workflow it may run as a tool (resolved by the
    caller: the control plane or the local runner,
    :func:`relayflow.validation.children.child_input_schemas`)."""
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
    schemas = {
        workflow_id: (workflow_schemas or {})[workflow_id]
        for workflow_id in workflow_tools(config)
        if (workflow_schemas or {}).get(workflow_id) is not None
    }
    if schemas:
        config["workflow_schemas"] = schemas


def emit_agent(ctx: Emitter, key: str, step: AgentStep) -> None:
    """Without ``outcomes`` the agent Task takes ``on_success``. With them, a Choice on
    ``$.steps.<key>.output.outcome`` routes each wired outcome to its step; an ``inherit``
    outcome (and, defensively, any other value) raises ``Relayflow.AgentOutcomeInherited``
    into the step's failure route (``on_failure`` or the workflow's), or fails the run.

    With ``require_approval_tools``: agent Task → ``<key>.await`` (a Choice on the branch
    ``awaiting_approval``) → ``<key>.approval`` (the approval function's callback Task, the
    decision at ``$.steps.<key>.approval``) → the agent Task again, which resumes the loop.
    No Lambda waits for the person.

    With workflow tools (``workflow.<id>``): the same gate also routes the branch
    ``awaiting_workflow`` to ``<key>.workflow``, a ``startExecution.sync:2`` Task that runs
    the child the agent named (its result at ``$.steps.<key>.workflow``) and returns to the
    agent Task."""
    route = f"{key}.route"
    inherited = f"{key}.inherited"
    wired = any(target != INHERIT for target in (step.outcomes or {}).values())
    if not step.outcomes:
        after: str | None = None
    else:
        after = route if wired else inherited
    children = workflow_tools(step.model_dump(exclude_none=True))
    if step.require_approval_tools or children:
        # Not "<key>.gate": the step-through variant names its gate before a step so.
        gate = f"{key}.await"
        task = ctx.lambda_task(key, step, "agent", None, then=gate)
        task.result_selector = dict(BRANCH_RESULT)
        ctx.machine.add(key, task)
        emit_approval_gate(ctx, key, step, gate, after, children)
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
    ctx: Emitter,
    key: str,
    step: AgentStep,
    gate: str,
    after: str | None,
    children: list[str] | None = None,
) -> None:
    """The Choice after the agent Task and the states it leads to: the approval callback
    Task (the ``approval`` step's own function and request: guest links, notification
    channels, the respond API, scoped to the pending call) and, with workflow tools, the
    child-run Task."""
    approval = f"{key}.approval"
    onward = after or ctx.route(key, step.on_success) or ctx.end_state(key)
    branch = f"{ctx.step_result_path(key)}.branch"
    targets = {AWAITING_APPROVAL: approval} if step.require_approval_tools else {}
    if children:
        targets[AWAITING_WORKFLOW] = emit_child_run(ctx, key, children)
    ctx.machine.add(
        gate,
        Choice(
            choices=[
                {
                    "And": [
                        {"Variable": branch, "IsString": True},
                        {"Variable": branch, "StringEquals": name},
                    ],
                    "Next": target,
                }
                for name, target in targets.items()
            ],
            default=onward,
        ),
    )
    if not step.require_approval_tools:
        return
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
                dict(TRANSIENT_RETRY),
            ],
            catch=ctx.catchers(key, None),
            next=key,
        ),
    )


def emit_child_run(ctx: Emitter, key: str, children: list[str]) -> str:
    """``<key>.workflow``: start the child run the agent's ``output.pending`` names and wait
    for it (``startExecution.sync:2``), then go back to the agent Task. Its result lands at
    ``$.steps.<key>.workflow``: ``{run_id, steps}``, or the caught ``{Error, Cause}`` (the
    agent gives the model the failure as the call's result, so every failure is caught).

    Same tenant only: the state machine's name prefix (the tenant's) is fixed here, and the
    agent names only a workflow of its permitted ``workflow.<id>`` tools. The child's input
    is a standard state document (the call's arguments as ``trigger``, ``run.dry_run``
    inherited, ``run.depth`` one more, ``run.parent`` set)."""
    state = f"{key}.workflow"
    ctx.c.children.update(children)  # the state machine role may start these only
    pending = f"{ctx.step_result_path(key)}.output.pending"
    prefix = ctx.c.options.state_machine_arn("")
    ctx.machine.add(
        state,
        Task(
            resource=START_EXECUTION_SYNC,
            parameters={
                "StateMachineArn.$": (
                    f"States.Format('{prefix}{{}}:{LIVE_ALIAS}', {pending}.workflow_id)"
                ),
                "Name.$": f"{pending}.run_id",
                "Input": child_run_input(
                    key,
                    f"{pending}.run_id",
                    {"workflow_id.$": f"{pending}.workflow_id"},
                    None,
                    {"trigger.$": f"{pending}.input"},
                ),
            },
            result_selector={"run_id.$": "$.Name", "steps.$": "$.Output.steps"},
            result_path=f"{ctx.step_result_path(key)}.workflow",
            retry=[
                {
                    "ErrorEquals": list(START_RETRY_ERRORS),
                    "IntervalSeconds": 1,
                    "MaxAttempts": 3,
                    "BackoffRate": 2.0,
                    "JitterStrategy": "FULL",
                }
            ],
            catch=[
                {
                    "ErrorEquals": ["States.ALL"],
                    "ResultPath": f"{ctx.step_result_path(key)}.workflow",
                    "Next": key,
                }
            ],
            next=key,
        ),
    )
    return state
