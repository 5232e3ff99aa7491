"""The GitHub-style signature under another header name (``signature_header``), with the
``X-Webhook-Signature`` preset the seed's senders use: inbound deliveries to
``POST /hooks/{slug}`` on a LocalServer, and outbound ``webhook_out`` requests as a receiver
on 127.0.0.1 sees them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from relayflow_testing import HTTP_TIMEOUT, Server, allowed_server, load_handler

from relayflow.document import StepRef
from relayflow.local.serve import LocalServer
from relayflow.triggers.signatures import WEBHOOK_SIGNATURE_HEADER, sign, verify_delivery
from relayflow.validation import validate_data

pytestmark = pytest.mark.integration

SUFFIX = uuid.uuid4().hex[:8]
SLUG = f"seed-hook-{SUFFIX}"
SECRET_NAME = f"tests/{SUFFIX}/seed"
#: Where it is stored: the serve key's tenant (local) folder.
STORED_NAME = f"relayflow/local/local/{SECRET_NAME}"
SECRET = "seed-signing-secret"


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(time_scale=0.01) as local:
        assert local.runtime is not None
        local.runtime.client("secretsmanager").create_secret(Name=STORED_NAME, SecretString=SECRET)
        yield local


@pytest.fixture(scope="module")
def api(server: LocalServer) -> Iterator[httpx.Client]:
    definition = {
        "id": "seed-inbound",
        "start": "echo",
        "steps": {
            "echo": {
                "type": "transform",
                "mapping": {"body": "{{ trigger.body }}", "headers": "{{ trigger.headers }}"},
            }
        },
        "triggers": [
            {
                "type": "webhook",
                "slug": SLUG,
                "secret": {"name": SECRET_NAME},
                "signature_scheme": "github",
                "signature_header": WEBHOOK_SIGNATURE_HEADER,
                "transform": {"body": "{{ trigger.body }}", "headers": "{{ trigger.headers }}"},
            }
        ],
    }
    with httpx.Client(
        base_url=server.url,
        headers={"Authorization": f"Bearer {server.bootstrap_key}"},
        timeout=HTTP_TIMEOUT,
    ) as client:
        put = client.put("/workflows/seed-inbound", json=definition)
        assert put.status_code == 201, put.text
        yield client


def post(server: LocalServer, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(
        f"{server.url}/hooks/{SLUG}",
        content=body,
        headers={"Content-Type": "application/json", **headers},
        timeout=30,
    )


def test_an_x_webhook_signature_delivery_verifies_and_starts_a_run(server, api):
    # Given a delivery signed the seed's way: X-Webhook-Signature: sha256=<hex of raw body>
    body = json.dumps({"event": "order.created", "id": uuid.uuid4().hex}).encode()
    signature = sign("github", body, SECRET)
    assert signature.startswith("sha256=")
    # When it is delivered
    response = post(server, body, {WEBHOOK_SIGNATURE_HEADER: signature})
    # Then it is accepted, and the run's input has the body but not the signature header
    assert response.status_code == 202, response.text
    run = api.get(f"/runs/{response.json()['run_id']}").json()
    assert run["input"]["body"] == json.loads(body)
    assert "x-webhook-signature" not in run["input"]["headers"]
    assert run["input"]["headers"]["content-type"] == "application/json"


@pytest.mark.parametrize("case", ["tampered body", "github's own header", "missing"])
def test_a_tampered_or_misplaced_signature_is_refused(server, api, case):
    body = json.dumps({"event": "order.created", "total": 10}).encode()
    signature = sign("github", body, SECRET)
    before = len(api.get("/workflows/seed-inbound/runs").json()["items"])
    if case == "tampered body":
        response = post(server, body.replace(b"10", b"99"), {WEBHOOK_SIGNATURE_HEADER: signature})
    elif case == "github's own header":
        # The trigger renamed the header: X-Hub-Signature-256 is not where it looks.
        response = post(server, body, {"X-Hub-Signature-256": signature})
    else:
        response = post(server, body, {})
    assert response.status_code == 401, response.text
    details = response.json()["details"]
    assert details["header"] == "x-webhook-signature"
    assert details["reason"] == ("mismatch" if case == "tampered body" else "missing")
    assert len(api.get("/workflows/seed-inbound/runs").json()["items"]) == before


def test_verify_delivery_reads_the_renamed_header_only():
    body = b'{"a":1}'
    headers = {"x-webhook-signature": sign("github", body, SECRET)}
    verify_delivery(
        "github", body, headers, [SECRET], now=0, window_seconds=60, header="X-Webhook-Signature"
    )
    with pytest.raises(ValueError, match="cannot be renamed"):
        verify_delivery("stripe", body, headers, [SECRET], now=0, window_seconds=60, header="X-A")


def test_signature_header_is_refused_outside_the_github_scheme():
    definition = {
        "id": "wf",
        "start": "a",
        "steps": {"a": {"type": "noop"}},
        "triggers": [
            {
                "type": "webhook",
                "slug": "abc",
                "signature_scheme": "stripe",
                "signature_header": "X-Webhook-Signature",
            }
        ],
    }
    _, problems = validate_data(definition, "wf.yaml")
    assert [(p.path, p.rule) for p in problems] == [("triggers[0]", "signature-header")]
    assert "the stripe scheme's header is fixed" in problems[0].message
    definition["triggers"][0]["signature_header"] = "Bad Header:"
    definition["triggers"][0]["signature_scheme"] = "github"
    _, problems = validate_data(definition, "wf.yaml")
    assert [(p.path, p.rule) for p in problems] == [("triggers[0].signature_header", "pattern")]


# --------------------------------------------------------------------------- webhook_out


@pytest.fixture
def receiver() -> Iterator[Server]:
    with allowed_server() as srv:
        yield srv


def outbound(config: dict[str, Any]) -> dict[str, Any]:
    return {
        "step": StepRef(key="notify", type="webhook_out", config=config).wire(),
        "doc": {
            "run": {"id": "run-1", "workflow_id": "wf", "tenant": "local"},
            "trigger": {},
            "steps": {},
        },
        "context": {"attempt": 0},
    }


def test_webhook_out_signs_in_the_x_webhook_signature_preset(server, receiver):
    # Given a webhook_out step that signs in the seed's header
    receiver.reply = lambda r: (200, {"Content-Type": "application/json"}, b"{}")
    config = {
        "url": f"{receiver.url}/hooks/in",
        "body": {"order": "ord-7"},
        "secret": {"name": SECRET_NAME},
        "signature_header": WEBHOOK_SIGNATURE_HEADER,
    }
    # When it runs
    load_handler("webhook_out").handler(
        outbound(config), SimpleNamespace(function_name="f", aws_request_id="r")
    )
    # Then the receiver verifies the raw body with the seed's scheme, under that header only
    (sent,) = receiver.requests
    assert "x-relayflow-signature" not in sent.headers
    verify_delivery(
        "github",
        sent.body,
        sent.headers,
        [SECRET],
        now=0,
        window_seconds=60,
        header=WEBHOOK_SIGNATURE_HEADER,
    )
    # And a body changed on the way does not verify
    from relayflow.triggers.signatures import SignatureRejected

    with pytest.raises(SignatureRejected):
        verify_delivery(
            "github",
            sent.body + b" ",
            sent.headers,
            [SECRET],
            now=0,
            window_seconds=60,
            header=WEBHOOK_SIGNATURE_HEADER,
        )
