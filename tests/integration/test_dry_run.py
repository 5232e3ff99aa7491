"""Dry runs on the local runtime, through the compiled ASL and the real step handlers: steps
that act record the call they would make and act on nothing, code steps run, and the
timeline lists every would-be call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from example_workflows import order_fulfilment
from relayflow_testing import Received, Reply, Server

from relayflow.adapters.aws import client
from relayflow.local import LocalRuntime
from relayflow.local.resources import LocalResources, provision
from relayflow.runner import RunResult, run_workflow
from relayflow.settings import override_settings
from relayflow.steps.dry_run import PLACEHOLDER
from relayflow.tools.call_records import REDACTED
from relayflow.validation import load_workflow_text

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


@pytest.fixture
def runtime() -> Iterator[LocalRuntime]:
    with override_settings(ssrf_allow=["127.0.0.1"]), LocalRuntime(time_scale=0.001) as rt:
        yield rt


@pytest.fixture
def receiver() -> Iterator[Server]:
    server = Server()

    def reply(received: Received) -> Reply:
        return 200, {"Content-Type": "application/json"}, b'{"id": "real"}'

    server.reply = reply
    yield server
    server.stop()


def steps_of(result: RunResult) -> dict[str, Any]:
    return {step.key: step for step in result.steps}


def outputs(result: RunResult) -> dict[str, Any]:
    """Each step's output from the run's timeline (the final document keeps only the outputs
    still live at the end)."""
    return {step.key: step.output for step in result.steps}


def test_order_fulfilment_dry_run_acts_on_nothing_and_lists_each_would_be_call(runtime):
    # Given the example's resources, and a rule that would copy the bus's events to SQS
    example = order_fulfilment()
    workflow, trigger, queue_url = example.workflow, example.trigger, example.seen_events
    # When it runs dry
    result = run_workflow(workflow, trigger, runtime=runtime, dry_run=True)
    # Then it succeeds, and nothing was written, sent or put
    assert result.status == "succeeded", (result.error, result.cause)
    assert client("dynamodb").scan(TableName="app-orders")["Items"] == []
    assert client("ses").get_send_quota()["SentLast24Hours"] == 0
    assert "Messages" not in client("sqs").receive_message(QueueUrl=queue_url, WaitTimeSeconds=0)
    # And the code step ran for real, while each acting step returned the placeholder
    out = outputs(result)
    assert out["loyalty"] == {"points": 518}
    assert out["save_order"] == out["confirm"] == out["announce"] == PLACEHOLDER
    # And the timeline marks every simulated step with the exact call it would have made
    steps = steps_of(result)
    assert steps["loyalty"].dry_run is None
    calls = {key: steps[key].dry_run["call"] for key in ("save_order", "confirm", "announce")}
    assert all(steps[key].dry_run["simulated"] for key in calls)
    assert calls["save_order"] == {
        "kind": "aws",
        "tool": "aws.dynamodb.put_item",
        "action": "dynamodb:PutItem",
        "args": {
            "table": "app-orders",
            "item": {
                "pk": "local#order#ord-2001",
                "customer": "ada@example.org",
                "total": 259.9,
                "lines": trigger["order"]["lines"],
            },
        },
    }
    assert calls["confirm"]["action"] == "ses:SendEmail"
    assert calls["confirm"]["args"]["to"] == ["ada@example.org"]
    assert "518 points" in calls["confirm"]["args"]["text"]
    assert calls["announce"]["action"] == "events:PutEvents"
    assert calls["announce"]["args"]["detail"] == {"order_id": "ord-2001", "points": 518}
    assert steps["read_back"].dry_run["call"]["action"] == "dynamodb:GetItem"


HTTP_AND_HOOK = """
id: notify
start: create
http_tools:
  billing:
    base_url: {url}/v1
    auth: {{type: bearer, token: {{name: billing-token}}}}
    operations:
      create_invoice:
        method: POST
        path: /invoices
        body: {{customer: "{{{{ args.customer }}}}"}}
steps:
  create:
    type: tool
    tool: http.billing.create_invoice
    args: {{customer: "{{{{ trigger.customer }}}}"}}
    dry_run_output: {{body: {{id: "dry-{{{{ trigger.customer }}}}"}}}}
    on_success: lookup
  lookup:
    type: tool
    tool: http.billing
    args: {{method: GET, path: "/invoices/{{{{ steps.create.output.body.id }}}}"}}
    dry_run: read
    on_success: ping
  ping:
    type: webhook_out
    url: "{url}/hooks/{{{{ steps.create.output.body.id }}}}"
    headers: {{X-Api-Key: not-for-logs, X-Trace: t-1}}
    body: {{invoice: "{{{{ steps.create.output.body.id }}}}"}}
    secret: {{name: hook-secret}}
    signature_header: X-Webhook-Signature
