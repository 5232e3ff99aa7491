"""Compat fix ``definition_check``: CreateStateMachine and UpdateStateMachine on the local
runtime refuse what Step Functions refuses, with ``InvalidDefinition``, so a test can never
pass locally on a definition AWS would reject."""

from __future__ import annotations

import json

import pytest
from asl_cases import BROKEN, valid_machine
from botocore.exceptions import ClientError

from relayflow.local import LocalRuntime, compat
from relayflow.local.runtime import LOCAL_ROLE_ARN

pytestmark = pytest.mark.integration

# Cases a definition string can carry (a Python set has no JSON form).
SENDABLE = [case for case in BROKEN if case.rule != "json-type"]


def _create(runtime: LocalRuntime, name: str, asl: dict) -> str:
    response = runtime.sfn_client.create_state_machine(
        name=name, definition=json.dumps(asl), roleArn=LOCAL_ROLE_ARN
    )
    return str(response["stateMachineArn"])


def _refusal(call) -> ClientError:
    with pytest.raises(ClientError) as raised:
        call()
    return raised.value


@pytest.mark.parametrize("case", SENDABLE, ids=[case.id for case in SENDABLE])
def test_create_state_machine_refuses_what_the_check_refuses(runtime, case):
    # When a definition that breaks one rule is created
    error = _refusal(lambda: _create(runtime, f"refused-{case.id}", case.machine()))
    # Then it is refused as AWS refuses it, naming the rule
    assert error.response["Error"]["Code"] == "InvalidDefinition"
    message = error.response["Error"]["Message"]
    assert message.startswith("Invalid State Machine Definition: '")
    assert f"[{case.rule}]" in message
    # And no state machine was created
    names = {m["name"] for m in runtime.sfn_client.list_state_machines()["stateMachines"]}
    assert f"refused-{case.id}" not in names


def test_update_state_machine_refuses_and_keeps_the_definition(runtime):
    # Given a valid state machine
    arn = _create(runtime, "kept-definition", valid_machine())
    broken = next(case for case in BROKEN if case.id == "wait-seconds-too-big").machine()
    # When it is updated with a definition AWS would refuse
    error = _refusal(
        lambda: runtime.sfn_client.update_state_machine(
            stateMachineArn=arn, definition=json.dumps(broken)
        )
    )
    # Then the update is refused and the old definition stays
    assert error.response["Error"]["Code"] == "InvalidDefinition"
    assert "[numeric-range]" in error.response["Error"]["Message"]
    described = runtime.sfn_client.describe_state_machine(stateMachineArn=arn)
    assert json.loads(described["definition"]) == valid_machine()


def test_a_valid_definition_is_created_and_runs(runtime):
    asl = {
        "StartAt": "a",
        "States": {"a": {"Type": "Pass", "Result": {"ok": True}, "End": True}},
    }
    record = runtime.run("valid-definition", asl, {})
    assert record.status == "SUCCEEDED" and record.output == {"ok": True}


def test_text_that_is_not_json_is_an_invalid_definition(runtime):
    error = _refusal(
        lambda: runtime.sfn_client.create_state_machine(
            name="not-json", definition="{not json", roleArn=LOCAL_ROLE_ARN
        )
    )
    assert error.response["Error"]["Code"] == "InvalidDefinition"
    assert "INVALID_JSON_DESCRIPTION" in error.response["Error"]["Message"]


def test_nan_in_the_definition_text_is_an_invalid_definition(runtime):
    text = '{"StartAt":"a","States":{"a":{"Type":"Pass","Result":NaN,"End":true}}}'
    error = _refusal(
        lambda: runtime.sfn_client.create_state_machine(
            name="nan", definition=text, roleArn=LOCAL_ROLE_ARN
        )
    )
    assert error.response["Error"]["Code"] == "InvalidDefinition"
    assert "[non-finite]" in error.response["Error"]["Message"]


# Definitions AWS refuses that plain moto 5.2.5 creates (and then runs, or fails at run time).
MOTO_ACCEPTS = [
    "unreachable",
    "next-unknown",
    "no-terminal-state",
    "dollar-key-with-text",
    "eleven-intrinsics-in-one-field",
    "wait-seconds-too-big",
    "max-delay-too-big",
    "state-name-81-characters",
    "state-name-used-in-a-branch-and-at-the-top",
    "states-all-catcher-not-last",
    "over-one-mebibyte",
]


def test_without_the_fix_moto_creates_definitions_aws_refuses(runtime):
    # Given the runtime with the definition_check fix left out
    cases = [case for case in BROKEN if case.id in MOTO_ACCEPTS]
    assert len(cases) == len(MOTO_ACCEPTS)
    compat.apply(skip=["definition_check"])
    try:
        # When each broken definition is created / Then moto accepts every one
        arns = [_create(runtime, f"skip-{case.id}", case.machine()) for case in cases]
    finally:
        compat.apply()
    assert len(arns) == len(cases)


def test_without_the_fix_moto_parser_errors_have_no_error_code(runtime):
    compat.apply(skip=["definition_check"])
    try:
        error = _refusal(
            lambda: runtime.sfn_client.create_state_machine(
                name="skip-not-json", definition="{not json", roleArn=LOCAL_ROLE_ARN
            )
        )
    finally:
        compat.apply()
    assert error.response["Error"]["Code"] == ""
