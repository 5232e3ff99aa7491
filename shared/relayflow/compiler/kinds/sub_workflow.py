"""sub_workflow: a depth guard, then ``startExecution.sync:2`` of the child's state machine,
with the child's failure renamed ``Relayflow.SubWorkflowFailed``."""

from __future__ import annotations

from typing import Any

from relayflow.compiler.asl import (
    LAMBDA_INVOKE,
    LAMBDA_SERVICE_ERRORS,
    LIVE_ALIAS,
    MAX_SUB_WORKFLOW_DEPTH,
    START_EXECUTION_SYNC,
    SUCCEEDED,
    child_run_input,
)
from relayflow.compiler.emitter import Emitter
from relayflow.compiler.states import Choice, Pass, Task, Wait
from relayflow.definition.models import SubWorkflowStep
from relayflow.document import StepRef, task_parameters
from relayflow.errors import SubWorkflowDepth, SubWorkflowFailed, WorkflowNotFound
from relayflow.expressions import template_to_parameters

#: How Step Functions refuses to start a state machine (or alias) that does not exist, or an
#: ARN that a rendered id made malformed.
TARGET_MISSING_ERRORS = (
    "StepFunctions.StateMachineDoesNotExistException",
    "StepFunctions.ResourceNotFoundException",
    "StepFunctions.InvalidArnException",
)


def emit_sub_workflow(ctx: Emitter, key: str, step: SubWorkflowStep) -> None:
    """Start the child workflow's state machine (a pinned version, or the ``live`` alias)
    with ``startExecution.sync:2`` and wait for it.

    ``<key>.depth`` refuses to go deeper than :data:`MAX_SUB_WORKFLOW_DEPTH`;
    ``<key>.prepare`` draws a seed for the child's run id (``$.steps.<key>.seed``: not a run
    id nor a status, so a step that fails before its child ran claims neither), and each
    attempt runs as ``md5(<seed>-<retry count>)`` (32 hex digits, an API run id) so a retried
    step starts a fresh child. The child's
    input is a standard state document (``run.depth`` one more, ``run.parent`` set). The
    step output is ``{"run_id", "steps"}``: the child's run id and its final ``steps``.
    A child failure (``States.TaskFailed``, whose Cause is the child's DescribeExecution)
    is re-raised as ``Relayflow.SubWorkflowFailed`` with a JSON Cause
    ``{child_run_id, status, error, cause}``, after the step's retries; the step's record
    then says so: ``{"run_id": <the child's>, "status": "failed", "error": <that Cause>}``.
    """
    ctx.c.runners[key] = "native"
    dynamic = target_id_path(step)
    # A templated target can be any workflow of the tenant: "*" after the tenant's prefix.
    ctx.c.children.add("*" if dynamic else step.workflow_id)
    failure = ctx.failure_target(key)
    guard, too_deep, prepare = f"{key}.depth", f"{key}.too_deep", f"{key}.prepare"
    checked = ctx.c.options.sub_workflow_input_schemas.get(key) is not None and not dynamic
    ctx.machine.add(
        guard,
        Choice(
            choices=[
                {
                    "Variable": "$.run.depth",
                    "NumericGreaterThanEquals": MAX_SUB_WORKFLOW_DEPTH,
                    "Next": too_deep,
                }
            ],
            default=f"{key}.check_input" if checked else prepare,
        ),
    )
    ctx.raise_error(
        too_deep,
        SubWorkflowDepth.error_name,
        f"sub_workflow '{key}' would start '{step.workflow_id}' deeper than "
        f"{MAX_SUB_WORKFLOW_DEPTH} levels of nesting",
        failure,
    )
    schema = ctx.c.options.sub_workflow_input_schemas.get(key)
    if schema is not None and not dynamic:
        emit_input_check(ctx, key, step, schema, failure)
    prepared: dict[str, Any] = {"seed.$": "States.UUID()"}
    if dynamic:
        prepared["workflow_id.$"] = dynamic
    ctx.machine.add(
        prepare,
        Pass(parameters=prepared, result_path=f"$.steps.{key}", next=key),
    )
    if dynamic:
        # The tenant's naming prefix is fixed here, at compile time: the rendered id only
        # completes the name, so no value reaches another tenant's state machine.
        prefix = ctx.c.options.state_machine_arn("")
        target_field = {
            "StateMachineArn.$": (
                f"States.Format('{prefix}{{}}:{LIVE_ALIAS}', $.steps.{key}.workflow_id)"
            )
        }
        child_workflow: dict[str, Any] = {"workflow_id.$": f"$.steps.{key}.workflow_id"}
    else:
        target = ctx.c.options.state_machine_arn(step.workflow_id)
        target += f":{step.version}" if step.version is not None else f":{LIVE_ALIAS}"
        target_field = {"StateMachineArn": target}
        child_workflow = {"workflow_id": step.workflow_id}
    # 32 hex digits, like every run id the API accepts: a hash of the attempt's own UUID
    # and retry count, so each attempt (and each for_each item or loop pass) is new.
    child_run_id = (
        f"States.Hash(States.Format('{{}}-{{}}', $.steps.{key}.seed, $$.State.RetryCount), 'MD5')"
    )
    trigger = template_to_parameters({"trigger": step.input})
    assert trigger is not None  # validation refuses an input that is not native
    policy = step.retry
    if policy is not None and policy.retry_on:
        # The child's failure reaches Retry as States.TaskFailed; it is renamed after.
        renamed = [
            "States.TaskFailed" if name == SubWorkflowFailed.error_name else name
            for name in policy.retry_on
        ]
        policy = policy.model_copy(update={"retry_on": renamed})
    failed = emit_sub_workflow_failure(ctx, key, failure, dynamic=bool(dynamic))
    task = Task(
        resource=START_EXECUTION_SYNC,
        parameters={
            **target_field,
            "Name.$": child_run_id,
            "Input": child_run_input(key, child_run_id, child_workflow, step.version, trigger),
        },
        result_selector={
            "output": {"run_id.$": "$.Name", "steps.$": "$.Output.steps"},
            "status": SUCCEEDED,
        },
        result_path=ctx.step_result_path(key),
        timeout_seconds=step.timeout_seconds,
        retry=[
            rule for rule in ctx.retriers(policy) if rule["ErrorEquals"] != LAMBDA_SERVICE_ERRORS
        ],
        catch=ctx.catchers(key, policy, failure_state=failed),
    )
    wait = ctx.machine.states.get(f"{key}.retry_wait")
    if isinstance(wait, Wait):
        # A linear retry starts a fresh child (a new run id), like an ASL retry does.
        wait.next = prepare
    ctx.machine.add(key, ctx.flow(task, key, step.on_success))


