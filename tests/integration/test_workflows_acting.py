"""Whole workflows whose steps act on the world: HTTP tools, webhook_out and custom against a
real server on 127.0.0.1, AWS tools against moto, and the code step, all on the local runtime
through the compiled ASL."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from example_workflows import order_fulfilment
from relayflow_testing import Received, Reply, Server

from relayflow.adapters.aws import client
from relayflow.local import LocalRuntime
from relayflow.local.resources import LocalResources, provision
from relayflow.net.http import verify_signature
from relayflow.runner import RunResult, run_workflow
from relayflow.settings import override_settings
from relayflow.validation import load_workflow_text

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


class Receiver(Server):
    """The shared recording server, answering by path: ``routes[path] = (status, body,
    delay_seconds)``; anything else is a 404."""

    def __init__(self) -> None:
        super().__init__()
        self.routes: dict[str, tuple[int, Any, float]] = {}
        self.reply = self.by_route

    def by_route(self, received: Received) -> Reply:
        status, payload, delay = self.routes.get(received.path, (404, {"error": "no route"}, 0))
        time.sleep(delay)
        return status, {"Content-Type": "application/json"}, json.dumps(payload).encode()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.stop()


@pytest.fixture
def runtime() -> Iterator[LocalRuntime]:
    with override_settings(ssrf_allow=["127.0.0.1"]), LocalRuntime(time_scale=0.001) as rt:
        yield rt


def run(runtime: LocalRuntime, definition: str, trigger: Any = None) -> RunResult:
    return run_workflow(load_workflow_text(definition, "test.yaml"), trigger or {}, runtime=runtime)


def outputs(result: RunResult) -> dict[str, Any]:
    assert result.succeeded, (result.status, result.error, result.cause)
    return {step.key: step.output for step in result.steps}


HTTP_TOOL = """
id: billing
start: create
http_tools:
  billing:
    base_url: {url}/v1
    auth: {{type: bearer, token: {{name: billing-token}}}}
    operations:
      create_invoice:
        method: POST
        path: /invoices
        body: {{customer: "{{{{ args.customer }}}}", amount: "{{{{ args.amount }}}}"}}
steps:
  create:
    type: tool
    tool: http.billing.create_invoice
    args: {{customer: "{{{{ trigger.customer }}}}", amount: "{{{{ trigger.amount }}}}"}}
    retry: {{max_attempts: 3, backoff: fixed, base_seconds: 1}}
    on_success: fetch
    on_failure: failed
  fetch:
    type: tool
    tool: http.billing
    args: {{method: GET, path: "/invoices/{{{{ steps.create.output.body.id }}}}"}}
  failed:
    type: transform
    mapping: {{error: "{{{{ error.Error }}}}"}}
"""


def test_http_tool_operation_calls_the_api_with_auth_and_chains(runtime, receiver):
    # Given a declared HTTP tool whose token lives in Secrets Manager
    provision(LocalResources(secrets={"relayflow/local/local/billing-token": "t0k3n"}))
    receiver.routes["/v1/invoices"] = (201, {"id": "inv-9", "amount": 42}, 0)
    receiver.routes["/v1/invoices/inv-9"] = (200, {"id": "inv-9", "status": "open"}, 0)
    # When the workflow runs
    result = run(runtime, HTTP_TOOL.format(url=receiver.url), {"customer": "c-1", "amount": 42})
    # Then the API received the rendered body with the bearer token, and the next step used
    # the first answer
    assert result.status == "succeeded", (result.error, result.cause)
    (create,) = receiver.to("/v1/invoices")
    assert json.loads(create.body) == {"customer": "c-1", "amount": 42}
    assert create.headers["authorization"] == "Bearer t0k3n"
    steps = outputs(result)
    assert steps["create"]["status"] == 201
    assert steps["fetch"]["body"] == {"id": "inv-9", "status": "open"}


def test_http_tool_5xx_is_retried_then_routed(runtime, receiver):
    provision(LocalResources(secrets={"relayflow/local/local/billing-token": "t0k3n"}))
    receiver.routes["/v1/invoices"] = (503, {"error": "busy"}, 0)
    result = run(runtime, HTTP_TOOL.format(url=receiver.url), {"customer": "c", "amount": 1})
    assert len(receiver.to("/v1/invoices")) == 3
    assert outputs(result)["failed"] == {"error": "Relayflow.Transient"}


def test_http_tool_4xx_is_not_retried(runtime, receiver):
    provision(LocalResources(secrets={"relayflow/local/local/billing-token": "t0k3n"}))
    receiver.routes["/v1/invoices"] = (422, {"error": "bad amount"}, 0)
    result = run(runtime, HTTP_TOOL.format(url=receiver.url), {"customer": "c", "amount": -1})
    assert len(receiver.to("/v1/invoices")) == 1
    assert outputs(result)["failed"] == {"error": "Relayflow.HttpError"}


WEBHOOK = """
id: hook
start: ping
steps:
  ping:
    type: webhook_out
    url: "{url}/hooks/{{{{ trigger.id }}}}"
    body: {{event: order.created, id: "{{{{ trigger.id }}}}"}}
    secret: {{name: hook-secret}}
    request_timeout_seconds: {timeout}
    on_failure: failed
  failed:
    type: transform
    mapping: "{{{{ error.Error }}}}"
