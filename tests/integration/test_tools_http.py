"""HTTP tools against a real HTTP server on 127.0.0.1, with auth secrets in moto's Secrets
Manager and SSM (through the local runtime)."""

from __future__ import annotations

import base64
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
    load_event,
    load_handler,
    set_step_config,
    step_config,
)

from relayflow.errors import (
    ExpressionError,
    HttpError,
    InvalidArgsError,
    SsrfBlocked,
    ToolNotFound,
    TransientError,
)
from relayflow.local import LocalRuntime
from relayflow.net.http import verify_signature
from relayflow.settings import override_settings
from relayflow.tenancy import acting_for
from relayflow.tools import run_tool

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration
DOC: dict[str, Any] = {
    "run": {"id": "run-1", "workflow_id": "wf"},
    "trigger": {"customer": "c-9", "amount": 240},
    "steps": {},
}
TOKEN = "tok-7f3a-very-secret"
SECRETS = {
    "relayflow/local/acme/billing/token": TOKEN,
    "relayflow/local/acme/billing/keys": json.dumps({"api_key": "key-123", "other": "x"}),
    "relayflow/local/acme/billing/hmac": "hmac-shared-secret",
}


# --------------------------------------------------------------------------- a test server


server = pytest.fixture(fresh_allowed_server, name="server")


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with runtime_with_secrets(SECRETS) as rt:
        rt.client("ssm").put_parameter(
            Name="/relayflow/local/acme/billing/password", Value="pa:ss w0rd", Type="SecureString"
        )
        yield rt


@pytest.fixture(autouse=True)
def acting_for_acme() -> Iterator[None]:
    # The step handler opens this scope around a step; these tests call the tool directly.
    with acting_for("acme"):
        yield


def tool(server: Server, **extra: Any) -> dict[str, Any]:
    return {"base_url": f"{server.url}/v1", "timeout_seconds": 30, **extra}


def call(name: str, args: Any, declaration: dict[str, Any], doc: dict[str, Any] = DOC) -> Any:
    return run_tool(name, args, doc=doc, http_tool=declaration)


INVOICES = {
    "create_invoice": {
        "method": "POST",
        "path": "/invoices",
        "query": {"notify": "{{ args.amount > 100 }}", "skip": None},
        "headers": {"Idempotency-Key": "{{ run.id }}-{{ args.customer }}"},
        "body": {"customer": "{{ args.customer }}", "amount": "{{ args.amount }}"},
    },
    "get_invoice": {"method": "GET", "path": "/invoices/{{ args.id }}"},
}


# --------------------------------------------------------------------------- calls


def test_an_operation_renders_args_into_path_query_headers_and_body(runtime, server):
    # Given an operation whose templates read args and the document
    server.reply = lambda r: (
        201,
        {"Content-Type": "application/json", "Location": "/v1/invoices/inv-1", "X-Other": "y"},
        b'{"id": "inv-1"}',
    )
    declaration = tool(server, headers={"Accept": "application/json"}, operations=INVOICES)
    # When the step calls it with rendered args
    out = call("http.billing.create_invoice", {"customer": "c-9", "amount": 240}, declaration)
    # Then the server saw exactly the rendered request
    (sent,) = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/invoices")
    assert sent.query == {"notify": ["true"]}
    assert sent.headers["idempotency-key"] == "run-1-c-9"
    assert sent.headers["accept"] == "application/json"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == b'{"customer":"c-9","amount":240}'
    # And the output is the status, the kept headers and the parsed body
    assert out == {
        "status": 201,
        "headers": {"content-type": "application/json", "location": "/v1/invoices/inv-1"},
        "body": {"id": "inv-1"},
    }


def test_a_generic_call_takes_method_path_query_and_body_from_args(runtime, server):
    out = call(
        "http.billing",
        {
            "method": "put",
            "path": "invoices/inv-1",
            "query": {"v": 2, "tag": ["a", "b"]},
            "body": "plain",
        },
        tool(server),
    )
    (sent,) = server.requests
    assert (sent.method, sent.path) == ("PUT", "/v1/invoices/inv-1")
    assert sent.query == {"v": ["2"], "tag": ["a", "b"]}
    assert sent.headers["content-type"] == "text/plain; charset=utf-8"
    assert sent.body == b"plain"
    assert out["status"] == 200
    assert out["headers"] == {"content-type": "application/json", "etag": '"v1"'}


