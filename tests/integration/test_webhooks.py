"""Inbound webhooks end to end: a workflow declares webhook triggers (PUT /workflows/{id}),
then real HTTP deliveries (httpx) to ``POST /hooks/{slug}`` on a LocalServer, which runs
functions/webhook for them against the local runtime (moto: DynamoDB, Secrets Manager, Step
Functions). Every refusal is checked to start no run, counted through GET /workflows/{id}/runs.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from relayflow_testing import bootstrap_client, load_event, load_handler

from relayflow.local.lambda_endpoint import LambdaContext
from relayflow.local.serve import LocalServer
from relayflow.triggers.signatures import sign

pytestmark = pytest.mark.integration

TIME_SCALE = 0.01
WORKFLOW = "inbound"
DELETED_WORKFLOW = "inbound-retired"
SAMPLES_WORKFLOW = "inbound-samples"
#: Slugs are global: a suffix keeps this module's apart from any other registration.
SUFFIX = uuid.uuid4().hex[:8]
#: What the sample events (events/webhook/*.json) were signed with, at SAMPLE_TIME.
SAMPLE_SECRETS = {
    "relayflow": "whsec_sample_relayflow_not_real",
    "github": "ghsec_sample_github_not_real",
    "stripe": "whsec_sample_stripe_not_real",
}
SAMPLE_TIME = 1767225600


def slug(name: str) -> str:
    return f"{name}-{SUFFIX}"


def secret_name(name: str) -> str:
    """How a definition names the secret: inside its tenant's folder."""
    return f"tests/{SUFFIX}/{name}"


def stored_name(name: str) -> str:
    """Where the operator stored it: the serve key's tenant, local, under the prefix."""
    return f"relayflow/local/local/{secret_name(name)}"


SECRETS = {
    "relayflow": "rf-secret-one",
    "github": "gh-secret-one",
    "stripe": json.dumps({"signing_secret": "st-secret-one", "note": "a JSON secret"}),
    "rotating": "rot-secret-v1",
    "guarded": "gd-secret-one",
}


def echo_workflow(workflow_id: str, triggers: list[dict[str, Any]]) -> dict[str, Any]:
    """One step whose output is the run's trigger payload."""
    return {
        "id": workflow_id,
        "start": "echo",
        "steps": {"echo": {"type": "transform", "mapping": {"received": "{{ trigger }}"}}},
        "triggers": triggers,
    }


def hook(name: str, **settings: Any) -> dict[str, Any]:
    return {"type": "webhook", "slug": slug(name), **settings}


TRIGGERS = [
    hook("relayflow", secret={"name": secret_name("relayflow")}, replay_window_seconds=60),
    hook("github", secret={"name": secret_name("github")}, signature_scheme="github"),
    hook(
        "stripe",
        secret={"name": secret_name("stripe"), "field": "signing_secret"},
        signature_scheme="stripe",
    ),
    hook("rotating", secret={"name": secret_name("rotating")}),
    hook("open", max_body_bytes=64),
    hook("limited", rate_limit_per_minute=2),
    hook("guarded", secret={"name": secret_name("guarded")}, rate_limit_per_minute=4),
    hook(
        "sync",
        respond="sync",
        sync_timeout_seconds=15,
        transform={
            "kind": "{{ trigger.body.type }}",
            "sender": "{{ trigger.headers['x-sender'] }}",
            "page": "{{ trigger.query.page }}",
            "seen": "{{ 'x-relayflow-signature' in trigger.headers }}",
        },
    ),
    hook("custom-dedup", dedup_header="X-Request-Id"),
]


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(time_scale=TIME_SCALE) as local:
        assert local.runtime is not None
        secrets = local.runtime.client("secretsmanager")
        for name, value in SECRETS.items():
            secrets.create_secret(Name=stored_name(name), SecretString=value)
        for scheme, value in SAMPLE_SECRETS.items():
            secrets.create_secret(
                Name=f"relayflow/local/local/samples/{scheme}", SecretString=value
            )
        yield local


@pytest.fixture(scope="module")
def api(server: LocalServer) -> Iterator[httpx.Client]:
    with bootstrap_client(server) as client:
        for workflow_id, triggers in (
            (WORKFLOW, TRIGGERS),
            (DELETED_WORKFLOW, [hook("retired")]),
        ):
            put = client.put(f"/workflows/{workflow_id}", json=echo_workflow(workflow_id, triggers))
            assert put.status_code == 201, put.text
        yield client


