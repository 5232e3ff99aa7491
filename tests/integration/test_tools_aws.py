"""Built-in AWS tools against moto (through the local runtime, which also serves Lambda
Invoke for ``aws.lambda.invoke``), and the mapping of AWS failures to named errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aws_resources import create_orders_table
from botocore.exceptions import ClientError, EndpointConnectionError
from relayflow_testing import load_event, load_handler

from relayflow.adapters import tenant_aws
from relayflow.errors import HttpError, InvalidArgsError, ToolNotFound, TransientError
from relayflow.local import LocalRuntime
from relayflow.tenancy import TENANT_TAG, acting_for
from relayflow.tools import run_tool

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration
DOC: dict[str, Any] = {"run": {"id": "run-1", "workflow_id": "wf"}, "trigger": {}, "steps": {}}
#: acme's queues, topics, buses and state machines carry its tag (docs/security.md).
ACME = {TENANT_TAG: "acme"}
ACME_TAGS = [{"Key": TENANT_TAG, "Value": "acme"}]
CONTEXT = SimpleNamespace(function_name="relayflow-tool", aws_request_id="req-1")


def double(event: Any, context: Any) -> Any:
    return {"doubled": event["n"] * 2}


def explode(event: Any, context: Any) -> Any:
    raise ValueError("no thanks")


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    # The functions are acme's (tagged relayflow-tenant=acme, as an operator gives them)
    tags = {"my-double": {TENANT_TAG: "acme"}, "my-explode": {TENANT_TAG: "acme"}}
    handlers = {"my-double": double, "my-explode": explode}
    with LocalRuntime(handlers=handlers, function_tags=tags) as rt:
        yield rt


@pytest.fixture(autouse=True)
def acting_for_acme() -> Iterator[None]:
    # The step handler opens this scope around a step; these tests call the tools directly.
    with acting_for("acme"):
        yield


def call(tool: str, args: Any) -> Any:
    return run_tool(tool, args, doc=DOC)


@pytest.fixture(scope="module")
def table(runtime: LocalRuntime) -> str:
    return create_orders_table(runtime.dynamodb_client)


# --------------------------------------------------------------------------- DynamoDB


def test_dynamodb_put_then_get_round_trips_plain_json(table):
    # Given an item with nested values, floats and nulls
    item = {
        "pk": "acme#order#1",
        "sk": "meta",
        "total": 12.5,
        "qty": 3,
        "tags": ["a", "b"],
        "customer": {"id": "c-1", "vip": True, "note": None},
    }
    # When it is put and read back
    assert call("aws.dynamodb.put_item", {"table": table, "item": item}) == {"ok": True}
    got = call(
        "aws.dynamodb.get_item", {"table": table, "key": {"pk": "acme#order#1", "sk": "meta"}}
    )
    # Then the item comes back as the same JSON (ints stay ints, floats stay floats)
    assert got == {"item": item}
    assert isinstance(got["item"]["qty"], int)


def test_dynamodb_get_item_of_a_missing_key_is_null(table):
    got = call("aws.dynamodb.get_item", {"table": table, "key": {"pk": "acme#nope", "sk": "x"}})
    assert got == {"item": None}


def test_dynamodb_update_item_returns_the_new_attributes(table):
    key = {"pk": "acme#order#2", "sk": "meta"}
    call("aws.dynamodb.put_item", {"table": table, "item": {**key, "status": "new", "n": 1}})
    updated = call(
        "aws.dynamodb.update_item",
        {
            "table": table,
            "key": key,
            "update": "SET #s = :s, n = n + :one",
            "names": {"#s": "status"},
            "values": {":s": "paid", ":one": 1},
        },
    )
    assert updated == {"attributes": {**key, "status": "paid", "n": 2}}


def test_dynamodb_query_pages_by_key_condition(table):
    for sk in ("line#1", "line#2", "line#3"):
        call("aws.dynamodb.put_item", {"table": table, "item": {"pk": "acme#order#3", "sk": sk}})
    first = call(
        "aws.dynamodb.query",
        {
            "table": table,
            "key_condition": "pk = :pk AND begins_with(sk, :line)",
            "values": {":pk": "acme#order#3", ":line": "line#"},
            "limit": 2,
        },
    )
    assert [i["sk"] for i in first["items"]] == ["line#1", "line#2"]
    assert first["count"] == 2
    assert first["last_key"] == {"pk": "acme#order#3", "sk": "line#2"}
    rest = call(
        "aws.dynamodb.query",
        {
            "table": table,
            "key_condition": "pk = :pk",
            "values": {":pk": "acme#order#3"},
            "start_key": first["last_key"],
        },
    )
    assert [i["sk"] for i in rest["items"]] == ["line#3"]
    assert rest["last_key"] is None


def test_conditional_put_that_fails_is_a_named_http_error(table):
    item = {"pk": "acme#order#4", "sk": "meta"}
    call("aws.dynamodb.put_item", {"table": table, "item": item})
    with pytest.raises(HttpError) as info:
        call(
            "aws.dynamodb.put_item",
            {"table": table, "item": item, "condition": "attribute_not_exists(pk)"},
        )
    assert type(info.value).__name__ == "Relayflow.HttpError"
    assert info.value.details["code"] == "ConditionalCheckFailedException"
    assert info.value.details["service"] == "dynamodb"
    assert info.value.details["status"] == 400


def test_missing_table_is_a_named_http_error(runtime):
    with pytest.raises(HttpError) as info:
        call("aws.dynamodb.get_item", {"table": "no-such-table", "key": {"pk": "x"}})
    assert info.value.details["code"] == "ResourceNotFoundException"
    assert "aws.dynamodb.get_item" in info.value.message


# --------------------------------------------------------------------------- messaging


@pytest.fixture(scope="module")
def queue_url(runtime: LocalRuntime) -> str:
    return runtime.client("sqs").create_queue(QueueName="tool-out", tags=ACME)["QueueUrl"]


def receive(runtime: LocalRuntime, url: str) -> list[dict[str, Any]]:
    sqs = runtime.client("sqs")
    answer = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )
    messages = answer.get("Messages", [])
    for message in messages:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return messages


def test_sqs_send_message_sends_json_or_text(runtime, queue_url):
    sent = call(
        "aws.sqs.send_message",
        {"queue_url": queue_url, "body": {"order": 1}, "attributes": {"kind": "order"}},
    )
    call("aws.sqs.send_message", {"queue_url": queue_url, "body": "plain text"})
    messages = receive(runtime, queue_url)
    assert [m["Body"] for m in messages] == ['{"order":1}', "plain text"]
    assert messages[0]["MessageId"] == sent["message_id"]
    assert messages[0]["MessageAttributes"]["kind"]["StringValue"] == "order"


def test_sns_publish_reaches_a_subscribed_queue(runtime):
    sns, sqs = runtime.client("sns"), runtime.client("sqs")
    topic = sns.create_topic(Name="orders", Tags=ACME_TAGS)["TopicArn"]
    url = sqs.create_queue(QueueName="sns-sink")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"}
    )
    published = call("aws.sns.publish", {"topic_arn": topic, "message": {"id": 7}})
    assert published["message_id"]
    assert [m["Body"] for m in receive(runtime, url)] == ['{"id":7}']


def test_events_put_events_delivers_to_a_rule_target(runtime):
    events, sqs = runtime.client("events"), runtime.client("sqs")
    events.create_event_bus(Name="shop", Tags=ACME_TAGS)
    url = sqs.create_queue(QueueName="events-sink")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(
        Name="saved", EventBusName="shop", EventPattern=json.dumps({"source": ["shop.orders"]})
    )
    events.put_targets(Rule="saved", EventBusName="shop", Targets=[{"Id": "q", "Arn": arn}])
    put = call(
        "aws.events.put_events",
        {"bus": "shop", "source": "shop.orders", "detail_type": "OrderSaved", "detail": {"id": 1}},
    )
    assert put["event_id"]
    (message,) = receive(runtime, url)
    delivered = json.loads(message["Body"])
    assert delivered["detail-type"] == "OrderSaved"
    assert delivered["detail"] == {"id": 1}


def test_ses_send_email_is_accepted_for_a_verified_sender(runtime):
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ses.models import ses_backends

    runtime.client("sesv2").create_email_identity(EmailIdentity="ops@example.com")
    sent = call(
        "aws.ses.send_email",
        {
            "from": "ops@example.com",
            "to": ["ada@example.com"],
            "subject": "Order shipped",
            "text": "Your order is on its way.",
        },
    )
    assert sent["message_id"]
    backend = ses_backends[DEFAULT_ACCOUNT_ID][runtime.region]
    (message,) = [m for m in backend.sent_messages if m.id == sent["message_id"]]
    assert message.subject == "Order shipped"
    assert message.destinations["ToAddresses"] == ["ada@example.com"]


def test_ses_send_email_from_an_unverified_sender_is_an_http_error(runtime):
    with pytest.raises(HttpError) as info:
        call(
            "aws.ses.send_email",
            {"from": "stranger@example.org", "to": ["a@example.com"], "subject": "x", "text": "y"},
        )
    assert info.value.details["service"] == "sesv2"


# --------------------------------------------------------------------------- S3


def test_s3_put_and_get_parse_json_and_keep_text(runtime):
    runtime.s3_client.create_bucket(Bucket="tool-bucket")
    put = call(
        "aws.s3.put_object", {"bucket": "tool-bucket", "key": "acme/a.json", "body": {"x": [1, 2]}}
    )
    assert put["etag"]
    call("aws.s3.put_object", {"bucket": "tool-bucket", "key": "acme/a.txt", "body": "hello"})
    got = call("aws.s3.get_object", {"bucket": "tool-bucket", "key": "acme/a.json"})
    assert got["body"] == {"x": [1, 2]}
    assert got["content_type"] == "application/json"
    assert got["etag"] == put["etag"]
    text = call("aws.s3.get_object", {"bucket": "tool-bucket", "key": "acme/a.txt"})
    assert text["body"] == "hello"


def test_s3_get_of_a_missing_key_is_an_http_error(runtime):
    runtime.s3_client.create_bucket(Bucket="tool-bucket-2")
    with pytest.raises(HttpError) as info:
        call("aws.s3.get_object", {"bucket": "tool-bucket-2", "key": "acme/missing"})
    assert info.value.details["code"] == "NoSuchKey"
    assert info.value.details["status"] == 404
    # The message names what is missing (S3's own says "The specified key does not exist.")
    assert "no object s3://tool-bucket-2/acme/missing" in str(info.value)


# --------------------------------------------------------------------------- Lambda, SFN


def test_lambda_invoke_returns_the_functions_answer(runtime):
    got = call("aws.lambda.invoke", {"function": "my-double", "payload": {"n": 21}})
    assert got == {"status_code": 200, "payload": {"doubled": 42}}


def test_lambda_invoke_of_a_failing_function_is_a_named_error(runtime):
    with pytest.raises(HttpError) as info:
        call("aws.lambda.invoke", {"function": "my-explode", "payload": {}})
    assert info.value.details["code"] == "FunctionError"
    assert info.value.details["error_type"] == "ValueError"
    assert "no thanks" in info.value.message


def test_lambda_invoke_refuses_relayflow_functions(runtime):
    with pytest.raises(InvalidArgsError) as info:
        call("aws.lambda.invoke", {"function": "relayflow-tool", "payload": {}})
    assert info.value.details["field"] == "function"
    assert runtime.invocations_of("relayflow-tool") == []


def test_stepfunctions_start_execution_starts_a_run(runtime):
    sfn = runtime.sfn_client
    machine = sfn.create_state_machine(
        name="child",
        definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
        roleArn="arn:aws:iam::123456789012:role/x",
        tags=[{"key": TENANT_TAG, "value": "acme"}],
    )["stateMachineArn"]
    started = call(
        "aws.stepfunctions.start_execution",
        {"state_machine_arn": machine, "input": {"order": 1}, "name": "child-1"},
    )
    assert started["execution_arn"].endswith(":child-1")
    assert started["start_date"]
    described = sfn.describe_execution(executionArn=started["execution_arn"])
    assert json.loads(described["input"]) == {"order": 1}


# --------------------------------------------------------------------------- errors


def test_args_that_fail_the_model_are_invalid_args_naming_the_field(runtime):
    with pytest.raises(InvalidArgsError) as info:
        call("aws.sqs.send_message", {"body": "x"})
    assert info.value.details["field"] == "queue_url"
    with pytest.raises(InvalidArgsError) as info:
        call("aws.dynamodb.get_item", {"table": "t", "key": {"pk": "x"}, "consistant": True})
    assert info.value.details["field"] == "consistant"
    with pytest.raises(InvalidArgsError):
        call("aws.ses.send_email", {"from": "a@b.c", "to": ["d@e.f"], "subject": "no body"})


def test_an_unknown_tool_is_tool_not_found():
    with pytest.raises(ToolNotFound) as info:
        call("aws.dynamodb.put_itme", {})
    assert "aws.dynamodb.put_item" in info.value.message
    assert type(info.value).__name__ == "Relayflow.ToolNotFound"


class _FailingClient:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def __getattr__(self, name: str) -> Any:
        def fail(**kwargs: Any) -> Any:
            raise self.exc

        return fail


def _client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "PutItem",
    )


@pytest.mark.parametrize(
    ("exc", "expected", "name"),
    [
        (_client_error("ProvisionedThroughputExceededException", 400), TransientError, "Transient"),
        (_client_error("ThrottlingException", 400), TransientError, "Transient"),
        (_client_error("InternalServerError", 500), TransientError, "Transient"),
        (_client_error("SomethingNew", 503), TransientError, "Transient"),
        (EndpointConnectionError(endpoint_url="https://dynamodb"), TransientError, "Transient"),
        (_client_error("ValidationException", 400), InvalidArgsError, "InvalidArgs"),
        (_client_error("AccessDeniedException", 400), HttpError, "HttpError"),
    ],
)
def test_aws_failures_map_to_named_errors(monkeypatch, exc, expected, name):
    # Given a DynamoDB client that fails the way AWS does
    # (a tool's calls get their client through the tenant identity's adapter)
    monkeypatch.setattr(tenant_aws, "client", lambda service: _FailingClient(exc))
    # When a tool calls it, Then the failure leaves as the named error ASL retries on (or not)
    with pytest.raises(expected) as info:
        call("aws.dynamodb.put_item", {"table": "t", "item": {"pk": "x"}})
    assert type(info.value).__name__ == f"Relayflow.{name}"
    assert info.value.retryable is (expected is TransientError)


# --------------------------------------------------------------------------- handler


def test_tool_handler_runs_the_put_item_sample(table):
    event = load_event("tool", "dynamodb_put_item")
    result = load_handler("tool").handler(event, CONTEXT)
    assert result == {"output": {"ok": True}, "branch": None}
    got = call(
        "aws.dynamodb.get_item",
        {"table": "orders", "key": {"pk": "acme#order#ord-1", "sk": "meta"}},
    )
    assert got["item"]["total"] == 240.0
    assert got["item"]["lines"] == 2


def test_tool_handler_runs_the_put_events_sample(runtime):
    runtime.client("events").create_event_bus(Name="relayflow-samples", Tags=ACME_TAGS)
    event = load_event("tool", "events_put_events")
    result = load_handler("tool").handler(event, CONTEXT)
    assert result["output"]["event_id"]
