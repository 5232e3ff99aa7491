"""The JSON intake policy end to end (issue 16): hostile bodies sent over HTTP to a LocalServer
are refused with a 4xx that names the path and the rule, and nothing they carry can break a
stored approval, waitpoint, run or workflow afterwards."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from http_api import finished_run, publish, start_run
from relayflow_testing import eventually
from workflow_shapes import long_waitpoint, webhook_echo

from relayflow.intake import MAX_DEPTH

pytestmark = pytest.mark.integration

APPROVAL = {
    "id": "intake-approval",
    "start": "ask",
    "steps": {
        "ask": {"type": "approval", "title": "Go?", "options": ["approve", "reject"]},
    },
}
WAITPOINT = long_waitpoint("intake-waitpoint")
ECHO = webhook_echo("intake-echo", "intake-open")
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]
JSON_HEADERS = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def client(api: httpx.Client) -> httpx.Client:
    publish(api, APPROVAL, WAITPOINT, ECHO)
    return api


def nested(depth: int, leaf: str = "1") -> str:
    """JSON text of ``depth`` nested arrays around ``leaf``."""
    return "[" * depth + leaf + "]" * depth


def refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code, body
    assert "Traceback" not in response.text
    return body


def waitpoint_of(client: httpx.Client, run_id: str) -> dict[str, Any]:
    """The run's waitpoint, once the run waits at it."""

    def waiting() -> Any:
        items = client.get("/waitpoints", params={"run_id": run_id}).json()["items"]
        return items[0] if items else None

    return eventually(waiting)


def echo_with(literal: str) -> str:
    """intake-echo's definition as JSON text, its mapping's value replaced by ``literal``."""
    return json.dumps(ECHO).replace('"{{ trigger }}"', literal)


def start_echo(client: httpx.Client, body: str | bytes) -> httpx.Response:
    """The answer to starting a run of intake-echo with the JSON request body ``body``."""
    return client.post("/workflows/intake-echo/runs", content=body, headers=JSON_HEADERS)


def put_echo(
    client: httpx.Client, definition: str, content_type: str = "application/json"
) -> httpx.Response:
    """The answer to putting ``definition`` (text of ``content_type``) as intake-echo."""
    return client.put(
        "/workflows/intake-echo", content=definition, headers={"Content-Type": content_type}
    )


# ----------------------------------------------------------------------------- non-finite numbers


@pytest.mark.parametrize("literal", NON_FINITE)
def test_non_finite_approval_data_is_refused_and_the_approval_stays_usable(client, literal):
    # Given a pending approval
    run_id = start_run(client, "intake-approval")

    def pending() -> Any:
        items = client.get("/approvals").json()["items"]
        return next((a for a in items if a["run_id"] == run_id), None)

    approval_id = eventually(pending)["approval_id"]
    path = f"/approvals/{approval_id}"
    # When it is answered with a non-finite number in its data
    text = f'{{"option": "approve", "data": {{"amount": {literal}}}}}'
    answer = client.post(f"{path}/respond", content=text, headers=JSON_HEADERS)
    # Then the answer is a 422 naming the field, and nothing was stored
    body = refused(answer, 422, "unprocessable")
    assert body["details"][0]["path"] == "body.data.amount"
    assert body["details"][0]["type"] == "non_finite_number"
    assert client.get(path).json()["status"] == "pending"
    for status in ("pending", "decided"):
        assert client.get("/approvals", params={"status": status}).status_code == 200
    # And a valid answer still decides it and the run ends
    ok = client.post(f"{path}/respond", json={"option": "approve", "data": {"amount": 3}})
    assert ok.status_code == 200, ok.text
    run = finished_run(client, run_id, timeout=60)
    assert run["status"] == "succeeded"
    assert client.get("/approvals", params={"status": "decided"}).status_code == 200