@pytest.fixture(scope="module")
def public(server: LocalServer, api: httpx.Client) -> Iterator[httpx.Client]:
    """A client with no API key: the webhook route is public."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def run_count(api: httpx.Client, workflow_id: str = WORKFLOW) -> int:
    total, token = 0, None
    while True:
        params: dict[str, Any] = {"limit": 100, **({"next_token": token} if token else {})}
        page = api.get(f"/workflows/{workflow_id}/runs", params=params).json()
        total += len(page["items"])
        token = page["next_token"]
        if not token:
            return total


def deliver(
    public: httpx.Client,
    name: str,
    body: bytes,
    *,
    scheme: str | None = None,
    secret: str | None = None,
    at: int | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
) -> httpx.Response:
    """POST ``body`` to the slug, signed with ``secret`` in ``scheme``'s header when given."""
    sent = {"Content-Type": "application/json", **(headers or {})}
    if scheme is not None and secret is not None:
        stamp = int(time.time()) if at is None else at
        header = {
            "relayflow": "X-Relayflow-Signature",
            "github": "X-Hub-Signature-256",
            "stripe": "Stripe-Signature",
        }[scheme]
        sent[header] = sign(scheme, body, secret, None if scheme == "github" else stamp)
    return public.post(f"/hooks/{slug(name)}", content=body, headers=sent, params=query)


def run_input(api: httpx.Client, run_id: str) -> Any:
    run = api.get(f"/runs/{run_id}")
    assert run.status_code == 200, run.text
    return run.json()["input"]


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    assert body["code"] == code
    return body


def body_of(value: Any) -> bytes:
    return json.dumps(value).encode()


# ----------------------------------------------------------------------------- good signatures


@pytest.mark.parametrize(
    ("scheme", "secret"),
    [
        ("relayflow", SECRETS["relayflow"]),
        ("github", SECRETS["github"]),
        ("stripe", "st-secret-one"),
    ],
)
def test_a_delivery_signed_in_each_scheme_starts_one_run_with_the_body(
    server, api, public, scheme, secret
):
    # Given a webhook of the scheme and a delivery signed with its secret
    before = run_count(api)
    payload = {"id": f"evt_{uuid.uuid4().hex}", "type": "order.created", "total": 42}
    # When it is delivered
    response = deliver(public, scheme, body_of(payload), scheme=scheme, secret=secret)
    # Then it is accepted with a run that exists and received the body as its input
    assert response.status_code == 202, response.text
    answer = response.json()
    assert answer["status"] == "running"
    assert run_input(api, answer["run_id"]) == payload
    assert run_count(api) == before + 1
    assert server.control().dal.get_run("local", answer["run_id"]).trigger_type == "webhook"


# ----------------------------------------------------------------------------- refused signatures


@pytest.mark.parametrize("scheme", ["relayflow", "github", "stripe"])
@pytest.mark.parametrize("case", ["wrong secret", "missing", "malformed", "tampered body"])
def test_a_bad_or_missing_signature_is_401_and_starts_nothing(api, public, scheme, case):
    # Given a delivery whose signature does not hold
    before = run_count(api)
    body = body_of({"id": f"evt_{uuid.uuid4().hex}", "type": "order.created"})
    secret = {"relayflow": SECRETS["relayflow"], "github": SECRETS["github"]}.get(
        scheme, "st-secret-one"
    )
    if case == "wrong secret":
        response = deliver(public, scheme, body, scheme=scheme, secret="not-the-secret")
    elif case == "missing":
        response = deliver(public, scheme, body)
    elif case == "malformed":
        header = {
            "relayflow": "X-Relayflow-Signature",
            "github": "X-Hub-Signature-256",
            "stripe": "Stripe-Signature",
        }[scheme]
        response = deliver(public, scheme, body, headers={header: "v1=zz,t=soon"})
    else:
        signed = sign(scheme, body, secret, int(time.time()))
        header = {
            "relayflow": "X-Relayflow-Signature",
            "github": "X-Hub-Signature-256",
            "stripe": "Stripe-Signature",
        }[scheme]
        response = deliver(public, scheme, body + b" ", headers={header: signed})
    # Then it is refused in the error model, and no run started
    error = assert_error(response, 401, "unauthorized")
    expected = {"missing": "missing", "malformed": "malformed"}.get(case, "mismatch")
    assert error["details"]["reason"] == expected
    assert run_count(api) == before


