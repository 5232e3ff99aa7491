"""No secret reaches a log line: a guest-link approval flow and a signed webhook flow run on
``relayflow serve`` with every log line captured (the JSON log and the server's access log,
at DEBUG), and each line is scanned for the API key, the links' signatures, the webhook's
secret and the signatures sent with its deliveries."""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from http_api import stored_approval
from relayflow_testing import eventually
from workflow_shapes import refund_approval

from relayflow.local.serve import LocalServer
from relayflow.triggers.signatures import sign

pytestmark = pytest.mark.integration

SUFFIX = uuid.uuid4().hex[:8]
HOOK_SECRET = f"whsec-{uuid.uuid4().hex}"
SECRET_NAME = f"tests/{SUFFIX}/logs"
#: Where it is stored: the serve key's tenant (local) folder.
STORED_NAME = f"relayflow/local/local/{SECRET_NAME}"


def approval_workflow() -> dict[str, Any]:
    return refund_approval("refund-logs", title="Refund {{ trigger.order }}", timeout_seconds=600)


def hooked_workflow() -> dict[str, Any]:
    return {
        "id": "hooked-logs",
        "start": "echo",
        "steps": {"echo": {"type": "transform", "mapping": {"got": "{{ trigger }}"}}},
        "triggers": [
            {"type": "webhook", "slug": f"logs-{SUFFIX}", "secret": {"name": SECRET_NAME}}
        ],
    }


@pytest.fixture(scope="module")
def captured() -> Iterator[dict[str, io.StringIO]]:
    """The JSON log (at DEBUG) and the access log, as text."""
    from relayflow.observability import logger

    log, access = io.StringIO(), io.StringIO()
    previous_stream = logger.registered_handler.setStream(log)  # type: ignore[attr-defined]
    previous_level = logger.log_level
    logger.setLevel("DEBUG")
    try:
        yield {"log": log, "access": access}
    finally:
        logger.setLevel(previous_level)
        logger.registered_handler.setStream(previous_stream)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def server(captured: dict[str, io.StringIO]) -> Iterator[LocalServer]:
    with LocalServer(time_scale=0.01, access_log=captured["access"]) as local:
        assert local.runtime is not None
        local.runtime.client("secretsmanager").create_secret(
            Name=STORED_NAME, SecretString=HOOK_SECRET
        )
        yield local


def guest_link_flow(server: LocalServer, api: httpx.Client) -> list[str]:
    """Open and answer a guest approval link; the secrets it involved."""
    from relayflow.approvals.links import approval_guest_links, signing_key

    assert api.put("/workflows/refund-logs", json=approval_workflow()).status_code == 201
    started = api.post("/workflows/refund-logs/runs", json={"input": {"order": "o-7"}})
    run_id = started.json()["run_id"]

    approval = stored_approval("local", run_id)
    links = approval_guest_links(approval)
    page = httpx.get(links["approve"], timeout=30)
    assert page.status_code == 200, page.text
    answer = httpx.post(links["approve"], data={}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert eventually(lambda: api.get(f"/runs/{run_id}").json()["status"] == "succeeded")
    signatures = [parse_qs(urlsplit(url).query)["sig"][0] for url in links.values()]
    key = signing_key()
    return [*signatures, key if isinstance(key, str) else key.decode()]


def webhook_flow(server: LocalServer, api: httpx.Client) -> list[str]:
    """A signed delivery and a forged one; the secrets they involved."""
    assert api.put("/workflows/hooked-logs", json=hooked_workflow()).status_code == 201
    body = json.dumps({"order": "o-8"}).encode()
    good = sign("relayflow", body, HOOK_SECRET, int(time.time()))
    bad = sign("relayflow", body, "guessed-secret-value", int(time.time()))
    url = f"{server.url}/hooks/logs-{SUFFIX}"
    accepted = httpx.post(url, content=body, headers={"X-Relayflow-Signature": good}, timeout=30)
    assert accepted.status_code == 202, accepted.text
    refused = httpx.post(url, content=body, headers={"X-Relayflow-Signature": bad}, timeout=30)
    assert refused.status_code == 401, refused.text
    return [HOOK_SECRET, good, bad, "guessed-secret-value"]


def test_no_secret_of_a_guest_link_or_a_webhook_flow_reaches_any_log_line(
    server: LocalServer, api: httpx.Client, captured: dict[str, io.StringIO]
) -> None:
    # Given a guest-link approval flow and a webhook flow, every API call with the API key
    secrets = [server.bootstrap_key, *guest_link_flow(server, api), *webhook_flow(server, api)]
    server.settle()
    # When every captured line is read
    lines = [
        *captured["log"].getvalue().splitlines(),
        *captured["access"].getvalue().splitlines(),
    ]
    # Then the flows were logged …
    assert any("/guest/approvals/" in line for line in lines)
    assert any("/hooks/" in line for line in lines)
    assert any("sig=***" in line for line in lines)
    # … and no line holds a secret, a signature or a link's sig value
    leaks = [
        (secret[:12], line[:300])
        for line in lines
        for secret in secrets
        if secret and secret in line
    ]
    assert leaks == []
    assert not [line for line in lines if "sig=" in line and "sig=***" not in line]