def emit_input_check(
    ctx: Emitter, key: str, step: SubWorkflowStep, schema: Any, failure: str | None
) -> None:
    """``<key>.check_input``: the transform function renders the child's input and checks it
    against the child's ``input_schema`` (resolved when this workflow was published), before
    any child starts. A mismatch is ``Relayflow.InvalidInput`` on the step's failure route;
    the step's retry policy does not apply (the same input fails the same way)."""
    ctx.c.functions.add("transform")
    onward = failure or ctx.reraise_state(key)
    config = {
        "mapping": step.input,
        "input_check": {"workflow_id": step.workflow_id, "schema": schema},
    }
    ctx.machine.add(
        f"{key}.check_input",
        Task(
            resource=LAMBDA_INVOKE,
            parameters=task_parameters(
                ctx.c.options.arn("transform"), StepRef(key=key, type="transform", config=config)
            ),
            result_selector={"checked.$": "$.Payload.output.checked"},
            result_path=f"$.steps.{key}",
            retry=ctx.retriers(None),
            catch=[{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": onward}],
            next=f"{key}.prepare",
        ),
    )


def target_id_path(step: SubWorkflowStep) -> str | None:
    """For a templated ``workflow_id``: the JSONPath or ``States.Format`` that renders it
    (validation admits only such templates); ``None`` for a literal id."""
    if "{{" not in step.workflow_id:
        return None
    native = template_to_parameters({"id": step.workflow_id})
    assert native is not None and "id.$" in native  # checked by validation
    return str(native["id.$"])


def emit_sub_workflow_failure(
    ctx: Emitter, key: str, failure: str | None, *, dynamic: bool = False
) -> str:
    """States that turn a child's failure into ``Relayflow.SubWorkflowFailed`` and take the
    step's failure route (or fail the run). With a ``dynamic`` (templated) target, a start
    refused because no such state machine exists becomes ``Relayflow.WorkflowNotFound``.
    Any other error (a timeout, a refused start) passes unchanged."""
    check, parse, merge, pick, raise_ = (
        f"{key}.child_failed",
        f"{key}.child_parse",
        f"{key}.child_merge",
        f"{key}.child_pick",
        f"{key}.child_raise",
    )
    onward = failure or ctx.reraise_state(key)
    choices: list[dict[str, Any]] = [
        {
            "And": [
                {"Variable": "$.error.Error", "StringEquals": "States.TaskFailed"},
                {"Variable": "$.error.Cause", "StringMatches": "{*}"},
            ],
            "Next": parse,
        }
    ]
    if dynamic:
        not_found = f"{key}.not_found"
        choices.append(
            {
                "Or": [
                    {"Variable": "$.error.Error", "StringEquals": name}
                    for name in TARGET_MISSING_ERRORS
                ],
                "Next": not_found,
            }
        )
        ctx.machine.add(
            not_found,
            Pass(
                parameters={
                    "Error": WorkflowNotFound.error_name,
                    # No quotes in the text: they would need escaping inside States.Format.
                    "Cause.$": (
                        f"States.Format('sub_workflow step {key} found no workflow {{}} of "
                        f"this tenant', $.steps.{key}.workflow_id)"
                    ),
                },
                result_path="$.error",
                next=onward,
            ),
        )
    ctx.machine.add(check, Choice(choices=choices, default=onward))
    # Error and Cause are absent from a DescribeExecution that has none: default to null.
    ctx.machine.add(
        parse,
        Pass(
            parameters={
                "defaults": {"Error": None, "Cause": None},
                "child.$": "States.StringToJson($.error.Cause)",
            },
            result_path="$.error",
            next=merge,
        ),
    )
    ctx.machine.add(
        merge,
        Pass.intrinsic(
            "child", "States.JsonMerge($.error.defaults, $.error.child, false)", "$.error", pick
        ),
    )
    # The step's record names the child that failed (not the seed its id was drawn from).
    ctx.machine.add(
        pick,
        Pass(
            parameters={
                "run_id.$": "$.error.child.Name",
                "status": "failed",
                "error": {
                    "child_run_id.$": "$.error.child.Name",
                    "status.$": "$.error.child.Status",
                    "error.$": "$.error.child.Error",
                    "cause.$": "$.error.child.Cause",
                },
            },
            result_path=f"$.steps.{key}",
            next=raise_,
        ),
    )
    ctx.machine.add(
        raise_,
        Pass(
            parameters={
                "Error": SubWorkflowFailed.error_name,
                "Cause.$": f"States.JsonToString($.steps.{key}.error)",
            },
            result_path="$.error",
            next=onward,
        ),
    )
    return check
