"""template.yaml for per-step lifecycle events: the log group opted-in state machines log to,
its subscription (as SAM translates it), the step-events function's least privilege, and the
sample event invoked as ``sam local invoke StepEventsFunction -e events/step_events/… --env-vars
events/env.json`` gives it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from relayflow_testing import load_handler
from sam_template import (
    ROOT,
    allows,
    allows_item,
    function_env,
)
from stack import DEV, FUNCTIONS, RESOURCES, TEMPLATE, props
from test_handler_samples import lambda_sandbox

SAM_PYTHON = ROOT / ".venv" / "tools" / "sam" / "bin" / "python"
TABLE = DEV.get_att("RelayflowTable", "Arn")

__all__ = ["lambda_sandbox"]  # the fixture, shared with the handler-sample tests


def function_statements(logical_id: str) -> list[dict]:
    found: list[dict] = []
    for policy in props(logical_id)["Policies"]:
        policy = DEV.resolve(policy)
        if isinstance(policy, dict) and "Statement" in policy:
            found.extend(policy["Statement"])
    return found


def test_the_control_plane_knows_the_step_events_log_group():
    # The API (the control plane) creates the machines, so it names their destination
    env = function_env(TEMPLATE, "ApiFunction")
    assert env["RELAYFLOW_STEP_EVENTS_LOG_GROUP_ARN"] == {
        "Fn::GetAtt": ["StepEventsLogGroup", "Arn"]
    }
    group = DEV.resolve(props("StepEventsLogGroup")["LogGroupName"])
    # /aws/vendedlogs/ keeps the log-delivery resource policy small; a group of its own, so
    # the errors-only group of every other machine is never fed to the function
    assert group == "/aws/vendedlogs/states/relayflow-dev-steps"
    assert group != DEV.resolve(props("StateMachineLogGroup")["LogGroupName"])
    # And the machines' role may set up log delivery (these actions take no resource)
    role = RESOURCES["StateMachineRole"]["Properties"]["Policies"][0]["PolicyDocument"]
    assert allows(DEV.resolve(role["Statement"]), "logs:CreateLogDelivery", "*")


def test_the_step_events_log_group_feeds_the_function_with_every_record():
    events = props("StepEventsFunction")["Events"]
    (subscription,) = events.values()
    assert subscription["Type"] == "CloudWatchLogs"
    assert subscription["Properties"]["LogGroupName"] == {"Ref": "StepEventsLogGroup"}
    # No filter: the function follows each state's records by previous_event_id
    assert subscription["Properties"]["FilterPattern"] == ""
    # A batch that keeps failing lands in a queue (with an alarm), not in the void
    config = props("StepEventsFunction")["EventInvokeConfig"]
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == {
        "Fn::GetAtt": ["StepEventsDeadLetterQueue", "Arn"]
    }


def test_the_function_holds_only_its_traces_and_the_bus():
    statements = function_statements("StepEventsFunction")
    trace_key = "TENANT#acme#STEPEV#run-1"
    for action in ("dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"):
        assert allows_item(statements, action, TABLE, trace_key), action
    # Not a run item, nor another family, and never a scan
    assert not allows_item(statements, "dynamodb:PutItem", TABLE, "TENANT#acme#RUN#run-1")
    assert not allows_item(statements, "dynamodb:Query", TABLE, "TENANT#acme#STEP#run-1")
    assert not allows_item(statements, "dynamodb:Scan", TABLE, trace_key)
    assert not any(
        "states:" in str(s.get("Action")) or "lambda:" in str(s.get("Action")) for s in statements
    )
    bus_grants = [
        p for p in props("StepEventsFunction")["Policies"] if "EventBridgePutEventsPolicy" in p
    ]
    assert bus_grants == [{"EventBridgePutEventsPolicy": {"EventBusName": {"Ref": "EventBus"}}}]


@pytest.mark.skipif(not SAM_PYTHON.exists(), reason="run `make sam-cli` (make test does)")
def test_sam_translates_the_subscription_into_a_filter_and_an_invoke_permission():
    done = subprocess.run(
        [str(SAM_PYTHON), str(ROOT / "tests" / "deploy" / "sam_translate.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(ROOT / ".venv")},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    translated = json.loads(done.stdout)["Resources"]
    filters = [r for r in translated.values() if r["Type"] == "AWS::Logs::SubscriptionFilter"]
    (only,) = filters
    assert only["Properties"]["LogGroupName"] == {"Ref": "StepEventsLogGroup"}
    assert only["Properties"]["DestinationArn"] == {"Fn::GetAtt": ["StepEventsFunction", "Arn"]}
    permissions = [
        r["Properties"]
        for r in translated.values()
        if r["Type"] == "AWS::Lambda::Permission"
        and r["Properties"]["FunctionName"] == {"Ref": "StepEventsFunction"}
        and r["Properties"]["Principal"] == "logs.amazonaws.com"
    ]
    assert len(permissions) == 1


def test_the_sample_publishes_the_steps_events_on_the_bus(lambda_sandbox):
    # Given the function's environment from events/env.json (stage local), read as a cold
    # start reads it
    from relayflow.settings import Settings, override_settings

    env = json.loads((ROOT / "events" / "env.json").read_text())["StepEventsFunction"]
    for name, value in env.items():
        if name != "RELAYFLOW_AWS_ENDPOINT_URL":
            lambda_sandbox.setenv(name, value)
    with override_settings(**Settings().model_dump()):
        received, result = _invoke_sample_with_a_subscriber()
    # Then the subscription received the steps' events in order, the retried one as attempt 2
    assert result == {"records": 14, "published": 7, "skipped": 0}
    seen = [(e["detail-type"], e["detail"]["step"], e["detail"]["attempt"]) for e in received]
    assert seen == [
        ("relayflow.step.started", "normalise", 1),
        ("relayflow.step.succeeded", "normalise", 1),
        ("relayflow.step.started", "check", 1),
        ("relayflow.step.retrying", "check", 2),
        ("relayflow.step.succeeded", "check", 2),
        ("relayflow.step.started", "review", 1),
        ("relayflow.step.waiting", "review", 1),
    ]
    check = received[4]["detail"]
    assert check["duration_ms"] == 1478 and check["run_id"] == "6f1c2a9e0b7d4c3f8a5e1d2c3b4a5f60"
    assert (check["tenant"], check["workflow_id"]) == ("acme", "order-triage")
    assert received[3]["detail"]["error"] == "Relayflow.Transient"


def _invoke_sample_with_a_subscriber() -> tuple[list[dict], dict]:
    """The stack's table and bus (moto) and tenant acme's subscription (a rule into SQS);
    the sample through the handler; what the subscription received."""
    from relayflow.adapters.aws import client
    from relayflow.dal import create_table
    from relayflow.settings import get_settings

    create_table(client("dynamodb"))
    bus = get_settings().event_bus_name
    client("events").create_event_bus(Name=bus)
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="acme-steps")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    client("events").put_rule(
        Name="acme-steps",
        EventBusName=bus,
        EventPattern=json.dumps({"source": ["relayflow"], "detail": {"tenant": ["acme"]}}),
    )
    client("events").put_targets(
        Rule="acme-steps", EventBusName=bus, Targets=[{"Id": "q", "Arn": queue_arn}]
    )
    sample = json.loads((ROOT / "events" / "step_events" / "task_retried.json").read_text())
    context = SimpleNamespace(
        function_name="relayflow-local-step_events",
        aws_request_id="sam-local-invoke",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:x",
        get_remaining_time_in_millis=lambda: 30_000,
    )
    result = load_handler("step_events").handler(sample, context)
    received: list[dict] = []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in got:
            received.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return received, result


def test_the_sample_file_is_a_real_subscription_payload():
    from relayflow.control.step_events import decode_subscription

    path: Path = ROOT / "events" / "step_events" / "task_retried.json"
    payload = decode_subscription(json.loads(path.read_text()))
    assert payload["messageType"] == "DATA_MESSAGE"
    assert payload["logGroup"] == "/aws/vendedlogs/states/relayflow-local-steps"
    types = [json.loads(e["message"])["type"] for e in payload["logEvents"]]
    assert types[0] == "ExecutionStarted" and "TaskFailed" in types
    # Execution data is off: no record carries input, output or parameters
    for event in payload["logEvents"]:
        details = json.loads(event["message"])["details"]
        assert not {"input", "output", "parameters", "cause"} & set(details)
    assert "StepEventsFunction" in FUNCTIONS.values()
