"""The in-process Lambda Invoke endpoint: name decoding, errors, discovery, concurrency."""

from __future__ import annotations

import json
import threading

import boto3
import pytest
from botocore.config import Config
from local_asl import machine, task

from relayflow.local.lambda_endpoint import parse_function_ref

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("raw", "qualifier", "expected"),
    [
        ("echo", None, ("echo", None)),
        ("echo%3Alive", None, ("echo", "live")),
        ("echo:live", None, ("echo", "live")),
        ("arn:aws:lambda:us-east-1:123456789012:function:echo", None, ("echo", None)),
        (
            "arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3Aecho%3Alive",
            None,
            ("echo", "live"),
        ),
        ("123456789012:function:echo", None, ("echo", None)),
        ("123456789012%3Afunction%3Aecho%3A7", None, ("echo", "7")),
        ("echo", "3", ("echo", "3")),
        ("relayflow-condition:live", None, ("relayflow-condition", "live")),
    ],
)
def test_function_names_are_decoded_like_lambda(raw, qualifier, expected):
    assert parse_function_ref(raw, qualifier) == expected


@pytest.mark.parametrize(
    ("function_name", "qualifier"),
    [
        ("echo", None),
        ("echo:live", "live"),
        ("arn:aws:lambda:us-east-1:123456789012:function:echo", None),
        ("arn:aws:lambda:us-east-1:123456789012:function:echo:live", "live"),
        ("123456789012:function:echo", None),
    ],
)
def test_every_function_name_form_reaches_the_handler(rt, function_name, qualifier):
    # Given a Task naming the function in one of the forms Lambda accepts
    asl = machine({"Call": task(function_name, payload={"form": function_name})})

    # When it runs
    record = rt.run("name-forms", asl, {})

    # Then the echo handler served it, under its bare name and qualifier
    assert record.output == {"form": function_name}
    (call,) = rt.invocations
    assert (call.function_name, call.qualifier) == ("echo", qualifier)


def test_qualifier_parameter_arrives_as_query_string(rt):
    # Given a Task with an explicit Qualifier parameter
    state = task("echo", payload={"q": True})
    state["Parameters"]["Qualifier"] = "3"

    # When it runs
    record = rt.run("qualifier-param", machine({"Call": state}), {})

    # Then the endpoint saw the qualifier
    assert record.output == {"q": True}
    assert rt.invocations[0].qualifier == "3"


def _lambda_client(rt):
    return boto3.client(
        "lambda",
        region_name="us-east-1",
        endpoint_url=rt.lambda_endpoint_url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 0}),
    )


def test_unhandled_exception_body_matches_the_python_runtime(rt):
    # Given a direct Invoke of a handler that raises Relayflow.Transient
    client = _lambda_client(rt)

    # When it is invoked
    response = client.invoke(FunctionName="fail-transient", Payload=json.dumps({"key": "k"}))

    # Then Lambda's contract holds: 200, FunctionError Unhandled, and the runtime's error body
    assert response["StatusCode"] == 200
    assert response["FunctionError"] == "Unhandled"
    body = json.loads(response["Payload"].read())
    assert set(body) == {"errorMessage", "errorType", "stackTrace"}
    assert body["errorType"] == "Relayflow.Transient"
    assert body["errorMessage"] == "upstream unavailable for k"
    # the trace starts at the handler, as the runtime's does
    assert "conftest.py" in body["stackTrace"][0]
    assert "lambda_endpoint.py" not in "".join(body["stackTrace"])


def test_unknown_function_is_resource_not_found(rt):
    # Given a direct Invoke of a function nobody serves
    client = _lambda_client(rt)

    # When it is invoked, Then Lambda's 404 error comes back
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.invoke(FunctionName="nobody", Payload=b"{}")

    # and a Task invoking it fails with the Lambda service error name
    record = rt.run("unknown-function", machine({"Call": task("nobody")}), {})
    assert record.status == "FAILED"
    assert record.error == "Lambda.ResourceNotFoundException"


def test_unserialisable_result_is_a_marshal_error(rt):
    # Given a handler returning something JSON cannot encode
    rt.register_handler("bad-result", lambda event, context: {"when": object()})

    # When a Task invokes it
    record = rt.run("marshal-error", machine({"Call": task("bad-result")}), {})

    # Then the Task fails as the Python runtime reports it
    assert record.status == "FAILED"
    assert record.error == "Runtime.MarshalError"


def test_map_fan_out_runs_invocations_concurrently(rt):
    # Given a Map over 40 items, unbounded concurrency, each Lambda returning only once all
    # 40 are in flight at once (served one at a time, or a few at a time, none would return)
    everyone = threading.Barrier(40, timeout=60)

    def meet(event, context):
        everyone.wait()
        return {"item": event["item"]}

    rt.register_handler("meet", meet)
    asl = machine(
        {
            "Each": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "ItemSelector": {"item.$": "$$.Map.Item.Value"},
                "MaxConcurrency": 0,
                "ItemProcessor": {"StartAt": "Meet", "States": {"Meet": task("meet")}},
                "End": True,
            }
        }
    )

    # When it runs
    record = rt.run("fan-out", asl, {"items": list(range(40))}, timeout=120)

    # Then every item was served, all 40 concurrently
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    assert [r["item"] for r in record.output] == list(range(40))
    assert len(rt.invocations_of("meet")) == 40