@pytest.mark.parametrize("literal", NON_FINITE)
def test_non_finite_waitpoint_data_is_refused_and_the_waitpoint_stays_usable(client, literal):
    run_id = start_run(client, "intake-waitpoint")
    waitpoint_id = waitpoint_of(client, run_id)["waitpoint_id"]
    path = f"/waitpoints/{waitpoint_id}"
    text = f'{{"data": {{"total": [1, {literal}]}}}}'
    answer = client.post(f"{path}/complete", content=text, headers=JSON_HEADERS)
    body = refused(answer, 422, "unprocessable")
    assert body["details"][0]["path"] == "body.data.total[1]"
    assert client.get(path).json()["status"] == "pending"
    ok = client.post(f"{path}/complete", json={"data": {"total": 2}})
    assert ok.status_code == 200, ok.text
    run = finished_run(client, run_id, timeout=60)
    assert run["status"] == "succeeded"
    assert run["output"]["steps"]["wait"]["output"] == {"total": 2}


def test_an_empty_key_in_waitpoint_data_is_refused_and_the_waitpoint_stays_readable(client):
    # An empty key was stored (moto), and every later read of the waitpoint answered 500
    run_id = start_run(client, "intake-waitpoint")
    path = f"/waitpoints/{waitpoint_of(client, run_id)['waitpoint_id']}"
    answer = client.post(f"{path}/complete", json={"data": {"": 1}})
    body = refused(answer, 422, "unprocessable")
    assert body["details"][0] == {
        "path": "body.data",
        "type": "key_length",
        "message": body["message"],
    }
    read = client.get(path)
    assert read.status_code == 200 and read.json()["status"] == "pending"


@pytest.mark.parametrize("literal", NON_FINITE)
def test_non_finite_run_input_is_refused_not_turned_into_null(client, literal):
    text = f'{{"input": {{"n": {literal}}}}}'
    body = refused(start_echo(client, text), 422, "unprocessable")
    assert body["details"][0]["path"] == "body.input.n"


def test_a_nan_literal_in_a_definition_is_a_422_not_a_503(client):
    definition = echo_with("NaN")
    body = refused(put_echo(client, definition), 422, "invalid_definition")
    assert {(p["path"], p["rule"]) for p in body["details"]} >= {
        ("steps.echo.mapping.got", "non-finite-number")
    }


def test_an_infinite_number_in_an_event_is_refused(client):
    text = '{"source": "shop", "detail_type": "order", "detail": {"total": -1e999}}'
    answer = client.post("/events", content=text, headers=JSON_HEADERS)
    body = refused(answer, 422, "unprocessable")
    assert body["details"][0]["path"] == "body.detail.total"


# ----------------------------------------------------------------------------- deep nesting


def test_a_run_input_nested_past_the_limit_is_refused_with_the_limit_named(client):
    text = '{"input": ' + nested(300) + "}"
    body = refused(start_echo(client, text), 400, "bad_request")
    assert f"{MAX_DEPTH} levels" in body["message"]


def test_a_run_input_at_the_limit_runs_and_reads_back(client):
    # {"input": [[...1...]]}: the body object is one level, the arrays the rest
    text = '{"input": ' + nested(MAX_DEPTH - 1) + "}"
    answer = start_echo(client, text)
    assert answer.status_code == 201, answer.text
    run_id = answer.json()["run_id"]
    run = finished_run(client, run_id, timeout=60)
    assert run["status"] == "succeeded", run
    assert client.get("/workflows/intake-echo/runs").status_code == 200


def test_a_webhook_payload_nested_past_the_limit_is_refused(client, server):
    answer = httpx.post(f"{server.url}/hooks/intake-open", content=nested(300), timeout=30)
    body = refused(answer, 400, "bad_request")
    assert f"{MAX_DEPTH} levels" in body["message"]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_a_definition_nested_past_the_limit_is_a_400_not_a_5xx(client, fmt):
    mapping: Any = 1
    for _ in range(300):
        mapping = {"a": mapping}
    definition = {**ECHO, "steps": {"echo": {"type": "transform", "mapping": mapping}}}
    text = json.dumps(definition)  # JSON is YAML too (flow style)
    content_type = "application/json" if fmt == "json" else "application/yaml"
    body = refused(put_echo(client, text, content_type), 400, "bad_request")
    assert [p["rule"] for p in body["details"]] == ["depth"]
    assert body["details"][0]["path"].startswith("steps.echo.mapping.a.a")
    assert f"{MAX_DEPTH} levels" in body["message"]