@pytest.mark.parametrize("scheme", ["relayflow", "stripe"])
@pytest.mark.parametrize("offset", [-3600, 3600])
def test_a_signature_outside_the_replay_window_is_401(api, public, scheme, offset):
    # Given a correctly signed delivery stamped an hour ago (a replay) or an hour ahead
    before = run_count(api)
    secret = SECRETS["relayflow"] if scheme == "relayflow" else "st-secret-one"
    body = body_of({"id": f"evt_{uuid.uuid4().hex}"})
    # When it is delivered
    response = deliver(
        public, scheme, body, scheme=scheme, secret=secret, at=int(time.time()) + offset
    )
    # Then it is refused as expired, and no run started
    assert assert_error(response, 401, "unauthorized")["details"]["reason"] == "expired"
    assert run_count(api) == before


def test_a_rotated_secret_accepts_the_previous_and_the_current_version(
    server, api, public, monkeypatch
):
    # Given a webhook whose secret was used (and cached) at version 1 (each delivery its own
    # body: the same signed bytes twice are one delivery, docs/webhooks.md#duplicates)
    def body(n: int) -> bytes:
        return body_of({"step": "rotation", "n": n})

    assert deliver(
        public, "rotating", body(0), scheme="relayflow", secret="rot-secret-v1"
    ).is_success
    # When the secret rotates to version 2
    secrets = server.runtime.client("secretsmanager")
    secrets.put_secret_value(SecretId=stored_name("rotating"), SecretString="rot-secret-v2")
    before = run_count(api)
    # Then senders still signing with version 1 (AWSPREVIOUS) and those on version 2
    # (AWSCURRENT) are both accepted, at once
    old = deliver(public, "rotating", body(1), scheme="relayflow", secret="rot-secret-v1")
    new = deliver(public, "rotating", body(2), scheme="relayflow", secret="rot-secret-v2")
    assert (old.status_code, new.status_code) == (202, 202), (old.text, new.text)
    assert run_count(api) == before + 2
    # And after the next rotation, once the values the function keeps have aged out,
    # version 1 is refused
    from relayflow.control import webhook_intake as webhook

    secrets.put_secret_value(SecretId=stored_name("rotating"), SecretString="rot-secret-v3")
    monkeypatch.setattr(webhook, "SECRET_MAX_AGE_SECONDS", 0)
    stale = deliver(public, "rotating", body(3), scheme="relayflow", secret="rot-secret-v1")
    assert_error(stale, 401, "unauthorized")
    assert deliver(
        public, "rotating", body(4), scheme="relayflow", secret="rot-secret-v2"
    ).is_success
    assert run_count(api) == before + 3


# ----------------------------------------------------------------------------- size, rate, body


def test_an_oversized_body_is_413_naming_the_limit(api, public):
    before = run_count(api)
    body = body_of({"padding": "x" * 100})
    response = deliver(public, "open", body)
    error = assert_error(response, 413, "payload_too_large")
    assert error["message"] == f"body is {len(body)} bytes; this webhook accepts at most 64 bytes"
    assert error["details"] == {"size_bytes": len(body), "limit_bytes": 64}
    assert run_count(api) == before


def test_a_body_that_is_not_json_is_wrapped_as_raw_text(api, public):
    # Given a body with broken JSON
    response = deliver(public, "open", b'{"order": 1042, "total":')
    # Then the run starts with the text wrapped
    assert response.status_code == 202, response.text
    assert run_input(api, response.json()["run_id"]) == {"raw": '{"order": 1042, "total":'}


def test_the_rate_limit_answers_429_with_retry_after_and_starts_nothing(api, public):
    # Given an endpoint that takes two deliveries a minute
    before = run_count(api)
    # When seven arrive at once
    responses = [deliver(public, "limited", body_of({"n": n})) for n in range(7)]
    statuses = [r.status_code for r in responses]
    # Then the first two are accepted, and every later one is 429 with Retry-After (a sliding
    # window: a minute boundary between them changes nothing)
    assert statuses == [202, 202] + [429] * 5, statuses
    limited = [r for r in responses if r.status_code == 429]
    assert limited, statuses
    for response in limited:
        assert_error(response, 429, "too_many_requests")
        assert 1 <= int(response.headers["Retry-After"]) <= 63
    # And only the accepted ones started runs
    assert set(statuses) == {202, 429}
    assert run_count(api) == before + statuses.count(202)


