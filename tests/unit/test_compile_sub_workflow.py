"""sub_workflow: what the compiler emits (depth guard, child input, error renaming, IAM) and
what validation refuses."""

from __future__ import annotations

import functools
from typing import Any

from relayflow.compiler import CompileOptions, compile_workflow
from relayflow.compiler.asl import MAX_SUB_WORKFLOW_DEPTH, START_EXECUTION_SYNC
from relayflow.definition.models import Workflow
from relayflow.executions.stepfunctions import state_machine_name
from relayflow.validation import validate_data

CONTROL_PLANE = CompileOptions(
    region="eu-west-1",
    account="111122223333",
    state_machine_name=functools.partial(state_machine_name, "prod", "acme"),
)


def workflow(step: dict[str, Any], **steps: dict[str, Any]) -> Workflow:
    data = {"id": "parent", "start": "call", "steps": {"call": step, **steps}}
    parsed, problems = validate_data(data)
    assert parsed is not None, problems
    return parsed


def states(step: dict[str, Any], options: CompileOptions | None = None, **steps: Any) -> Any:
    return compile_workflow(workflow(step, **steps), options).asl["States"]


def test_routes_into_the_step_pass_the_depth_guard_first():
    # Given a sub_workflow without an error route
    compiled = compile_workflow(workflow({"type": "sub_workflow", "workflow_id": "child"}))
    asl = compiled.asl

    # Then the run starts at the guard, which refuses a parent at the limit
    assert asl["StartAt"] == "call.depth"
    guard = asl["States"]["call.depth"]
    assert guard["Choices"] == [
        {
            "Variable": "$.run.depth",
            "NumericGreaterThanEquals": MAX_SUB_WORKFLOW_DEPTH,
            "Next": "call.too_deep",
        }
    ]
    assert guard["Default"] == "call.prepare"
    # And too deep fails the run with the named error (no route: a Fail state)
    assert asl["States"]["call.too_deep"]["Type"] == "Fail"
    assert asl["States"]["call.too_deep"]["Error"] == "Relayflow.SubWorkflowDepth"
    assert compiled.step_runners == {"call": "native"}


def test_the_child_starts_on_the_tenants_machine_live_alias_or_pinned_version():
    # Given the control plane's naming (stage prod, tenant acme)
    live = states({"type": "sub_workflow", "workflow_id": "billing"}, CONTROL_PLANE)
    pinned = states({"type": "sub_workflow", "workflow_id": "billing", "version": 4}, CONTROL_PLANE)

    # Then the Task starts the live alias, or the pinned version, of relayflow-prod-acme_billing
    machine = "arn:aws:states:eu-west-1:111122223333:stateMachine:relayflow-prod-acme_billing"
    assert live["call"]["Resource"] == START_EXECUTION_SYNC
    assert live["call"]["Parameters"]["StateMachineArn"] == f"{machine}:live"
    assert pinned["call"]["Parameters"]["StateMachineArn"] == f"{machine}:4"
    assert pinned["call"]["Parameters"]["Input"]["run"]["version"] == 4


def test_the_child_input_is_a_state_document_one_level_deeper():
    # Given an input template mixing paths, text and literals
    asl = states(
        {
            "type": "sub_workflow",
            "workflow_id": "child",
            "input": {"id": "{{ trigger.id }}", "label": "order {{ trigger.id }}", "n": 3},
        }
    )
    params = asl["call"]["Parameters"]

    # Then the execution name and run id are one per attempt, drawn by the prepare state
    # (a seed, not a run id or a status: a step that fails before its child ran claims neither)
    assert asl["call.prepare"]["Parameters"] == {"seed.$": "States.UUID()"}
    assert asl["call.prepare"]["Next"] == "call"
    name = "States.Hash(States.Format('{}-{}', $.steps.call.seed, $$.State.RetryCount), 'MD5')"
    assert params["Name.$"] == name
    document = params["Input"]
    assert document["run"]["id.$"] == name
    assert document["run"]["depth.$"] == "States.MathAdd($.run.depth, 1)"
    assert document["run"]["tenant.$"] == "$.run.tenant"
    assert document["run"]["parent"] == {
        "run_id.$": "$.run.id",
        "workflow_id.$": "$.run.workflow_id",
        "step": "call",
    }
    assert document["trigger"] == {
        "id.$": "$.trigger.id",
        "label.$": "States.Format('order {}', $.trigger.id)",
        "n": 3,
    }
    assert document["steps"] == {}
    assert document["AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID.$"] == "$$.Execution.Id"
    # And the step output is the child's run id and final steps
    assert asl["call"]["ResultSelector"] == {
        "output": {"run_id.$": "$.Name", "steps.$": "$.Output.steps"},
        "status": "succeeded",
    }


