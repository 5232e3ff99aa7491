"""The state-machine role grants everything the compiler says a workflow needs.

Every example workflow (and every golden definition, one per step type) is compiled with the
function ARNs the stack gives its functions; each action on each resource of
``CompiledWorkflow.iam_statements`` must be allowed by StateMachineRole's policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sam_template import (
    ACCOUNT,
    REGION,
    ROOT,
    Resolver,
    allows,
    function_resources,
    load_template,
    role_statements,
)

from relayflow import naming
from relayflow.compiler import CompileOptions, compile_workflow
from relayflow.definition import load_workflow

TEMPLATE = load_template()
WORKFLOWS = sorted((ROOT / "workflows" / "examples").glob("*.yaml")) + sorted(
    (ROOT / "tests" / "golden").glob("*.yaml")
)


def _options(resolver: Resolver) -> CompileOptions:
    arns = {
        kind: resolver.get_att(logical_id, "Arn")
        for kind, logical_id in function_resources(TEMPLATE).items()
    }
    return CompileOptions(function_arns=arns, region=REGION, account=ACCOUNT)


@pytest.mark.parametrize("stage", ["dev", "prod"])
@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_role_grants_every_action_the_compiled_workflow_needs(path: Path, stage: str):
    # Given a workflow compiled against the stack's function ARNs for this stage
    resolver = Resolver(TEMPLATE, Stage=stage)
    compiled = compile_workflow(load_workflow(path), _options(resolver))
    granted = role_statements(TEMPLATE, resolver, "StateMachineRole")
    # Then each action the compiler reports is allowed on each resource it names
    missing = [
        (action, resource)
        for statement in compiled.iam_statements
        for action in statement["Action"]
        for resource in statement["Resource"]
        if not allows(granted, action, resource)
    ]
    assert not missing, f"StateMachineRole does not grant {missing}"


def test_the_examples_exercise_lambda_steps():
    kinds = set()
    for path in WORKFLOWS:
        kinds |= set(compile_workflow(load_workflow(path)).functions)
    step_functions = set(function_resources(TEMPLATE)) & set(naming.STEP_FUNCTIONS)
    assert kinds == step_functions, "a step function no definition here calls"


def test_the_role_invokes_only_relayflow_step_functions_of_its_own_stage():
    # Given the dev stack's state-machine role
    resolver = Resolver(TEMPLATE, Stage="dev")
    granted = role_statements(TEMPLATE, resolver, "StateMachineRole")
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:"
    # Then it may invoke the dev functions, their versions and aliases, and nothing else
    assert allows(granted, "lambda:InvokeFunction", f"{arn}relayflow-dev-tool")
    assert allows(granted, "lambda:InvokeFunction", f"{arn}relayflow-dev-tool:live")
    assert not allows(granted, "lambda:InvokeFunction", f"{arn}relayflow-prod-tool")
    assert not allows(granted, "lambda:InvokeFunction", f"{arn}someone-else")
    # And it may run child workflows (startExecution.sync:2) only among Relayflow's own
    machine = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:"
    execution = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:"
    assert allows(granted, "states:StartExecution", f"{machine}relayflow-orders")
    assert allows(granted, "states:DescribeExecution", f"{execution}relayflow-orders:run-1")
    assert allows(granted, "states:StopExecution", f"{execution}relayflow-orders:run-1")
    assert not allows(granted, "states:StartExecution", f"{machine}payroll")
    rule = (
        f"arn:aws:events:{REGION}:{ACCOUNT}:rule/"
        "StepFunctionsGetEventsForStepFunctionsExecutionRule"
    )
    for action in ("events:PutTargets", "events:PutRule", "events:DescribeRule"):
        assert allows(granted, action, rule), action
    assert allows(granted, "xray:PutTraceSegments", "*")
    assert allows(granted, "logs:CreateLogDelivery", "*")