def test_forged_deliveries_cannot_lock_out_the_real_sender(server, api, public):
    # Given an endpoint that takes 4 deliveries a minute, and a forger at another address
    # sending bad signatures
    forged_body = body_of({"order": "forged"})
    headers = [
        ("Content-Type", "application/json"),
        (
            "X-Relayflow-Signature",
            sign("relayflow", forged_body, "not-the-secret", int(time.time())),
        ),
    ]
    forged = [
        server.dispatch(
            "POST", f"/hooks/{slug('guarded')}", headers, forged_body, client_ip="203.0.113.7"
        )
        for _ in range(8)
    ]
    # Then the forger gets 401 until its own budget (half the endpoint's rate) is spent, then
    # 429 without its signature even being checked
    statuses = [r.status for r in forged]
    assert statuses == [401, 401] + [429] * 6, statuses
    refused = json.loads(forged[-1].body)
    assert refused["code"] == "too_many_requests"
    assert refused["details"]["failed_signatures_per_minute"] == 2
    # And the real sender still gets its whole rate: 4 accepted, then the endpoint's 429
    before = run_count(api)
    real = [
        deliver(
            public, "guarded", body_of({"order": n}), scheme="relayflow", secret=SECRETS["guarded"]
        )
        for n in range(5)
    ]
    assert [r.status_code for r in real] == [202, 202, 202, 202, 429]
    assert "limit_per_minute" in real[-1].json()["details"]
    assert run_count(api) == before + 4


# ----------------------------------------------------------------------------- slugs


def test_unknown_and_disabled_slugs_answer_the_same_404(api, public):
    # Given a slug that was never registered and one whose workflow was deleted
    assert deliver(public, "retired", b"{}").status_code == 202
    deleted = api.delete(f"/workflows/{DELETED_WORKFLOW}")
    assert deleted.status_code == 200, deleted.text
    before = run_count(api, DELETED_WORKFLOW)
    # When deliveries arrive for them (and for a path that cannot be a slug)
    unknown = public.post(f"/hooks/never-registered-{SUFFIX}", json={})
    disabled = deliver(public, "retired", b"{}")
    malformed = public.post("/hooks/NOT_A_SLUG", json={})
    # Then all three get one and the same 404, and nothing starts
    answers = [assert_error(r, 404, "not_found") for r in (unknown, disabled, malformed)]
    assert answers[0] == answers[1] == answers[2]
    assert run_count(api, DELETED_WORKFLOW) == before


# ----------------------------------------------------------------------------- deduplication


def test_a_repeated_delivery_returns_the_first_answer_and_starts_one_run(server, api, public):
    # Given a signed delivery with an X-Relayflow-Delivery id
    before = run_count(api)
    body = body_of({"type": "order.paid"})
    delivery = {"X-Relayflow-Delivery": f"dlv-{uuid.uuid4().hex}"}
    first = deliver(
        public, "relayflow", body, scheme="relayflow", secret=SECRETS["relayflow"], headers=delivery
    )
    # When the sender delivers it again (signed afresh, as a retry is)
    again = deliver(
        public, "relayflow", body, scheme="relayflow", secret=SECRETS["relayflow"], headers=delivery
    )
    # Then the repeat gets the first answer, marked as a replay, and only one run exists
    assert first.status_code == again.status_code == 202
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert run_count(api) == before + 1
    # (the run's idempotency key makes even racing copies map to that one run)
    run = server.control().dal.get_run("local", first.json()["run_id"])
    assert run.idempotency_key == f"hook:{slug('relayflow')}:{delivery['X-Relayflow-Delivery']}"


def test_stripe_deliveries_are_deduplicated_on_the_event_id(api, public):
    before = run_count(api)
    body = body_of({"id": f"evt_{uuid.uuid4().hex}", "type": "charge.succeeded"})
    answers = [
        deliver(public, "stripe", body, scheme="stripe", secret="st-secret-one") for _ in range(2)
    ]
    assert [a.status_code for a in answers] == [202, 202]
    assert answers[0].json() == answers[1].json()
    assert run_count(api) == before + 1


def test_copies_of_one_delivery_racing_each_other_start_one_run(api, public):
    # Given five copies of one delivery (a declared dedup header) sent at the same moment
    before = run_count(api)
    headers = {"X-Request-Id": f"req-{uuid.uuid4().hex}"}

    def send(_: int) -> httpx.Response:
        return deliver(public, "custom-dedup", body_of({"copy": True}), headers=headers)

    with ThreadPoolExecutor(max_workers=5) as pool:
        responses = list(pool.map(send, range(5)))
    # Then they all name the same run, and only that one exists
    assert {r.status_code for r in responses} == {202}, [r.text for r in responses]
    assert len({r.json()["run_id"] for r in responses}) == 1
    assert run_count(api) == before + 1


# ----------------------------------------------------------------------------- sync, transform


