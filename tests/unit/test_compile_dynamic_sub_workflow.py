"""sub_workflow with a templated ``workflow_id``: the target is rendered natively into an ARN
under the tenant's own naming prefix, a missing target becomes Relayflow.WorkflowNotFound,
and validation admits only templates ASL can render."""

from __future__ import annotations

import functools
from typing import Any

from relayflow.compiler import CompileOptions, compile_workflow
from relayflow.compiler.check import assert_valid_machine
from relayflow.executions.stepfunctions import state_machine_name
from relayflow.validation import validate_data

ACME = CompileOptions(
    region="eu-west-1",
    account="111122223333",
    state_machine_name=functools.partial(state_machine_name, "prod", "acme"),
)
PREFIX = "arn:aws:states:eu-west-1:111122223333:stateMachine:relayflow-prod-acme_"


def definition(workflow_id: str, **extra: Any) -> dict[str, Any]:
    step = {"type": "sub_workflow", "workflow_id": workflow_id, "on_failure": "oops", **extra}
    return {
        "id": "dispatch",
        "start": "call",
        "steps": {"call": step, "oops": {"type": "noop"}},
    }


def compiled(workflow_id: str) -> Any:
    workflow, problems = validate_data(definition(workflow_id))
    assert workflow is not None, problems
    return compile_workflow(workflow, ACME)


def test_the_target_is_formatted_under_the_tenants_prefix():
    result = compiled("{{ trigger.kind }}-handler")
    assert_valid_machine(result.asl)
    states = result.asl["States"]
    # The id is rendered once, before the start, next to the child's run id
    assert states["call.prepare"]["Parameters"]["workflow_id.$"] == (
        "States.Format('{}-handler', $.trigger.kind)"
    )
    task = states["call"]["Parameters"]
    assert task["StateMachineArn.$"] == (
        f"States.Format('{PREFIX}{{}}:live', $.steps.call.workflow_id)"
    )
    assert task["Input"]["run"]["workflow_id.$"] == "$.steps.call.workflow_id"
    # And IAM is asked for the tenant's machines only
    starts = next(s for s in result.iam_statements if s["Action"] == ["states:StartExecution"])
    assert starts["Resource"] == [f"{PREFIX}*", f"{PREFIX}*:*"]


def test_a_missing_target_becomes_workflow_not_found_on_the_failure_route():
    states = compiled("{{ trigger.kind }}").asl["States"]
    check = states["call.child_failed"]
    missing = next(c for c in check["Choices"] if c.get("Next") == "call.not_found")
    assert {rule["StringEquals"] for rule in missing["Or"]} >= {
        "StepFunctions.StateMachineDoesNotExistException"
    }
    not_found = states["call.not_found"]
    assert not_found["Parameters"]["Error"] == "Relayflow.WorkflowNotFound"
    assert not_found["Next"] == "oops"


def test_a_literal_target_compiles_as_before():
    states = compiled("child").asl["States"]
    assert states["call"]["Parameters"]["StateMachineArn"] == f"{PREFIX}child:live"
    assert "call.not_found" not in states


def problems_of(data: dict[str, Any]) -> set[tuple[str, str]]:
    _, problems = validate_data(data)
    return {(p.path, p.rule) for p in problems}


def test_validation_refuses_targets_asl_cannot_render_or_pin():
    assert ("steps.call.workflow_id", "dynamic-workflow-id") in problems_of(
        definition("{{ trigger.kind + 'x' }}")
    )
    assert ("steps.call.version", "dynamic-workflow-id") in problems_of(
        definition("{{ trigger.kind }}", version=2)
    )
    assert ("steps.call.workflow_id", "unknown-variable") in problems_of(
        definition("{{ nowhere.kind }}")
    )
    assert ("steps.call.workflow_id", "pattern") in problems_of(definition("Not An Id"))