# ----------------------------------------------------------------------------- text


def test_a_lone_surrogate_in_a_run_input_is_a_400(client):
    text = '{"input": {"name": "\\ud800"}}'
    body = refused(start_echo(client, text), 400, "bad_request")
    assert body["details"][0]["path"] == "body.input.name"


def test_a_lone_surrogate_in_a_definition_is_a_400(client):
    definition = echo_with('"\\udc00"')
    body = refused(put_echo(client, definition), 400, "bad_request")
    assert [(p["path"], p["rule"]) for p in body["details"]] == [
        ("steps.echo.mapping.got", "lone-surrogate")
    ]


def test_a_body_that_is_not_utf8_is_a_400(client):
    refused(start_echo(client, b'{"input": "\xff\xfe"}'), 400, "bad_request")


# ----------------------------------------------------------------------------- Idempotency-Key


def test_the_idempotency_key_limit_is_one_number_everywhere():
    from relayflow.api.resolver import MAX_IDEMPOTENCY_KEY
    from relayflow.control.limits import MAX_IDEMPOTENCY_KEY as SERVICE_LIMIT
    from relayflow.control.webhook_intake import MAX_IDEMPOTENCY_KEY as WEBHOOK_LIMIT

    assert MAX_IDEMPOTENCY_KEY == SERVICE_LIMIT == WEBHOOK_LIMIT == 256


def test_a_256_character_idempotency_key_starts_one_run_and_257_is_a_400(client):
    from relayflow.control.limits import idempotent_run_id

    # Given the longest key the docs allow
    key = "k" * 256
    first = client.post(
        "/workflows/intake-echo/runs", json={"input": {}}, headers={"Idempotency-Key": key}
    )
    again = client.post(
        "/workflows/intake-echo/runs", json={"input": {}}, headers={"Idempotency-Key": key}
    )
    # Then it starts one run, whose id (the execution name) is 32 hex digits
    assert first.status_code == 201, first.text
    assert again.status_code == 200 and again.json()["run_id"] == first.json()["run_id"]
    assert first.json()["run_id"] == idempotent_run_id("local", "intake-echo", key)
    # And one character more is refused with the header named
    longer = client.post(
        "/workflows/intake-echo/runs", json={"input": {}}, headers={"Idempotency-Key": key + "k"}
    )
    body = refused(longer, 400, "bad_request")
    assert "idempotency" in json.dumps(body["details"]).lower()


def test_the_wait_service_refuses_unstorable_data_from_any_caller(client):
    from relayflow.control.errors import Unprocessable
    from relayflow.control.waits import get_wait_service

    # Given a pending approval and a caller that is not the API (no JSON text to parse)
    run_id = start_run(client, "intake-approval")

    def pending() -> Any:
        items = client.get("/approvals").json()["items"]
        return next((a for a in items if a["run_id"] == run_id), None)

    approval_id = eventually(pending)["approval_id"]
    # When it answers with a float the JSON text could not even carry
    with pytest.raises(Unprocessable) as caught:
        get_wait_service().respond(
            "local", approval_id, "approve", {"rate": [float("inf")]}, responder="test"
        )
    # Then nothing is stored, and the approval still reads and lists as pending
    assert caught.value.details == [
        {
            "path": "data.rate[0]",
            "rule": "non-finite-number",
            "message": "data.rate[0]: inf is not a finite number",
        }
    ]
    assert client.get(f"/approvals/{approval_id}").json()["status"] == "pending"
    assert client.get("/approvals", params={"status": "decided"}).status_code == 200