def test_a_sync_webhook_answers_200_with_the_runs_output_and_applies_its_transform(api, public):
    # Given a webhook that waits for its run and builds the input with a transform
    body = body_of({"type": "invoice.finalized", "amount": 990})
    # When a delivery arrives with headers and a query string
    response = deliver(
        public,
        "sync",
        body,
        headers={"X-Sender": "billing", "X-Relayflow-Signature": "t=1,v1=ignored"},
        query={"page": "3"},
    )
    # Then the answer is the finished run's output: the transformed trigger, echoed
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["status"] == "succeeded"
    expected = {"kind": "invoice.finalized", "sender": "billing", "page": "3", "seen": False}
    assert answer["output"]["steps"]["echo"]["output"] == {"received": expected}
    assert run_input(api, answer["run_id"]) == expected


def test_a_transform_that_fails_on_a_delivery_is_422_and_starts_nothing(api, public):
    before = run_count(api)
    response = deliver(public, "sync", body_of(["not", "an", "object"]))
    error = assert_error(response, 422, "unprocessable")
    assert "transform" in error["message"]
    assert run_count(api) == before


def test_only_post_is_a_delivery(public):
    response = public.put(f"/hooks/{slug('open')}", json={})
    assert_error(response, 405, "method_not_allowed")
    assert response.headers["Allow"] == "POST"


def test_secrets_and_signatures_never_reach_the_log(api, public, caplog):
    # Given deliveries with good and bad signatures
    body = body_of({"type": "log.check"})
    good = sign("relayflow", body, SECRETS["relayflow"], int(time.time()))
    bad = sign("relayflow", body, "wrong-secret", int(time.time()))
    with caplog.at_level("INFO"):
        for signature in (good, bad):
            public.post(
                f"/hooks/{slug('relayflow')}",
                content=body,
                headers={"X-Relayflow-Signature": signature},
            )
    # Then the handler logged both, and no record (before any redaction) holds the secret
    # or either signature's digest
    records = [r for r in caplog.records if r.getMessage().startswith("webhook delivery")]
    assert {r.getMessage() for r in records} == {
        "webhook delivery accepted",
        "webhook delivery refused",
    }
    written = json.dumps([vars(r) for r in caplog.records], default=str)
    for needle in (SECRETS["relayflow"], good.split("v1=")[1], bad.split("v1=")[1]):
        assert needle not in written


# ----------------------------------------------------------------------------- sample events


@pytest.fixture(scope="module")
def samples_registered(api: httpx.Client) -> None:
    """The slugs and secrets events/webhook/*.json were made for."""
    triggers = [
        {
            "type": "webhook",
            "slug": f"orders-{scheme}",
            "secret": {"name": f"samples/{scheme}"},
            "signature_scheme": scheme,
            "replay_window_seconds": 300,
        }
        for scheme in ("relayflow", "github", "stripe")
    ]
    triggers.append({"type": "webhook", "slug": "orders-small", "max_body_bytes": 256})
    put = api.put(f"/workflows/{SAMPLES_WORKFLOW}", json=echo_workflow(SAMPLES_WORKFLOW, triggers))
    assert put.status_code == 201, put.text


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("relayflow_signed", 202),
        ("github_signed", 202),
        ("stripe_signed", 202),
        ("missing_signature", 401),
        ("oversized", 413),
    ],
)
def test_each_sample_event_gets_its_answer_at_the_time_it_was_signed(
    api, samples_registered, case, status
):
    from relayflow.control.service import get_control_plane
    from relayflow.control.webhook_intake import handle_webhook

    # Given a sample API Gateway event, read at the moment it was signed
    before = run_count(api, SAMPLES_WORKFLOW)
    event = load_event("webhook", case)
    # When the webhook logic answers it
    result = handle_webhook(event, control=get_control_plane(), clock=lambda: SAMPLE_TIME + 5.0)
    # Then it gets the sample's status in the API's shapes, and a run only when accepted
    assert result["statusCode"] == status, result
    body = json.loads(result["body"])
    if status >= 400:
        assert set(body) == {"code", "message", "details"}
    assert run_count(api, SAMPLES_WORKFLOW) == before + (1 if status == 202 else 0)


def test_the_handler_refuses_a_sample_signed_long_ago(samples_registered):
    # Given the deployed handler and a sample signed on 1 Jan 2026, far outside the replay
    # window of now
    handler = load_handler("webhook").handler
    context = LambdaContext(
        function_name="relayflow-webhook",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:relayflow-webhook",
    )
    # When it is invoked with the sample, as sam local invoke would
    result = handler(load_event("webhook", "relayflow_signed"), context)
    # Then it is an API Gateway proxy response refusing the replay
    assert result["statusCode"] == 401
    assert json.loads(result["body"])["details"]["reason"] == "expired"
