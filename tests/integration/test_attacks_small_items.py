"""The small items of issue 25's attack pass, each tried as an attacker would on
``relayflow serve`` and each failing closed:

- a body in a format no route reads (multipart with or without a boundary, a form, text) is
  415 before any action, never a run started without its input, never a 500;
- YAML tags that build values JSON cannot hold are a definition problem (422 / exit 2);
- a captured signed webhook delivery replayed under a fresh delivery id starts nothing;
- the guest approval form refuses integers over 38 digits, as the API does;
- a ``null`` body completing or failing a waitpoint, or continuing a step-through run, is 422;
- a body over 10 MB gets its 413 after the server drained it, so the client reads it;

and numbered item 5: a public webhook whose ``input_schema`` has a catastrophic pattern
answers the attack input at once (RE2), instead of stalling ``serve``.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from http_api import run_ids
from relayflow_testing import bootstrap_client, eventually
from workflow_shapes import two_transforms

from relayflow.api.approval_page import FIELD_PREFIX, FormError, form_to_data
from relayflow.cli.main import main
from relayflow.local.serve import LocalServer
from relayflow.local.serve_http import MAX_REQUEST_BYTES
from relayflow.triggers.signatures import sign

pytestmark = pytest.mark.integration

SUFFIX = uuid.uuid4().hex[:8]
SECRET = "replay-secret"
ECHO = {
    "id": "echo",
    "start": "echo",
    "steps": {"echo": {"type": "transform", "mapping": {"got": "{{ trigger }}"}}},
    "triggers": [
        {
            "type": "webhook",
            "slug": f"gh-{SUFFIX}",
            "secret": {"name": f"attacks/{SUFFIX}"},
            "signature_scheme": "github",
        },
        {
            "type": "webhook",
            "slug": f"rf-{SUFFIX}",
            "secret": {"name": f"attacks/{SUFFIX}"},
            "replay_window_seconds": 300,
        },
    ],
}
WAITPOINT = {
    "id": "callback",
    "start": "wait",
    "steps": {
        "wait": {"type": "waitpoint", "timeout_seconds": 600, "on_success": "done"},
        "done": {"type": "transform", "mapping": {"got": "{{ steps.wait.output }}"}},
    },
}
EVIL = {
    "id": "evil",
    "input_schema": {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}},
    },
    "start": "echo",
    "steps": {"echo": {"type": "transform", "mapping": {"got": "{{ trigger }}"}}},
    "triggers": [{"type": "webhook", "slug": f"evil-{SUFFIX}"}],
}
STEPPED = two_transforms("stepped")


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(time_scale=0.001) as local:
        assert local.runtime is not None
        local.runtime.client("secretsmanager").create_secret(
            Name=f"relayflow/local/local/attacks/{SUFFIX}", SecretString=SECRET
        )
        local.set_rate_limit(per_second=1000, burst=10_000)
        yield local


@pytest.fixture(scope="module")
def api(server: LocalServer) -> Iterator[httpx.Client]:
    with bootstrap_client(server) as client:
        for definition in (ECHO, WAITPOINT, STEPPED, EVIL):
            put = client.put(f"/workflows/{definition['id']}", json=definition)
            assert put.status_code in (200, 201), put.text
        yield client


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code, body
    return body


# --------------------------------------------------------------------------- media types

MULTIPART = (
    b'--XX\r\nContent-Disposition: form-data; name="input"\r\n\r\n{"amount": 100}\r\n--XX--\r\n'
)


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        pytest.param("multipart/form-data; boundary=XX", MULTIPART, id="multipart"),
        pytest.param("multipart/form-data", MULTIPART, id="multipart-without-boundary"),
        pytest.param(
            "application/x-www-form-urlencoded", b"input=%7B%22amount%22%3A100%7D", id="form"
        ),
        pytest.param("text/plain", b'{"input": {"amount": 100}}', id="text"),
    ],
)
def test_a_body_no_route_reads_is_415_and_starts_nothing(api, content_type, body):
    # Given a workflow and its runs so far
    before = run_ids(api, "echo")
    # When a run is started with a body in a format the API does not read
    answer = api.post("/workflows/echo/runs", content=body, headers={"Content-Type": content_type})
    # Then it is 415 with the stable code, and no run started (with or without its input)
    error = error_of(answer, 415, "unsupported_media_type")
    assert "application/json" in error["message"]
    assert run_ids(api, "echo") == before


def test_a_waitpoint_is_not_completed_from_a_form_body(api):
    # Given a pending waitpoint
    run_id = api.post("/workflows/callback/runs", json={}).json()["run_id"]
    waitpoint = eventually(
        lambda: api.get("/waitpoints", params={"run_id": run_id}).json()["items"]
    )[0]
    # When it is completed with a multipart body
    answer = api.post(
        f"/waitpoints/{waitpoint['waitpoint_id']}/complete",
        content=MULTIPART,
        headers={"Content-Type": "multipart/form-data; boundary=XX"},
    )
    # Then that is 415 and it is still pending
    error_of(answer, 415, "unsupported_media_type")
    assert api.get(f"/waitpoints/{waitpoint['waitpoint_id']}").json()["status"] == "pending"


def test_json_with_a_charset_or_a_json_suffix_is_still_read(api):
    answer = api.post(
        "/workflows/echo/runs",
        content=b'{"input": {"amount": 1}}',
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert answer.status_code == 201, answer.text


# --------------------------------------------------------------------------- YAML tags

YAML_TAGS = {
    "binary": ("description: !!binary aGVsbG8=", "steps.a.description", "!!binary"),
    "set": ("description: !!set {x, y}", "steps.a.description", "!!set"),
    "timestamp-value": (
        "description: !!timestamp 2030-01-01",
        "steps.a.description",
        "!!timestamp",
    ),
    "timestamp-key": (
        "mapping: {!!timestamp 2030-01-01: 1}",
        "steps.a.mapping.2030-01-01",
        "!!timestamp",
    ),
    "python": ("mapping: {x: !!python/tuple [1, 2]}", "steps.a.mapping.x", "!!python/tuple"),
}


@pytest.mark.parametrize("case", YAML_TAGS, ids=list(YAML_TAGS))
def test_a_yaml_tag_json_cannot_hold_is_a_definition_problem(api, tmp_path, capsys, case):
    field, path, tag = YAML_TAGS[case]
    kind = "noop" if field.startswith("description") else "transform"
    text = f"id: tagged\nstart: a\nsteps:\n  a:\n    type: {kind}\n    {field}\n"
    # When it is PUT as YAML
    answer = api.put(
        "/workflows/tagged", content=text.encode(), headers={"Content-Type": "application/yaml"}
    )
    # Then it is 422 invalid_definition naming the path and the rule
    error = error_of(answer, 422, "invalid_definition")
    assert [(p["path"], p["rule"]) for p in error["details"]] == [(path, "yaml-tag")]
    assert tag in error["details"][0]["message"]
    # And `relayflow validate` exits 2 with the same problem
    source = tmp_path / "tagged.yaml"
    source.write_text(text)
    assert main(["validate", str(source)]) == 2
    assert f"{path}: the tag {tag}" in capsys.readouterr().err


# --------------------------------------------------------------------------- webhook replay


def test_a_captured_delivery_replayed_with_a_fresh_delivery_id_starts_nothing(server, api):
    public = httpx.Client(base_url=server.url, timeout=30)
    body = json.dumps({"order": uuid.uuid4().hex}).encode()
    for scheme, hook, header in (
        ("github", f"gh-{SUFFIX}", "X-GitHub-Delivery"),
        ("relayflow", f"rf-{SUFFIX}", "X-Relayflow-Delivery"),
    ):
        signature_header = "X-Hub-Signature-256" if scheme == "github" else "X-Relayflow-Signature"
        signature = sign(scheme, body, SECRET, None if scheme == "github" else int(time.time()))
        captured = {"Content-Type": "application/json", signature_header: signature}
        before = run_ids(api, "echo")
        # Given a signed delivery the endpoint accepted
        first = public.post(f"/hooks/{hook}", content=body, headers={**captured, header: "d-1"})
        assert first.status_code == 202, first.text
        # When an attacker who captured it sends it again under fresh delivery ids
        replays = [
            public.post(f"/hooks/{hook}", content=body, headers={**captured, header: fresh})
            for fresh in ("d-2", uuid.uuid4().hex)
        ]
        # Then each is the first answer again, marked a replay, and one run exists
        for replay in replays:
            assert replay.status_code == 202, replay.text
            assert replay.json() == first.json()
            assert replay.headers["Idempotent-Replayed"] == "true"
        assert run_ids(api, "echo") - before == {first.json()["run_id"]}
    public.close()


# --------------------------------------------------------------------------- guest form


def test_the_guest_form_refuses_integers_over_38_digits_as_the_api_does(api):
    schema = {
        "type": "object",
        "properties": {"count": {"type": "integer"}, "amount": {"type": "number"}},
    }
    for field in ("count", "amount"):
        # Given an integer of 39 digits typed into a form field
        form = {FIELD_PREFIX + field: ["9" * 39]}
        # Then the form refuses it, naming the same rule as the API's intake
        with pytest.raises(FormError) as info:
            form_to_data(schema, form)
        assert info.value.problems == [f"{field}: an integer of 39 digits is longer than 38 digits"]
        # And 38 digits (what the API keeps) are taken as the exact integer
        assert form_to_data(schema, {FIELD_PREFIX + field: ["9" * 38]}) == {field: int("9" * 38)}
    # The API refuses the same value with the same words
    refused = api.post(
        "/workflows/echo/runs",
        content=b'{"input": {"count": ' + b"9" * 39 + b"}}",
        headers={"Content-Type": "application/json"},
    )
    assert "an integer of 39 digits is longer than 38 digits" in refused.json()["message"]


# --------------------------------------------------------------------------- null bodies


def test_a_null_body_does_not_complete_or_fail_a_waitpoint(api):
    # Given a pending waitpoint
    run_id = api.post("/workflows/callback/runs", json={}).json()["run_id"]
    waitpoint = eventually(
        lambda: api.get("/waitpoints", params={"run_id": run_id}).json()["items"]
    )[0]
    path = f"/waitpoints/{waitpoint['waitpoint_id']}"
    null = {"content": b"null", "headers": {"Content-Type": "application/json"}}
    # When it is completed, or failed, with a body of JSON null
    for action in ("complete", "fail"):
        answer = api.post(f"{path}/{action}", **null)
        # Then it is 422 and the waitpoint is still pending
        error = error_of(answer, 422, "unprocessable")
        assert error["details"][0]["path"] == "body"
    assert api.get(path).json()["status"] == "pending"
    # And no body at all still completes it (with no data)
    done = api.post(f"{path}/complete")
    assert done.status_code == 200, done.text


def test_a_null_body_does_not_continue_a_step_through_run(api):
    started = api.post("/workflows/stepped/runs", json={"step_through": True})
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    eventually(
        lambda: [
            w
            for w in api.get("/waitpoints", params={"run_id": run_id}).json()["items"]
            if w["label"] == "step-through" and w["status"] == "pending"
        ]
    )
    answer = api.post(
        f"/runs/{run_id}/continue", content=b"null", headers={"Content-Type": "application/json"}
    )
    error_of(answer, 422, "unprocessable")
    released = api.post(f"/runs/{run_id}/continue")
    assert released.status_code == 200 and released.json()["released"] == "one"


def test_a_null_body_does_not_start_a_run(api):
    before = run_ids(api, "echo")
    answer = api.post(
        "/workflows/echo/runs", content=b"null", headers={"Content-Type": "application/json"}
    )
    error_of(answer, 422, "unprocessable")
    assert run_ids(api, "echo") == before


# --------------------------------------------------------------------------- 10 MB


def _chunked(body: bytes, size: int = 1 << 20) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_over_10_mb_gets_its_413_after_it_was_sent_whole(server, framing):
    # Given a client that sends the whole body before it reads the answer (as curl does)
    address = urlsplit(server.url)
    body = b"x" * (MAX_REQUEST_BYTES + 1)
    if framing == "chunked":
        # The server finds out chunk by chunk: 20 MB are still to come when it does
        framed, length = _chunked(body * 3), "Transfer-Encoding: chunked"
    else:
        framed, length = body, f"Content-Length: {len(body)}"
    head = (
        f"POST /workflows/echo/runs HTTP/1.1\r\nHost: {address.netloc}\r\n"
        f"Content-Type: application/json\r\n{length}\r\n\r\n"
    ).encode()
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        # When it sends it
        sock.sendall(head + framed)
        answer = b""
        while b"\r\n\r\n" not in answer:
            piece = sock.recv(65536)
            if not piece:
                break
            answer += piece
    # Then it reads a 413 (the server drained the body: no reset, no broken pipe)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]


# --------------------------------------------------------------------------- ReDoS


def test_a_public_webhooks_catastrophic_pattern_answers_the_attack(server, api):
    # Given an unsigned public webhook whose input_schema has ^(a+)+$ (2**40 ways to fail on
    # a backtracking engine for this input; 26 characters took 6.5 s before)
    public = httpx.Client(base_url=server.url, timeout=30)
    attack = json.dumps({"name": "a" * 40 + "!"}).encode()
    # When anybody delivers the attack, and then a matching payload
    refused = public.post(f"/hooks/evil-{SUFFIX}", content=attack)
    accepted = public.post(f"/hooks/evil-{SUFFIX}", content=json.dumps({"name": "a" * 40}))
    public.close()
    # Then the attack is 422 invalid_input naming the pointer and the rule, and the match runs
    error = error_of(refused, 422, "invalid_input")
    assert [(v["pointer"], v["rule"]) for v in error["details"]] == [("/name", "pattern")]
    assert accepted.status_code == 202, accepted.text
