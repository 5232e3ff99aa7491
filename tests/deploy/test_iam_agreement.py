"""The roles grant what the code does, and nothing else.

* The state-machine role grants everything the compiler says a workflow needs: every example
  workflow (and every golden definition, one per step type) is compiled with the function ARNs
  and state-machine names the stack gives its stage; each action on each resource of
  ``CompiledWorkflow.iam_statements`` must be allowed by StateMachineRole's policy.
* Each of the 17 functions holds, in the Relayflow table, exactly the grants of
  ``relayflow.dal.access.TABLE_ACCESS`` (actions, ``dynamodb:LeadingKeys``, table or GSI1),
  and every DynamoDB call it makes is allowed by them: the calls of its ``events/`` samples
  (recorded live here) and those recorded from the integration suite
  (``dynamodb_calls.json``, see ``dynamodb_calls.py``).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from dynamodb_calls import Recorder, load_snapshot
from relayflow_testing import lambda_context, load_handler
from sam_template import (
    ACCOUNT,
    EXECUTIONS,
    MACHINES,
    REGION,
    ROOT,
    Resolver,
    allows,
    allows_item,
    function_resources,
    role_statements,
)
from stack import DEV, FUNCTIONS, TEMPLATE
from test_handler_samples import lambda_sandbox  # noqa: F401 (a fixture)

from relayflow import naming
from relayflow.compiler import CompileOptions, compile_workflow
from relayflow.dal.access import TABLE_ACCESS
from relayflow.executions.stepfunctions import state_machine_name
from relayflow.validation import load_workflow

WORKFLOWS = sorted((ROOT / "workflows" / "examples").glob("*.yaml")) + sorted(
    (ROOT / "tests" / "golden").glob("*.yaml")
)
TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/relayflow-dev-relayflowtable"
INDEX_ARN = f"{TABLE_ARN}/index/GSI1"


def _options(resolver: Resolver, stage: str) -> CompileOptions:
    arns = {
        kind: resolver.get_att(logical_id, "Arn")
        for kind, logical_id in function_resources(TEMPLATE).items()
    }
    return CompileOptions(
        function_arns=arns,
        region=REGION,
        account=ACCOUNT,
        state_machine_name=lambda workflow_id: state_machine_name(stage, "acme", workflow_id),
        payload_bucket=resolver.ref("PayloadBucket"),
    )


# ----------------------------------------------------------------------------- state machines


@pytest.mark.parametrize("stage", ["dev", "prod"])
@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_role_grants_every_action_the_compiled_workflow_needs(path: Path, stage: str):
    # Given a workflow compiled against the stack's function ARNs and names for this stage
    resolver = Resolver(TEMPLATE, Stage=stage)
    compiled = compile_workflow(load_workflow(path), _options(resolver, stage))
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
    granted = role_statements(TEMPLATE, DEV, "StateMachineRole")
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:"
    # Then it may invoke the dev functions, their versions and aliases, and nothing else
    assert allows(granted, "lambda:InvokeFunction", f"{arn}relayflow-dev-tool")
    assert allows(granted, "lambda:InvokeFunction", f"{arn}relayflow-dev-tool:live")
    assert not allows(granted, "lambda:InvokeFunction", f"{arn}relayflow-prod-tool")
    assert not allows(granted, "lambda:InvokeFunction", f"{arn}someone-else")
    # And it may run child workflows (startExecution.sync:2) only among its stage's own
    assert allows(granted, "states:StartExecution", f"{MACHINES}relayflow-dev-acme_orders")
    assert allows(granted, "states:DescribeExecution", f"{EXECUTIONS}relayflow-dev-acme_o:run-1")
    assert allows(granted, "states:StopExecution", f"{EXECUTIONS}relayflow-dev-acme_o:run-1")
    assert not allows(granted, "states:StartExecution", f"{MACHINES}relayflow-prod-acme_orders")
    assert not allows(granted, "states:StopExecution", f"{EXECUTIONS}relayflow-prod-acme_o:run-1")
    assert not allows(granted, "states:StartExecution", f"{MACHINES}payroll")
    rule = (
        f"arn:aws:events:{REGION}:{ACCOUNT}:rule/"
        "StepFunctionsGetEventsForStepFunctionsExecutionRule"
    )
    for action in ("events:PutTargets", "events:PutRule", "events:DescribeRule"):
        assert allows(granted, action, rule), action
    assert allows(granted, "xray:PutTraceSegments", "*")
    assert allows(granted, "logs:CreateLogDelivery", "*")


# ----------------------------------------------------------------------------- the table


def function_statements(kind: str, resolver: Resolver = DEV) -> list[dict[str, Any]]:
    """Every resolved statement of the function's role (inline ``Statement`` policies of a SAM
    function, or its own ``Role``'s policies)."""
    props = TEMPLATE["Resources"][FUNCTIONS[kind]]["Properties"]
    if "Role" in props:
        return role_statements(TEMPLATE, resolver, props["Role"]["Fn::GetAtt"][0])
    found = []
    for policy in resolver.resolve(props.get("Policies") or []):
        if isinstance(policy, dict) and "Statement" in policy:
            found.extend(policy["Statement"])
    return found