def test_a_child_failure_is_renamed_then_takes_the_failure_route():
    # Given a sub_workflow with an on_failure route
    asl = states(
        {"type": "sub_workflow", "workflow_id": "child", "on_failure": "handle"},
        handle={"type": "noop"},
    )

    # Then every failure goes through the renaming states, which end at the route
    assert asl["call"]["Catch"] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "call.child_failed"}
    ]
    check = asl["call.child_failed"]
    assert check["Choices"][0]["Next"] == "call.child_parse"
    assert check["Default"] == "handle"  # not a child failure: passed on unchanged
    # And the step's record names the failed child, then the renamed error carries the same
    pick = asl["call.child_pick"]
    assert pick["ResultPath"] == "$.steps.call"
    assert pick["Parameters"]["run_id.$"] == "$.error.child.Name"
    assert pick["Parameters"]["status"] == "failed"
    raise_ = asl["call.child_raise"]
    assert raise_["Parameters"] == {
        "Error": "Relayflow.SubWorkflowFailed",
        "Cause.$": "States.JsonToString($.steps.call.error)",
    }
    assert raise_["Next"] == "handle"
    assert asl["call.too_deep"]["Next"] == "handle"


def test_without_a_route_the_renamed_error_fails_the_run():
    asl = states({"type": "sub_workflow", "workflow_id": "child"})
    assert asl["call.child_raise"]["Next"] == "call.failed"
    assert asl["call.failed"] == {
        "Type": "Fail",
        "ErrorPath": "$.error.Error",
        "CausePath": "$.error.Cause",
    }


def test_retry_on_the_renamed_error_matches_the_tasks_own_error():
    # Given a retry policy naming Relayflow.SubWorkflowFailed
    asl = states(
        {
            "type": "sub_workflow",
            "workflow_id": "child",
            "retry": {
                "max_attempts": 3,
                "backoff": "fixed",
                "base_seconds": 1,
                "retry_on": ["Relayflow.SubWorkflowFailed", "States.Timeout"],
            },
        }
    )

    # Then the Task retries States.TaskFailed (what a child failure is before renaming), and
    # no Lambda service retrier is added
    assert asl["call"]["Retry"] == [
        {
            "ErrorEquals": ["States.TaskFailed", "States.Timeout"],
            "IntervalSeconds": 1,
            "MaxAttempts": 2,
            "BackoffRate": 1.0,
        }
    ]


def test_a_linear_retry_draws_a_new_child_run_id():
    asl = states(
        {
            "type": "sub_workflow",
            "workflow_id": "child",
            "retry": {"max_attempts": 3, "backoff": "linear", "base_seconds": 2},
        }
    )
    assert asl["call.retry_wait"]["Next"] == "call.prepare"
    all_catchers = [c for c in asl["call"]["Catch"] if c["ErrorEquals"] == ["States.ALL"]]
    assert len(all_catchers) == 1  # States.ALL appears once, last


def test_the_role_may_start_watch_and_stop_only_the_named_children():
    # Given a parent starting two children under the control plane's naming
    compiled = compile_workflow(
        workflow(
            {"type": "sub_workflow", "workflow_id": "billing", "on_success": "more"},
            more={"type": "sub_workflow", "workflow_id": "shipping", "version": 2},
        ),
        CONTROL_PLANE,
    )
    prefix = "arn:aws:states:eu-west-1:111122223333"
    by_action = {tuple(s["Action"]): s["Resource"] for s in compiled.iam_statements}

    # Then StartExecution covers each machine and its versions/alias, and no other machine
    assert by_action[("states:StartExecution",)] == [
        f"{prefix}:stateMachine:relayflow-prod-acme_billing",
        f"{prefix}:stateMachine:relayflow-prod-acme_billing:*",
        f"{prefix}:stateMachine:relayflow-prod-acme_shipping",
        f"{prefix}:stateMachine:relayflow-prod-acme_shipping:*",
    ]
    assert by_action[("states:DescribeExecution", "states:StopExecution")] == [
        f"{prefix}:execution:relayflow-prod-acme_billing:*",
        f"{prefix}:execution:relayflow-prod-acme_shipping:*",
    ]
    assert by_action[("events:PutTargets", "events:PutRule", "events:DescribeRule")] == [
        "arn:aws:events:eu-west-1:111122223333:rule/"
        "StepFunctionsGetEventsForStepFunctionsExecutionRule"
    ]
    assert compiled.functions == []


def test_validation_refuses_inputs_that_need_a_lambda_and_flow_control():
    # Given a sub_workflow whose input computes, and one with a concurrency limit
    data = {
        "id": "wf",
        "start": "a",
        "steps": {
            "a": {
                "type": "sub_workflow",
                "workflow_id": "child",
                "input": {"total": "{{ trigger.a + trigger.b }}"},
                "on_success": "b",
            },
            "b": {"type": "sub_workflow", "workflow_id": "child", "concurrency": {"limit": 2}},
        },
    }

    # When validated
    parsed, problems = validate_data(data)

    # Then both are refused with their paths and rules
    assert parsed is None
    assert {(p.path, p.rule) for p in problems} == {
        ("steps.a.input", "sub-workflow-input"),
        ("steps.b.concurrency", "not-applicable"),
    }


def test_a_whole_value_input_and_no_input_are_native():
    whole = states({"type": "sub_workflow", "workflow_id": "c", "input": "{{ trigger.order }}"})
    none = states({"type": "sub_workflow", "workflow_id": "c"})
    assert whole["call"]["Parameters"]["Input"]["trigger.$"] == "$.trigger.order"
    assert none["call"]["Parameters"]["Input"]["trigger"] == {}
