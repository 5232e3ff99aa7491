"""The state machines' role and Express machines: exactly the UpdateItem on run items that the
compiled recording Tasks make (relayflow.dal.access.STATE_MACHINE_ACCESS)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sam_template import (
    ACCOUNT,
    REGION,
    ROOT,
    Resolver,
    allows,
    allows_item,
    function_env,
    role_statements,
)
from test_iam_agreement import TABLE_ARN, TEMPLATE, WORKFLOWS, _options

from relayflow.compiler import compile_workflow
from relayflow.dal.access import RUNS, STATE_MACHINE_ACCESS
from relayflow.validation import load_workflow

TABLE_NAME = TABLE_ARN.rsplit("/", 1)[1]


def _table_statements(statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in statements if any(str(a).startswith("dynamodb:") for a in s["Action"])]


def test_the_state_machine_role_holds_exactly_the_recording_grant():
    granted = role_statements(TEMPLATE, Resolver(TEMPLATE, Stage="dev"), "StateMachineRole")
    expected = [
        {
            "Sid": grant.sid,
            "Effect": "Allow",
            "Action": list(grant.actions),
            "Resource": TABLE_ARN,
            "Condition": {
                "ForAllValues:StringLike": {"dynamodb:LeadingKeys": list(grant.leading_keys)}
            },
        }
        for grant in STATE_MACHINE_ACCESS
    ]
    assert _table_statements(granted) == expected


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_role_allows_every_record_an_express_machine_writes(path):
    # Given a workflow compiled for the dev stack, Express allowed, with the stack's table
    resolver = Resolver(TEMPLATE, Stage="dev")
    options = replace(_options(resolver, "dev"), express=True, table_name=TABLE_NAME)
    compiled = compile_workflow(load_workflow(path), options)
    granted = role_statements(TEMPLATE, resolver, "StateMachineRole")
    # Then every DynamoDB action it needs is granted on run items, and it needs only those
    table = _table_statements(compiled.iam_statements)
    express = compiled.engine is not None and compiled.engine.engine == "express"
    assert bool(table) == express
    for statement in table:
        assert statement["Resource"] == [TABLE_ARN]
        for action in statement["Action"]:
            assert allows_item(granted, action, TABLE_ARN, RUNS)
    assert (ROOT / "template.yaml").exists() and (REGION, ACCOUNT)


def _function_statements(resolver: Resolver, logical_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for policy in TEMPLATE["Resources"][logical_id]["Properties"].get("Policies") or []:
        policy = resolver.resolve(policy)
        if isinstance(policy, dict) and "Statement" in policy:
            found.extend(policy["Statement"])
    return found


#: The functions that read an Express run's records (GET /runs/{id}, the sweep).
LOG_READERS = ("ApiFunction", "MaintenanceFunction")


@pytest.mark.parametrize("function", LOG_READERS)
def test_the_functions_that_fold_express_logs_may_filter_the_machines_log_groups_only(function):
    resolver = Resolver(TEMPLATE, Stage="dev")
    granted = _function_statements(resolver, function)
    # Then they may filter the groups state machines log to (Express: StateMachineLogGroup,
    # or StepEventsLogGroup with events.steps)
    for group in ("StateMachineLogGroup", "StepEventsLogGroup"):
        assert allows(granted, "logs:FilterLogEvents", resolver.get_att(group, "Arn")), group
    # And no other log group (functions' logs hold payloads and stack traces)
    other = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda/relayflow-dev-api:*"
    assert not allows(granted, "logs:FilterLogEvents", other)
    assert not allows(granted, "logs:GetLogEvents", resolver.get_att("StateMachineLogGroup", "Arn"))
    # And they are told where those groups are
    variables = function_env(TEMPLATE, function)
    assert variables["RELAYFLOW_STATE_MACHINE_LOG_GROUP_ARN"] == {
        "Fn::GetAtt": ["StateMachineLogGroup", "Arn"]
    }
    assert variables["RELAYFLOW_STEP_EVENTS_LOG_GROUP_ARN"] == {
        "Fn::GetAtt": ["StepEventsLogGroup", "Arn"]
    }


def test_no_other_function_reads_the_state_machines_logs():
    resolver = Resolver(TEMPLATE, Stage="dev")
    group = resolver.get_att("StateMachineLogGroup", "Arn")
    readers = [
        logical_id
        for logical_id, resource in TEMPLATE["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
        and allows(_function_statements(resolver, logical_id), "logs:FilterLogEvents", group)
    ]
    assert sorted(readers) == sorted(LOG_READERS)
