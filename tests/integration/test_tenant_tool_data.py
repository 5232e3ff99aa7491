"""Issue 36, item 1, tried as an attacker with two tenants would: tenant alpha keeps objects,
items, a queue, a topic, a bus, a function and a state machine in its own tool resources;
tenant beta's tool calls on them fail closed on the local runtime (``Relayflow.InvalidArgs``,
``details.rule`` ``tenant-boundary``, ``details.scheme`` naming the rule) before they reach
moto, and alpha's same calls succeed.

The schemes (docs/security.md, "Tenant isolation"): S3 keys under ``<tenant>/``, DynamoDB
partition keys ``<tenant>#…``, and the tag ``relayflow-tenant=<tenant>`` on queues, topics,
buses, functions and state machines; a resource in ``shared_tool_resources`` is shared on
purpose. The same rules on AWS are TenantStepRole's (tests/deploy/test_tenant_tool_policy.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from relayflow.errors import HttpError, InvalidArgsError, ToolNotFound
from relayflow.local import LocalRuntime
from relayflow.settings import override_settings
from relayflow.tenancy import TENANT_TAG, acting_for
from relayflow.tools import run_tool
from relayflow.tools.catalogue import would_call

pytestmark = pytest.mark.integration

ALPHA, BETA = "alpha", "beta"
DOC: dict[str, Any] = {"run": {"id": "run-1", "workflow_id": "wf"}, "trigger": {}, "steps": {}}
TABLE, BUCKET = "app-ledger", "app-files"
SECRET_ITEM = {"pk": f"{ALPHA}#order#1", "sk": "meta", "card": "4242"}
SECRET_KEY = f"{ALPHA}/invoices/1.json"


def alphas_function(event: Any, context: Any) -> Any:
    return {"payroll": "alpha's", "asked": event}


@dataclass(frozen=True)
class Resources:
    queue_url: str
    topic_arn: str
    bus: str
    function: str
    machine_arn: str
    beta_queue_url: str


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with LocalRuntime(
        handlers={"app-payroll": alphas_function, "app-beta-fn": alphas_function},
        function_tags={"app-payroll": {TENANT_TAG: ALPHA}, "app-beta-fn": {TENANT_TAG: BETA}},
    ) as rt:
        yield rt


@pytest.fixture(scope="module")
def alphas(runtime: LocalRuntime) -> Resources:
    """Alpha's tool resources, tagged or keyed as the operator gives them to alpha, and
    alpha's object and item written by alpha's own steps."""
    tag = [{"Key": TENANT_TAG, "Value": ALPHA}]
    runtime.client("dynamodb").create_table(
        TableName=TABLE,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "card", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-card",
                "KeySchema": [{"AttributeName": "card", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    runtime.client("s3").create_bucket(Bucket=BUCKET)
    sqs = runtime.client("sqs")
    queue_url = sqs.create_queue(QueueName="app-alpha-jobs", tags={TENANT_TAG: ALPHA})["QueueUrl"]
    beta_queue = sqs.create_queue(QueueName="app-beta-jobs", tags={TENANT_TAG: BETA})["QueueUrl"]
    topic = runtime.client("sns").create_topic(Name="app-alpha-alerts", Tags=tag)["TopicArn"]
    runtime.client("events").create_event_bus(Name="app-alpha-bus", Tags=tag)
    machine = runtime.client("stepfunctions").create_state_machine(
        name="app-alpha-payroll",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
        roleArn="arn:aws:iam::123456789012:role/app-sfn",
        tags=[{"key": TENANT_TAG, "value": ALPHA}],
    )["stateMachineArn"]
    with acting_for(ALPHA):
        call("aws.dynamodb.put_item", {"table": TABLE, "item": SECRET_ITEM})
        call("aws.s3.put_object", {"bucket": BUCKET, "key": SECRET_KEY, "body": {"total": 9}})
    return Resources(queue_url, topic, "app-alpha-bus", "app-payroll", machine, beta_queue)


def call(tool: str, args: Any) -> Any:
    return run_tool(tool, args, doc=DOC)


def assert_refused(exc: pytest.ExceptionInfo[InvalidArgsError], *words: str) -> None:
    """A tenant-boundary refusal (``Relayflow.InvalidArgs``, never retried) naming its rule."""
    assert exc.value.error_name == "Relayflow.InvalidArgs"
    assert exc.value.details["rule"] == "tenant-boundary"
    for word in words:
        assert word in str(exc.value), str(exc.value)


def attacks(res: Resources) -> dict[str, tuple[str, dict[str, Any], str]]:
    """Beta's calls on alpha's data: ``label -> (tool, args, the rule the refusal names)``."""
    key = {"pk": SECRET_ITEM["pk"], "sk": "meta"}
    s3_rule, ddb_rule, tag_rule = f"start with '{BETA}/'", f"start with '{BETA}#'", TENANT_TAG
    return {
        "s3-get": ("aws.s3.get_object", {"bucket": BUCKET, "key": SECRET_KEY}, s3_rule),
        "s3-put": (
            "aws.s3.put_object",
            {"bucket": BUCKET, "key": SECRET_KEY, "body": "x"},
            s3_rule,
        ),
        # In an IAM ARN '*' matches '/' too: beta's folder holding a folder named alpha
        "s3-nested": (
            "aws.s3.get_object",
            {"bucket": BUCKET, "key": f"{ALPHA}/{BETA}/x.json"},
            s3_rule,
        ),
        "ddb-get": ("aws.dynamodb.get_item", {"table": TABLE, "key": key}, ddb_rule),
        "ddb-put": (
            "aws.dynamodb.put_item",
            {"table": TABLE, "item": {**SECRET_ITEM, "card": "stolen"}},
            ddb_rule,
        ),
        "ddb-update": (
            "aws.dynamodb.update_item",
            {"table": TABLE, "key": key, "update": "SET card = :c", "values": {":c": "0"}},
            ddb_rule,
        ),
        "ddb-query": (
            "aws.dynamodb.query",
            {
                "table": TABLE,
                "key_condition": "#p = :p",
                "names": {"#p": "pk"},
                "values": {":p": SECRET_ITEM["pk"]},
            },
            ddb_rule,
        ),
        # A query on a secondary index reads across partitions: it cannot be scoped
        "ddb-index": (
            "aws.dynamodb.query",
            {
                "table": TABLE,
                "index": "by-card",
                "key_condition": "card = :c",
                "values": {":c": "4242"},
            },
            "cannot be scoped",
        ),
        "sqs": ("aws.sqs.send_message", {"queue_url": res.queue_url, "body": "x"}, tag_rule),
        "sns": ("aws.sns.publish", {"topic_arn": res.topic_arn, "message": "x"}, tag_rule),
        "events": (
            "aws.events.put_events",
            {"bus": res.bus, "source": "shop", "detail_type": "paid", "detail": {}},
            tag_rule,
        ),
        "lambda": ("aws.lambda.invoke", {"function": res.function, "payload": {}}, tag_rule),
        "lambda-arn": (
            "aws.lambda.invoke",
            {"function": f"arn:aws:lambda:us-east-1:123456789012:function:{res.function}:live"},
            tag_rule,
        ),
        "sfn": (
            "aws.stepfunctions.start_execution",
            {"state_machine_arn": res.machine_arn},
            tag_rule,
        ),
        "sfn-alias": (
            "aws.stepfunctions.start_execution",
            {"state_machine_arn": f"{res.machine_arn}:live"},
            tag_rule,
        ),
        # An untagged bus (the account's default one) is nobody's
        "default-bus": (
            "aws.events.put_events",
            {"source": "shop", "detail_type": "paid", "detail": {}},
            tag_rule,
        ),
    }


ATTACKS = list(attacks(Resources("", "", "", "", "", "")))


@pytest.mark.parametrize("label", ATTACKS)
def test_beta_cannot_reach_alphas_tool_data(runtime, alphas, label):
    tool, args, rule = attacks(alphas)[label]
    # When beta's step makes the call on alpha's resource
    with acting_for(BETA), pytest.raises(InvalidArgsError) as refused:
        call(tool, args)
    # Then it is refused on the tenant boundary, naming the rule
    assert_refused(refused, rule, BETA)
    assert refused.value.details["scheme"]


@pytest.mark.parametrize("label", ATTACKS)
def test_a_dry_run_refuses_the_same_calls(runtime, alphas, label):
    tool, args, rule = attacks(alphas)[label]
    with acting_for(BETA), pytest.raises(InvalidArgsError) as refused:
        would_call(tool, args, doc=DOC)
    assert_refused(refused, rule)


def test_beta_left_alphas_object_and_item_untouched(runtime, alphas):
    # Given every attack was tried
    for tool, args, _ in attacks(alphas).values():
        with acting_for(BETA), pytest.raises(InvalidArgsError):
            call(tool, args)
    # Then alpha's object and item are as alpha wrote them, and nothing reached alpha's
    # function or machine
    with acting_for(ALPHA):
        got = call("aws.s3.get_object", {"bucket": BUCKET, "key": SECRET_KEY})
        item = call(
            "aws.dynamodb.get_item",
            {"table": TABLE, "key": {"pk": SECRET_ITEM["pk"], "sk": "meta"}},
        )
    assert got["body"] == {"total": 9}
    assert item["item"] == SECRET_ITEM
    assert runtime.invocations_of("app-payroll") == []
    sfn = runtime.client("stepfunctions")
    assert sfn.list_executions(stateMachineArn=alphas.machine_arn)["executions"] == []
    assert "Messages" not in runtime.client("sqs").receive_message(QueueUrl=alphas.queue_url)


@pytest.mark.parametrize(
    "tool", ["aws.s3.list_objects", "aws.s3.list_objects_v2", "aws.dynamodb.scan"]
)
def test_listing_a_bucket_or_scanning_a_table_is_no_tool(runtime, alphas, tool):
    # A listing or a scan reads every tenant's keys at once: there is no such tool (and
    # TenantStepRole grants no dynamodb:Scan, and s3:ListBucket only under <tenant>/)
    with acting_for(BETA), pytest.raises(ToolNotFound):
        call(tool, {"bucket": BUCKET, "table": TABLE})


MISSING = {
    "sqs": (
        "aws.sqs.send_message",
        {"queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/app-none", "body": "x"},
    ),
    "sns": (
        "aws.sns.publish",
        {"topic_arn": "arn:aws:sns:us-east-1:123456789012:app-none", "message": "x"},
    ),
    "events": (
        "aws.events.put_events",
        {"bus": "app-none", "source": "shop", "detail_type": "paid", "detail": {}},
    ),
    "lambda": ("aws.lambda.invoke", {"function": "app-none", "payload": {}}),
    "sfn": (
        "aws.stepfunctions.start_execution",
        {"state_machine_arn": "arn:aws:states:us-east-1:123456789012:stateMachine:app-none"},
    ),
    "ddb": ("aws.dynamodb.get_item", {"table": "app-none", "key": {"pk": f"{BETA}#1"}}),
}


@pytest.mark.parametrize("label", list(MISSING))
def test_a_resource_that_does_not_exist_fails_as_not_found(runtime, alphas, label):
    # Nothing to reach, so nothing to refuse: the call fails as AWS answers it (HttpError)
    tool, args = MISSING[label]
    with acting_for(BETA), pytest.raises(HttpError) as failed:
        call(tool, args)
    assert "rule" not in failed.value.details


def test_alphas_same_calls_succeed(runtime, alphas):
    key = {"pk": SECRET_ITEM["pk"], "sk": "meta"}
    with acting_for(ALPHA):
        assert call("aws.dynamodb.get_item", {"table": TABLE, "key": key})["item"] == SECRET_ITEM
        updated = call(
            "aws.dynamodb.update_item",
            {"table": TABLE, "key": key, "update": "SET seen = :s", "values": {":s": True}},
        )
        assert updated["attributes"]["seen"] is True
        queried = call(
            "aws.dynamodb.query",
            {"table": TABLE, "key_condition": "pk = :p", "values": {":p": SECRET_ITEM["pk"]}},
        )
        assert queried["count"] == 1
        assert (
            call("aws.s3.get_object", {"bucket": BUCKET, "key": SECRET_KEY})["body"]["total"] == 9
        )
        assert call("aws.sqs.send_message", {"queue_url": alphas.queue_url, "body": "ok"})[
            "message_id"
        ]
        assert call("aws.sns.publish", {"topic_arn": alphas.topic_arn, "message": "ok"})[
            "message_id"
        ]
        event = {"bus": alphas.bus, "source": "shop", "detail_type": "paid", "detail": {}}
        assert call("aws.events.put_events", event)["event_id"]
        invoked = call("aws.lambda.invoke", {"function": alphas.function, "payload": {"n": 1}})
        assert invoked["payload"] == {"payroll": "alpha's", "asked": {"n": 1}}
        started = call(
            "aws.stepfunctions.start_execution", {"state_machine_arn": alphas.machine_arn}
        )
        assert started["execution_arn"].startswith("arn:aws:states:")


def test_beta_reaches_its_own_resources(runtime, alphas):
    # Beta's own queue and function (tagged beta), beta's own keys in the same bucket/table
    with acting_for(BETA):
        assert call("aws.sqs.send_message", {"queue_url": alphas.beta_queue_url, "body": "b"})
        assert (
            call("aws.lambda.invoke", {"function": "app-beta-fn", "payload": {}})["status_code"]
            == 200
        )
        item = {"pk": f"{BETA}#order#1", "sk": "meta"}
        assert call("aws.dynamodb.put_item", {"table": TABLE, "item": item}) == {"ok": True}
        stored = call("aws.s3.put_object", {"bucket": BUCKET, "key": f"{BETA}/a.txt", "body": "b"})
        assert stored["etag"]
    # But not alpha's queue from beta's, even when the names differ by one word
    with acting_for(ALPHA), pytest.raises(InvalidArgsError) as refused:
        call("aws.sqs.send_message", {"queue_url": alphas.beta_queue_url, "body": "a"})
    assert_refused(refused, f"{TENANT_TAG}={BETA}")


def test_a_tenants_nested_folder_named_like_the_tenant_is_refused_too(runtime, alphas):
    # The price of closing the '*'-matches-'/' gap on AWS: alpha/x/alpha/… is refused there,
    # so it is refused here as well (docs/security.md)
    with acting_for(ALPHA), pytest.raises(InvalidArgsError) as refused:
        call("aws.s3.put_object", {"bucket": BUCKET, "key": f"{ALPHA}/x/{ALPHA}/y", "body": "a"})
    assert_refused(refused, f"/{ALPHA}/")


def test_a_resource_shared_on_purpose_is_reached_by_every_tenant(runtime, alphas):
    # Given the operator declares alpha's topic and its invoices folder shared
    # (SharedToolResources)
    shared = [alphas.topic_arn, f"arn:aws:s3:::{BUCKET}/{ALPHA}/invoices/*"]
    with override_settings(shared_tool_resources=shared), acting_for(BETA):
        # Then beta publishes to the topic and reads the invoices
        assert call("aws.sns.publish", {"topic_arn": alphas.topic_arn, "message": "hi"})
        assert call("aws.s3.get_object", {"bucket": BUCKET, "key": SECRET_KEY})["body"]
        # But not a shared key under a further /beta/ (the role's deny holds there too)
        with pytest.raises(InvalidArgsError):
            call("aws.s3.get_object", {"bucket": BUCKET, "key": f"{ALPHA}/invoices/{BETA}/x"})
        # And nothing else is shared: alpha's other objects, queue and table stay alpha's
        with pytest.raises(InvalidArgsError):
            call("aws.s3.get_object", {"bucket": BUCKET, "key": f"{ALPHA}/payroll.json"})
        with pytest.raises(InvalidArgsError):
            call("aws.sqs.send_message", {"queue_url": alphas.queue_url, "body": "x"})
        with pytest.raises(InvalidArgsError):
            key = {"pk": SECRET_ITEM["pk"], "sk": "meta"}
            call("aws.dynamodb.get_item", {"table": TABLE, "key": key})


def test_on_aws_iam_holds_the_rules(runtime, alphas, monkeypatch):
    # With a tenant step role the check is IAM's (TenantStepRole), not made in code: the
    # call goes out as the tenant's session, which the local stand-in serves as is
    from relayflow.adapters import tenant_aws

    monkeypatch.setattr(tenant_aws, "_session", lambda role, tenant: _LocalSession(runtime))
    role = "arn:aws:iam::123456789012:role/relayflow-local-step-identity"
    with override_settings(tenant_step_role_arn=role), acting_for(BETA):
        got = call("aws.s3.get_object", {"bucket": BUCKET, "key": SECRET_KEY})
    assert got["body"] == {"total": 9}


class _LocalSession:
    def __init__(self, runtime: LocalRuntime) -> None:
        self._runtime = runtime

    def client(self, service: str, **_: Any) -> Any:
        return self._runtime.client(service)