def table_statements(kind: str) -> list[dict[str, Any]]:
    return [
        s
        for s in function_statements(kind)
        if any(str(a).startswith("dynamodb:") for a in _list(s["Action"]))
        and any(str(r).startswith(TABLE_ARN) for r in _list(s["Resource"]))
    ]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_the_map_covers_all_17_functions():
    assert set(TABLE_ACCESS) == set(FUNCTIONS)
    assert len(FUNCTIONS) == 17


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_the_role_holds_exactly_the_functions_table_grants(kind: str):
    # Given what the DAL map says the function does in the table
    expected = [
        {
            "Sid": grant.sid,
            "Effect": "Allow",
            "Action": list(grant.actions),
            "Resource": INDEX_ARN if grant.index else TABLE_ARN,
            "Condition": {
                "ForAllValues:StringLike": {"dynamodb:LeadingKeys": list(grant.leading_keys)}
            },
        }
        for grant in TABLE_ACCESS[kind]
    ]
    # Then its role's statements on the table are exactly those, in the same order
    assert table_statements(kind) == expected
    # And no SAM policy template grants table-wide access besides (CRUD, read, write)
    props = TEMPLATE["Resources"][FUNCTIONS[kind]]["Properties"]
    templates = {name for p in props.get("Policies") or [] if isinstance(p, dict) for name in p}
    assert not {n for n in templates if n.startswith("DynamoDB")}, templates


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_no_role_may_scan_or_batch_the_table(kind: str):
    statements = function_statements(kind)
    for action in ("dynamodb:Scan", "dynamodb:BatchWriteItem", "dynamodb:BatchGetItem"):
        for resource in (TABLE_ARN, INDEX_ARN):
            assert not allows_item(statements, action, resource, ""), (action, resource)
            assert not allows_item(statements, action, resource, "TENANT#a#RUN#r"), action


def test_the_public_webhook_function_reads_webhooks_and_writes_only_what_a_run_start_needs():
    statements = function_statements("webhook")
    put, update, get = "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:GetItem"
    # It reads slug registrations but cannot change one
    assert allows_item(statements, get, TABLE_ARN, "HOOK#orders")
    assert not allows_item(statements, update, TABLE_ARN, "HOOK#orders")
    assert not allows_item(statements, put, TABLE_ARN, "HOOK#orders")
    # It counts its rate windows and keeps delivery answers
    assert allows_item(statements, update, TABLE_ARN, "HOOK#orders#RATE")
    assert allows_item(statements, update, TABLE_ARN, "HOOK#orders#SIGFAIL#ab12")
    assert allows_item(statements, put, TABLE_ARN, "HOOK#orders#DLV#abc")
    # It creates runs, and reads (never writes) workflows and breakers
    assert allows_item(statements, put, TABLE_ARN, "TENANT#acme#RUN#r1")
    assert allows_item(statements, get, TABLE_ARN, "TENANT#acme#WF#orders")
    assert not allows_item(statements, put, TABLE_ARN, "TENANT#acme#WF#orders")
    assert not allows_item(statements, update, TABLE_ARN, "TENANT#acme#BREAKER#wf:orders")
    # And nothing else: API keys, approvals, the DLQ
    for key in ("KEY#abc", "TENANT#acme#WAIT#w1", "TENANT#acme#DLQ#r1", "DLQ#STATS"):
        assert not allows_item(statements, get, TABLE_ARN, key), key


