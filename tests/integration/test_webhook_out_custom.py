"""The webhook_out and custom steps against a real HTTP server on 127.0.0.1: requests as the
receiver sees them (signature verified), outputs, routing and named errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aws_resources import runtime_with_secrets
from relayflow_testing import (
    Received,
    Reply,
    Server,
    fresh_allowed_server,
)
from sample_helpers import run_at_server

from relayflow.document import StepRef
from relayflow.errors import HttpError, SsrfBlocked, TransientError
from relayflow.local import LocalRuntime
from relayflow.net.http import verify_signature
from relayflow.settings import override_settings
from relayflow.steps.boundary import REAL

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration
HOOK_SECRET = "whsec-123"
DECIDER_KEY = "decider-signing-key"


# --------------------------------------------------------------------------- a test server


server = pytest.fixture(fresh_allowed_server, name="server")


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with runtime_with_secrets(
        {
            "relayflow/local/acme/hook-secret": HOOK_SECRET,
            "relayflow/local/acme/decider": json.dumps({"signing_key": DECIDER_KEY}),
        }
    ) as rt:
        yield rt


CONTEXT = SimpleNamespace(function_name="relayflow-tool", aws_request_id="req-1")


def run_custom(server: Server, sample: str, answer: bytes, **run: Any) -> dict[str, Any]:
    """The custom step's ``sample`` (its run's fields updated with ``run``) run against the
    local server, which answers ``answer`` as JSON."""
    reply = (200, {"Content-Type": "application/json"}, answer)
    return run_at_server(server, "custom", sample, reply, CONTEXT, **run)


def task(step_type: str, config: dict[str, Any], doc: dict[str, Any] | None = None) -> dict:
    return {
        "step": StepRef(key="s", type=step_type, config=config).wire(),
        "doc": doc
        or {
            "run": {"id": "run-1", "workflow_id": "wf", "tenant": "acme"},
            "trigger": {},
            "steps": {},
        },
        "context": {"attempt": 0},
    }


# --------------------------------------------------------------------------- webhook_out


def test_webhook_out_sends_the_rendered_request_signed_over_the_exact_body(runtime, server):
    # Given the order_created sample pointed at the local server
    reply = (202, {"Content-Type": "application/json"}, b'{"queued": true}')
    # When the handler runs it
    result = run_at_server(server, "webhook_out", "order_created", reply, CONTEXT)
    # Then the receiver got the rendered URL, headers and compact JSON body
    (sent,) = server.requests
    assert (sent.method, sent.path) == ("POST", "/orders/ord-7")
    assert sent.headers["x-order"] == "ord-7"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == b'{"event":"order.created","order":{"id":"ord-7","total":99.5}}'
    assert sent.headers["x-relayflow-run-id"] == "run-0012"
    assert sent.headers["x-relayflow-delivery"] == "run-0012:ping"
    # And the signature verifies against the raw bytes, and only against them
    signature = sent.headers["x-relayflow-signature"]
    assert verify_signature(sent.body, HOOK_SECRET, signature)
    assert not verify_signature(sent.body, "another-secret", signature)
    # And the output is the status, kept headers and parsed answer
    assert result == {
        "output": {
            "status": 202,
            "headers": {"content-type": "application/json"},
            "body": {"queued": True},
        },
        "branch": None,
    }


def test_webhook_out_sends_a_string_body_as_text(runtime, server):
    reply = (200, {"Content-Type": "text/plain"}, b"ok")
    result = run_at_server(server, "webhook_out", "plain_text_put", reply, CONTEXT)
    (sent,) = server.requests
    assert (sent.method, sent.path) == ("PUT", "/runs/run-0013")
    assert sent.body == b"run run-0013 finished with 1 steps"
    assert sent.headers["content-type"] == "text/plain; charset=utf-8"
    assert "x-relayflow-signature" not in sent.headers
    assert result["output"]["body"] == "ok"


def test_webhook_out_without_a_body_sends_none(runtime, server):
    from relayflow.steps import webhook_out

    webhook_out.run(task("webhook_out", {"url": f"{server.url}/ping", "method": "GET"}), REAL)
    (sent,) = server.requests
    assert (sent.method, sent.body) == ("GET", b"")
    assert "content-type" not in sent.headers


def test_a_get_webhook_never_sends_its_body_and_validation_warns(runtime, server):
    from relayflow.steps import webhook_out
    from relayflow.validation import load_workflow_text
    from relayflow.validation.advisories import definition_warnings

    # Given a GET webhook_out that (wrongly) configures a body
    config = {
        "url": f"{server.url}/ping",
        "method": "GET",
        "body": {"order": "ord-7"},
    }
    # When it runs
    webhook_out.run(task("webhook_out", config), REAL)
    # Then the request carries no body and no content type
    (sent,) = server.requests
    assert (sent.method, sent.body) == ("GET", b"")
    assert "content-type" not in sent.headers and "content-length" not in sent.headers
    # And validation warns about the body, with its path and rule
    workflow = load_workflow_text(
        "id: w\nstart: ping\nsteps:\n  ping: {type: webhook_out, url: 'https://x.example', "
        "method: GET, body: {a: 1}}\n",
        "w.yaml",
    )
    assert [(p.path, p.rule) for p in definition_warnings(workflow)] == [
        ("steps.ping.body", "body-ignored")
    ]


def test_webhook_out_4xx_is_an_http_error_with_the_truncated_body(runtime, server):
    from relayflow.steps import webhook_out

    server.reply = lambda r: (422, {"Content-Type": "text/plain"}, b"x" * 5000)
    with pytest.raises(HttpError) as info:
        webhook_out.run(task("webhook_out", {"url": f"{server.url}/h", "body": {"a": 1}}), REAL)
    assert info.value.details["status"] == 422
    assert len(info.value.details["body"].encode()) <= 4096  # a bounded excerpt


def test_webhook_out_503_is_transient(runtime, server):
    from relayflow.steps import webhook_out

    server.reply = lambda r: (503, {}, b"down")
    with pytest.raises(TransientError) as info:
        webhook_out.run(task("webhook_out", {"url": f"{server.url}/h"}), REAL)
    assert info.value.details["status"] == 503


def test_webhook_out_times_out_as_transient(runtime, server):
    from relayflow.steps import webhook_out

    # Given a receiver that answers only once the test is over: only the step's own timeout
    # can end the request
    answer = threading.Event()

    def slow(received: Received) -> Reply:
        answer.wait(60)
        return 200, {}, b""

    server.reply = slow
    config = {"url": f"{server.url}/h", "request_timeout_seconds": 0.2}
    try:
        with pytest.raises(TransientError) as info:
            webhook_out.run(task("webhook_out", config), REAL)
    finally:
        answer.set()
    assert "timed out after 0.2 s" in info.value.message


def test_webhook_out_to_the_metadata_address_is_blocked(runtime):
    from relayflow.steps import webhook_out

    config = {"url": "http://169.254.169.254/latest/meta-data/"}
    with override_settings(ssrf_allow=["127.0.0.1"]), pytest.raises(SsrfBlocked) as info:
        webhook_out.run(task("webhook_out", config), REAL)
    assert type(info.value).__name__ == "Relayflow.SsrfBlocked"


# --------------------------------------------------------------------------- custom


def test_custom_posts_the_step_context_and_routes_to_a_declared_branch(runtime, server):
    # Given a receiver that picks manual_review
    answer = b'{"branch": "manual_review", "reason": "amount over limit"}'
    # When the custom step runs
    result = run_custom(server, "risk_decision", answer)
    # Then it received the step context as signed JSON
    (sent,) = server.requests
    assert (sent.method, sent.path) == ("POST", "/route")
    assert verify_signature(sent.body, DECIDER_KEY, sent.headers["x-relayflow-signature"])
    assert json.loads(sent.body) == {
        "step_key": "decide",
        "run_id": "run-0014",
        "workflow_id": "risk",
        "input": {"model": "risk-v2", "amount": 1200},
        "payload_config": {"model": "risk-v2", "amount": "{{ trigger.amount }}"},
        "steps": {"score": {"output": {"score": 0.82}, "status": "succeeded"}},
        "trigger": {"customer": "c-9", "amount": 1200},
    }
    # And the result routes to the branch, the rest of the answer being the output
    assert result == {"output": {"reason": "amount over limit"}, "branch": "manual_review"}


def test_custom_with_an_undeclared_branch_takes_the_default_route_with_a_marker(runtime, server):
    # a run of its own: the sample's run already recorded this step's result above
    answer = b'{"branch": "escalate", "score": 3}'
    result = run_custom(server, "risk_decision", answer, id="run-0014-undeclared")
    assert result == {"output": {"score": 3, "unknown_branch": "escalate"}, "branch": None}


def test_custom_without_a_branch_returns_the_answer_as_output(runtime, server):
    result = run_custom(server, "unsigned_no_branches", b'{"country": "GB", "segment": "smb"}')
    (sent,) = server.requests
    assert sent.path == "/signup"
    assert sent.headers["x-tenant"] == "acme"
    assert "x-relayflow-signature" not in sent.headers
    assert result == {"output": {"country": "GB", "segment": "smb"}, "branch": None}


def test_custom_branches_may_be_a_map_of_names_to_steps(runtime, server):
    from relayflow.steps import custom

    server.reply = lambda r: (200, {"Content-Type": "application/json"}, b'{"branch": "yes"}')
    config = {"url": f"{server.url}/d", "branches": {"yes": "approve", "no": "reject"}}
    assert custom.run(task("custom", config), REAL) == {"output": {}, "branch": "yes"}


def test_custom_errors_are_named_like_webhook_out(runtime, server):
    from relayflow.steps import custom

    server.reply = lambda r: (500, {}, b"boom")
    with pytest.raises(HttpError) as info:
        custom.run(task("custom", {"url": f"{server.url}/d"}), REAL)
    assert info.value.details["status"] == 500
    with override_settings(ssrf_allow=[]), pytest.raises(SsrfBlocked):
        custom.run(task("custom", {"url": f"{server.url}/d"}), REAL)