@pytest.mark.parametrize(
    "path", ["https://evil.example/x", "//evil.example/x", "/../admin", "/a/%2e%2e/b", "\\x"]
)
def test_a_path_cannot_leave_the_base_url(runtime, server, path):
    with pytest.raises(InvalidArgsError) as info:
        call("http.billing", {"path": path}, tool(server))
    assert info.value.details["field"] == "path"
    assert server.requests == []


def test_a_path_with_an_at_sign_stays_on_the_declared_host(runtime, server):
    call("http.billing", {"path": "@evil.example/x"}, tool(server))
    (sent,) = server.requests
    assert sent.path == "/v1/@evil.example/x"


# --------------------------------------------------------------------------- auth


def sent_headers(server: Server, auth: dict[str, Any]) -> dict[str, str]:
    """The headers of the request a call through a tool with ``auth`` sent."""
    call("http.billing", {}, tool(server, auth=auth))
    return server.requests[0].headers


def test_bearer_auth_reads_the_token_from_secrets_manager(runtime, server):
    headers = sent_headers(server, {"type": "bearer", "token": {"name": "billing/token"}})
    assert headers["authorization"] == f"Bearer {TOKEN}"


def test_basic_auth_reads_the_password_from_ssm(runtime, server):
    password = {"name": "billing/password", "source": "ssm"}
    headers = sent_headers(server, {"type": "basic", "username": "svc", "password": password})
    scheme, encoded = headers["authorization"].split(" ")
    assert scheme == "Basic"
    assert base64.b64decode(encoded).decode() == "svc:pa:ss w0rd"


def test_api_key_auth_reads_one_field_of_a_json_secret(runtime, server):
    key = {"name": "billing/keys", "field": "api_key"}
    headers = sent_headers(server, {"type": "api_key", "header": "X-Api-Key", "key": key})
    assert headers["x-api-key"] == "key-123"


def test_hmac_auth_signs_the_exact_body(runtime, server):
    declaration = tool(
        server,
        auth={"type": "hmac", "header": "X-Signature", "secret": {"name": "billing/hmac"}},
        operations=INVOICES,
    )
    call("http.billing.create_invoice", {"customer": "c-1", "amount": 5}, declaration)
    (sent,) = server.requests
    assert verify_signature(sent.body, "hmac-shared-secret", sent.headers["x-signature"])
    assert not verify_signature(sent.body + b" ", "hmac-shared-secret", sent.headers["x-signature"])


def test_a_missing_secret_is_invalid_args_and_sends_nothing(runtime, server):
    declaration = tool(server, auth={"type": "bearer", "token": {"name": "billing/absent"}})
    with pytest.raises(InvalidArgsError) as info:
        call("http.billing", {}, declaration)
    assert "billing/absent" in info.value.message
    assert server.requests == []


def test_a_missing_secret_field_names_the_field_not_the_value(runtime, server):
    declaration = tool(
        server, auth={"type": "api_key", "key": {"name": "billing/keys", "field": "nope"}}
    )
    with pytest.raises(InvalidArgsError) as info:
        call("http.billing", {}, declaration)
    assert "'nope'" in info.value.message
    assert "key-123" not in str(info.value.to_dict())


# --------------------------------------------------------------------------- failures


def test_a_4xx_answer_is_an_http_error_with_status_and_body(runtime, server):
    server.reply = lambda r: (404, {"Content-Type": "application/json"}, b'{"error": "no invoice"}')
    declaration = tool(
        server, auth={"type": "bearer", "token": {"name": "billing/token"}}, operations=INVOICES
    )
    with pytest.raises(HttpError) as info:
        call("http.billing.get_invoice", {"id": "inv-9"}, declaration)
    assert type(info.value).__name__ == "Relayflow.HttpError"
    assert info.value.details["status"] == 404
    assert "no invoice" in info.value.details["body"]
    assert TOKEN not in str(info.value.to_dict())


def test_a_503_answer_is_transient(runtime, server):
    server.reply = lambda r: (503, {"Retry-After": "7"}, b"busy")
    with pytest.raises(TransientError) as info:
        call("http.billing", {}, tool(server))
    assert info.value.details["status"] == 503
    assert info.value.details["retry_after"] == 7