"""


def test_webhook_out_signs_the_exact_body(runtime, receiver):
    provision(LocalResources(secrets={"relayflow/local/local/hook-secret": "s3cr3t"}))
    receiver.routes["/hooks/o-7"] = (200, {"received": True}, 0)
    result = run(runtime, WEBHOOK.format(url=receiver.url, timeout=5), {"id": "o-7"})
    assert result.status == "succeeded"
    (hit,) = receiver.to("/hooks/o-7")
    # the receiver verifies the signature over the bytes it got
    assert verify_signature(hit.body, "s3cr3t", hit.headers["x-relayflow-signature"])
    assert not verify_signature(hit.body, "wrong", hit.headers["x-relayflow-signature"])
    assert json.loads(hit.body) == {"event": "order.created", "id": "o-7"}
    assert outputs(result)["ping"]["body"] == {"received": True}


def test_webhook_out_timeout_routes_as_transient(runtime, receiver):
    provision(LocalResources(secrets={"relayflow/local/local/hook-secret": "s3cr3t"}))
    receiver.routes["/hooks/slow"] = (200, {}, 1.5)
    result = run(runtime, WEBHOOK.format(url=receiver.url, timeout=0.3), {"id": "slow"})
    assert outputs(result)["failed"] == "Relayflow.Transient"


def test_webhook_out_to_the_metadata_address_is_blocked(runtime):
    definition = WEBHOOK.format(url="http://169.254.169.254", timeout=1).replace(
        "    secret: {name: hook-secret}\n", ""
    )
    result = run(runtime, definition, {"id": "x"})
    assert outputs(result)["failed"] == "Relayflow.SsrfBlocked"


CUSTOM = """
id: decide
start: decide
steps:
  decide:
    type: custom
    url: {url}/decide
    payload_config: {{model: risk-v2}}
    branches: {{review: manual_review, fast: ship}}
    on_success: ship
  manual_review: {{type: transform, mapping: reviewed}}
  ship: {{type: transform, mapping: shipped}}
"""


@pytest.mark.parametrize(
    ("answer", "taken"),
    [
        ({"branch": "review", "score": 0.9}, "manual_review"),
        ({"branch": "fast"}, "ship"),
        ({"branch": "nonsense"}, "ship"),
        ({"score": 0.1}, "ship"),
    ],
)
def test_custom_step_routes_on_the_answered_branch(runtime, receiver, answer, taken):
    receiver.routes["/decide"] = (200, answer, 0)
    result = run(runtime, CUSTOM.format(url=receiver.url), {"order": 1})
    assert result.status == "succeeded"
    steps = outputs(result)
    assert taken in steps
    assert ({"manual_review", "ship"} - {taken}).isdisjoint(steps)
    (hit,) = receiver.to("/decide")
    sent = json.loads(hit.body)
    assert sent["step_key"] == "decide" and sent["trigger"] == {"order": 1}
    assert sent["payload_config"] == {"model": "risk-v2"}


def test_custom_step_with_an_undeclared_branch_target_is_refused_at_validation():
    definition = CUSTOM.format(url="https://x.example").replace("fast: ship", "fast: nowhere")
    from relayflow.definition import DefinitionError

    with pytest.raises(DefinitionError) as info:
        load_workflow_text(definition, "custom.yaml")
    assert any(
        p.path == "steps.decide.branches.fast" and p.rule == "unknown-step"
        for p in info.value.problems
    )


def test_order_fulfilment_example_acts_on_dynamodb_ses_and_eventbridge(runtime):
    # Given the example's resources in moto, and a rule that copies the bus's events to SQS
    example = order_fulfilment()
    workflow, trigger, queue_url = example.workflow, example.trigger, example.seen_events
    # When it runs
    result = run_workflow(workflow, trigger, runtime=runtime)
    # Then the order is in DynamoDB, the email went out and the event reached the bus
    assert result.status == "succeeded", (result.error, result.cause)
    item = client("dynamodb").get_item(
        TableName="app-orders", Key={"pk": {"S": "local#order#ord-2001"}}
    )
    assert item["Item"]["customer"] == {"S": "ada@example.org"}
    assert outputs(result)["loyalty"] == {"points": 518}
    assert outputs(result)["confirm"]["message_id"]
    messages = client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    event = json.loads(messages[0]["Body"])
    assert event["detail-type"] == "OrderFulfilled"
    assert event["detail"] == {"order_id": "ord-2001", "points": 518}
    assert outputs(result)["read_back"]["item"]["total"] == 259.9


def test_code_step_error_carries_the_line_and_routes(runtime):
    definition = """
id: code
start: compute
steps:
  compute:
    type: code
    code: |
      total = 0
      for line in trigger["lines"]:
          total += line["qty"] / line["divisor"]
      return total
    on_failure: failed
  failed:
    type: transform
    mapping: {error: "{{ error.Error }}", cause: "{{ error.Cause }}"}
"""
    result = run(runtime, definition, {"lines": [{"qty": 1, "divisor": 0}]})
    failed = outputs(result)["failed"]
    assert failed["error"] == "Relayflow.CodeError"
    assert "ZeroDivisionError at line 3" in failed["cause"]