def _sample_calls(kind: str, sandbox: pytest.MonkeyPatch) -> set[tuple[str, str, str, str]]:
    from relayflow.adapters.aws import client
    from relayflow.dal import create_table
    from relayflow.settings import get_settings

    sandbox.setenv("AWS_LAMBDA_FUNCTION_NAME", f"relayflow-dev-{kind}")
    create_table(client("dynamodb"))
    client("events").create_event_bus(Name=get_settings().event_bus_name)
    handler = load_handler(kind).handler
    context = lambda_context(kind)
    with Recorder() as recorder:
        for sample in sorted((ROOT / "events" / kind).glob("*.json")):
            # The samples' outcomes are test_handler_samples.py's concern; the calls are ours.
            with contextlib.suppress(Exception):
                handler(json.loads(sample.read_text()), context)
    return recorder.calls


def _refused(calls: set[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str]]:
    refused = []
    for kind, action, index, key in sorted(calls):
        resource = f"{TABLE_ARN}/index/{index}" if index else TABLE_ARN
        if not allows_item(function_statements(kind), action, resource, key):
            refused.append((kind, action, index, key))
    return refused


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_every_call_the_samples_make_is_allowed(kind: str, lambda_sandbox):  # noqa: F811
    # When the function answers each of its samples (against moto), recording its calls
    calls = _sample_calls(kind, lambda_sandbox)
    # Then its role allows each one
    assert not _refused(calls)


def test_every_call_recorded_from_the_integration_suite_is_allowed():
    # Given the calls the integration suite's handlers made (dynamodb_calls.json)
    calls = load_snapshot()
    assert {kind for kind, *_ in calls} >= {"api", "webhook", "recorder", "trigger", "tool"}
    # Then each function's role allows each of its calls
    assert not _refused(calls)


# ----------------------------------------------------------------------------- tenant identity


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_no_function_reaches_another_tenants_secret_item_or_object_through_the_tenant_identity(
    kind: str,
):
    from test_template_tenant_identity import tenant_identity

    # Given what the function's role may do, and what it may do acting as tenant acme
    own = function_statements(kind)
    assumes = [s for s in own if "sts:AssumeRole" in _list(s["Action"])]
    assert all(s["Resource"] == DEV.get_att("TenantStepRole", "Arn") for s in assumes), kind
    acting = tenant_identity("acme") if assumes else []
    secret = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:relayflow/dev/globex/stripe-AbCdEf"
    parameter = f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/relayflow/dev/globex/stripe"
    # Then as acme it reads none of globex's secrets, and the identity adds no Relayflow item
    # or object to what the function's own role holds
    assert not allows(acting, "secretsmanager:GetSecretValue", secret)
    assert not allows(acting, "ssm:GetParameter", parameter)
    for action in ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"):
        for key in ("TENANT#globex#RUN#r1", "TENANT#acme#RUN#r1", "HOOK#orders"):
            assert not allows_item(
                [s for s in acting if s["Effect"] == "Allow"], action, TABLE_ARN, key
            )
            assert not allows(acting, action, TABLE_ARN)
    bucket = DEV.get_att("PayloadBucket", "Arn")
    for key in ("payloads/globex/run/out.json", "payloads/batch/x.jsonl", "for_each/x"):
        assert not allows(acting, "s3:GetObject", f"{bucket}/{key}")
        assert not allows(acting, "s3:PutObject", f"{bucket}/{key}")