def test_a_slow_server_times_out_as_transient(runtime, server):
    # Given a server that answers only once the test is over: only the tool's own timeout
    # can end the call
    answer = threading.Event()

    def slow(received: Received) -> Reply:
        answer.wait(60)
        return 200, {}, b""

    server.reply = slow
    declaration = {**tool(server), "timeout_seconds": 0.2}
    try:
        with pytest.raises(TransientError) as info:
            call("http.billing", {}, declaration)
    finally:
        answer.set()
    assert "timed out after 0.2 s" in info.value.message


def test_a_metadata_base_url_is_blocked(runtime):
    declaration = {"base_url": "http://169.254.169.254/latest", "timeout_seconds": 1}
    with override_settings(ssrf_allow=["127.0.0.1"]), pytest.raises(SsrfBlocked) as info:
        call("http.meta", {"path": "/meta-data/iam"}, declaration)
    assert info.value.details["rule"] == "metadata"


def test_unknown_operations_and_missing_declarations_are_tool_not_found(runtime, server):
    with pytest.raises(ToolNotFound):
        call("http.billing.refund", {}, tool(server, operations=INVOICES))
    with pytest.raises(ToolNotFound):
        run_tool("http.billing", {}, doc=DOC, http_tool=None)
    assert server.requests == []


def test_bad_generic_args_and_bad_templates_are_named_errors(runtime, server):
    with pytest.raises(InvalidArgsError) as info:
        call("http.billing", {"methd": "GET"}, tool(server))
    assert info.value.details["field"] == "methd"
    with pytest.raises(InvalidArgsError):
        call("http.billing", {"method": "TRACE"}, tool(server))
    with pytest.raises(ExpressionError):
        call("http.billing.get_invoice", {}, tool(server, operations=INVOICES))
    assert server.requests == []


# --------------------------------------------------------------------------- handler

CONTEXT = SimpleNamespace(function_name="relayflow-tool", aws_request_id="req-1")


def test_tool_handler_runs_the_http_samples_against_a_local_server(runtime, server):
    # Given the samples' secrets, and their base URL pointed at the local server
    runtime.client("secretsmanager").create_secret(
        Name="relayflow/local/acme/billing-token", SecretString="sample-token"
    )
    runtime.client("secretsmanager").create_secret(
        Name="relayflow/local/acme/billing", SecretString=json.dumps({"api_key": "sample-key"})
    )
    handler = load_handler("tool").handler
    create = load_event("tool", "http_create_invoice")
    fetch = load_event("tool", "http_get_invoice")
    for event in (create, fetch):
        config = step_config(event)
        config["http_tool"]["base_url"] = f"{server.url}/v1"
        set_step_config(event, config)
    server.reply = lambda r: (201, {"Content-Type": "application/json"}, b'{"id": "inv-42"}')
    # When both samples run
    created = handler(create, CONTEXT)
    fetched = handler(fetch, CONTEXT)
    # Then each reached the server with its auth and rendered request
    first, second = server.requests
    assert first.headers["authorization"] == "Bearer sample-token"
    assert first.headers["idempotency-key"] == "run-0011-invoice"
    assert first.query == {"notify": ["true"]}
    assert json.loads(first.body) == {"customer": "c-9", "amount": 240}
    assert (second.method, second.path) == ("GET", "/v1/invoices/inv-42")
    assert second.headers["x-api-key"] == "sample-key"
    assert created["output"]["body"] == {"id": "inv-42"}
    assert fetched["output"]["status"] == 201


def test_an_api_key_tool_follows_no_redirect_so_the_key_stays_on_its_host(runtime, server):
    server.reply = lambda r: (
        (302, {"Location": "/v1/elsewhere"}, b"") if r.path == "/v1/start" else Server.echo(r)
    )
    keyed = tool(
        server, auth={"type": "api_key", "key": {"name": "billing/keys", "field": "api_key"}}
    )
    with pytest.raises(HttpError) as info:
        call("http.billing", {"path": "/start"}, keyed)
    assert info.value.details["status"] == 302
    assert [r.path for r in server.requests] == ["/v1/start"]
    # A bearer tool follows it (the client drops Authorization if the origin changed)
    bearer = tool(server, auth={"type": "bearer", "token": {"name": "billing/token"}})
    out = call("http.billing", {"path": "/start"}, bearer)
    assert out["body"] == {"method": "GET", "path": "/v1/elsewhere"}