"""


def notify_workflow(receiver: Server) -> Any:
    """HTTP_AND_HOOK against ``receiver``, with its billing token and hook secret stored."""
    provision(
        LocalResources(
            secrets={
                "relayflow/local/local/billing-token": "t0k3n",
                "relayflow/local/local/hook-secret": "whsec",
            }
        )
    )
    return load_workflow_text(HTTP_AND_HOOK.format(url=receiver.url), "notify.yaml")


def test_http_calls_are_recorded_without_secrets_and_dry_run_output_feeds_later_steps(
    runtime, receiver
):
    workflow = notify_workflow(receiver)
    # When it runs dry
    result = run_workflow(workflow, {"customer": "c-1"}, runtime=runtime, dry_run=True)
    assert result.status == "succeeded", (result.error, result.cause)
    # Then only the step marked `dry_run: read` reached the server, with the simulated id
    assert [(r.method, r.path) for r in receiver.requests] == [("GET", "/v1/invoices/dry-c-1")]
    steps = steps_of(result)
    assert steps["lookup"].dry_run == {"simulated": False, "read": True}
    assert steps["lookup"].output["body"] == {"id": "real"}
    # And the simulated HTTP tool call names method, URL, body and headers without the token
    create = steps["create"].dry_run["call"]
    assert (create["method"], create["url"]) == ("POST", f"{receiver.url}/v1/invoices")
    assert create["body"] == {"customer": "c-1"}
    assert create["headers"]["Authorization"] == REDACTED
    assert steps["create"].output == {"body": {"id": "dry-c-1"}}
    # And the webhook's would-be request hides its signature and its key header
    ping = steps["ping"].dry_run["call"]
    assert ping["url"] == f"{receiver.url}/hooks/dry-c-1"
    assert ping["body"] == {"invoice": "dry-c-1"}
    assert ping["headers"]["X-Webhook-Signature"] == REDACTED
    assert ping["headers"]["X-Api-Key"] == REDACTED
    assert ping["headers"]["X-Trace"] == "t-1"
    assert "t0k3n" not in json.dumps(result.to_dict(), default=str)


def test_a_normal_run_of_the_same_workflow_acts(runtime, receiver):
    workflow = notify_workflow(receiver)
    result = run_workflow(workflow, {"customer": "c-1"}, runtime=runtime)
    assert result.status == "succeeded", (result.error, result.cause)
    assert [(r.method, r.path) for r in receiver.requests] == [
        ("POST", "/v1/invoices"),
        ("GET", "/v1/invoices/real"),
        ("POST", "/hooks/real"),
    ]
    assert all(step.dry_run is None for step in result.steps)


def test_dry_run_read_is_refused_on_a_tool_that_writes():
    definition = """
id: w
start: a
steps:
  a: {type: tool, tool: aws.sqs.send_message, args: {queue_url: q, body: x}, dry_run: read}
"""
    from relayflow.definition import DefinitionError

    with pytest.raises(DefinitionError) as info:
        load_workflow_text(definition, "w.yaml")
    problems = {(p.path, p.rule): p.message for p in info.value.problems}
    assert "aws.sqs.send_message changes the world" in problems[("steps.a.dry_run", "dry-run-read")]


@pytest.mark.parametrize("dry", [True, False])
def test_an_approval_in_a_dry_run_waits_but_notifies_no_one(runtime, receiver, dry):
    from relayflow.dal.waits import WaitDal
    from relayflow.document import StepRef
    from relayflow.steps import approval
    from relayflow.steps.boundary import effects_for

    # Given an approval step whose request would be posted to a webhook channel
    config = {
        "title": "Ship it?",
        "options": ["approve", "reject"],
        "notification_channels": [{"webhook": {"url": f"{receiver.url}/notify"}}],
    }
    run_id = "a" * 31 + ("1" if dry else "0")
    event = {
        "step": StepRef(key="ask", type="approval", config=config).wire(),
        "doc": {
            "run": {"id": run_id, "workflow_id": "w", "tenant": "acme", "dry_run": dry},
            "trigger": {},
            "steps": {},
        },
        "context": {"attempt": 0},
        "task_token": "token-1",
    }
    # When the step stores its request
    answer = approval.run(event, effects_for(event))
    # Then the request waits either way, and only a real run tells the channel
    stored = WaitDal().get_approval("acme", answer["output"]["approval_id"])
    assert stored is not None and stored.status == "pending"
    assert len(receiver.requests) == (0 if dry else 1)
