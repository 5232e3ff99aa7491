"""Guest approval links over HTTP (no browser): a LocalServer (`relayflow serve`) runs a
workflow whose approval step waits; its guest links open the page and answer it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx
import pytest
from http_api import finished_run, stored_approval
from relayflow_testing import HTTP_TIMEOUT, tenant_client
from workflow_shapes import refund_approval

from relayflow.approvals.links import approval_guest_links, sign_link, signing_key
from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration
TIME_SCALE = 0.01

OTHER_TENANT = "globex"
FORM = {
    "type": "object",
    "properties": {
        "note": {"type": "string", "title": "Note"},
        "amount": {"type": "integer", "minimum": 1},
        "urgent": {"type": "boolean"},
    },
    "required": ["note"],
}


def refund_workflow(workflow_id: str, form: dict[str, Any] | None = None) -> dict[str, Any]:
    return refund_approval(
        workflow_id,
        title="Refund {{ trigger.order }}",
        prompt="Refund {{ trigger.amount }} EUR?",
        timeout_seconds=600,
        form_schema=form,
    )


@pytest.fixture(scope="module")
def other(server: LocalServer) -> Iterator[httpx.Client]:
    with tenant_client(server, OTHER_TENANT) as client:
        yield client


def start_pending(
    client: httpx.Client, tenant: str, workflow_id: str, form: dict[str, Any] | None = None
) -> tuple[str, Any]:
    """Start a run of the refund workflow; its run id and stored approval once it waits."""

    put = client.put(f"/workflows/{workflow_id}", json=refund_workflow(workflow_id, form))
    assert put.status_code in (200, 201), put.text
    started = client.post(
        f"/workflows/{workflow_id}/runs", json={"input": {"order": "<b>42</b>", "amount": 120}}
    )
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    return run_id, stored_approval(tenant, run_id)


def stored(tenant: str, approval_id: str) -> Any:
    from relayflow.dal.waits import WaitDal

    return WaitDal().get_approval(tenant, approval_id)


def with_query(url: str, **changes: str) -> str:
    split = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(split.query).items()}
    query.update(changes)
    return urlunsplit(split._replace(query=urlencode(query)))


def test_the_page_shows_the_request_escaped_under_a_strict_policy(api):
    # Given a run waiting for an approval whose title holds markup from the trigger
    _, approval = start_pending(api, "local", "guest-page")
    links = approval_guest_links(approval)
    # When the guest opens the approve link
    page = httpx.get(links["approve"], timeout=HTTP_TIMEOUT)
    # Then the request is shown, escaped, with the form and the option as the button
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "Refund &lt;b&gt;42&lt;/b&gt;" in page.text and "<b>42</b>" not in page.text
    assert "Refund 120 EUR?" in page.text
    assert 'value="approve">Approve</button>' in page.text
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "form-action 'self'" in csp
    assert page.headers["referrer-policy"] == "no-referrer"
    # And no API key was needed, while the authenticated API still wants one
    assert (
        httpx.get(
            f"{urlsplit(links['approve']).scheme}://{urlsplit(links['approve']).netloc}/workflows",
            timeout=HTTP_TIMEOUT,
        ).status_code
        == 401
    )


def test_a_guest_approves_once_and_the_run_continues_with_the_form_data(api):
    # Given a waiting approval with a form
    run_id, approval = start_pending(api, "local", "guest-approve", FORM)
    links = approval_guest_links(approval)
    # When the guest posts the form through the approve link
    answer = httpx.post(
        links["approve"],
        data={"f.note": "customer is right", "f.amount": "120", "f.urgent": "true"},
        timeout=HTTP_TIMEOUT,
    )
    # Then the outcome page says so and the run takes on_approve with the data in the output
    assert answer.status_code == 200, answer.text
    assert "Approved — the workflow continues" in answer.text
    run = finished_run(api, run_id)
    assert run["status"] == "succeeded"
    assert [s["key"] for s in run["steps"]] == ["ask", "pay"]
    output = run["steps"][0]["output"]
    assert output["option"] == "approve" and output["approved"] is True
    assert output["data"] == {"note": "customer is right", "amount": 120, "urgent": True}
    assert output["responder"] == "guest:approve"
    item = stored("local", approval.approval_id)
    assert item.status == "decided" and item.decision["responder"] == "guest:approve"

    # When the same link, or the reject link, is used again
    again = httpx.post(links["reject"], data={"f.note": "no"}, timeout=HTTP_TIMEOUT)
    # Then it is refused as already decided, saying by whom, and nothing changes
    assert again.status_code == 409
    assert "already answered “Approve” by guest:approve" in again.text
    assert httpx.get(links["approve"], timeout=HTTP_TIMEOUT).status_code == 409
    assert stored("local", approval.approval_id).decision["option"] == "approve"


def test_a_guest_rejects_and_the_run_takes_on_reject(api):
    run_id, approval = start_pending(api, "local", "guest-reject")
    answer = httpx.post(approval_guest_links(approval)["reject"], data={}, timeout=HTTP_TIMEOUT)
    assert answer.status_code == 200 and "Rejected — the workflow continues" in answer.text
    run = finished_run(api, run_id)
    assert run["status"] == "succeeded"
    assert [s["key"] for s in run["steps"]] == ["ask", "keep"]
    assert run["steps"][0]["output"]["approved"] is False


def test_form_data_that_breaks_the_schema_is_shown_again_and_decides_nothing(api):
    _, approval = start_pending(api, "local", "guest-bad-form", FORM)
    link = approval_guest_links(approval)["approve"]
    # the page checks types; the service checks the rest of the schema (minimum)
    typed = httpx.post(link, data={"f.note": "x", "f.amount": "lots"}, timeout=HTTP_TIMEOUT)
    assert typed.status_code == 422 and "amount must be a whole number" in typed.text
    schema = httpx.post(link, data={"f.note": "x", "f.amount": "0"}, timeout=HTTP_TIMEOUT)
    assert schema.status_code == 422 and "minimum" in schema.text
    assert stored("local", approval.approval_id).status == "pending"


def test_a_tampered_link_is_403_and_decides_nothing(api):
    _, approval = start_pending(api, "local", "guest-tampered")
    link = approval_guest_links(approval)["approve"]
    sig = parse_qs(urlsplit(link).query)["sig"][0]
    tampered = with_query(link, sig=("0" if sig[0] != "0" else "1") + sig[1:])
    for response in (
        httpx.get(tampered, timeout=HTTP_TIMEOUT),
        httpx.post(tampered, data={}, timeout=HTTP_TIMEOUT),
    ):
        assert response.status_code == 403
        assert "This link is invalid or has expired." in response.text
    # another option with the approve link's signature is tampered too
    assert (
        httpx.post(with_query(link, option="reject"), data={}, timeout=HTTP_TIMEOUT).status_code
        == 403
    )
    assert stored("local", approval.approval_id).status == "pending"


def test_an_expired_link_is_410_and_decides_nothing(api, server):
    _, approval = start_pending(api, "local", "guest-expired")
    expired = sign_link(
        server.url,
        tenant="local",
        approval_id=approval.approval_id,
        option="approve",
        expires_at=int(time.time()) - 5,
        key=signing_key(),
    )
    response = httpx.post(expired, data={}, timeout=HTTP_TIMEOUT)
    assert response.status_code == 410
    assert "This link is invalid or has expired." in response.text
    assert stored("local", approval.approval_id).status == "pending"


def test_another_tenants_approval_cannot_be_answered(api, other, server):
    # Given an approval waiting in another tenant
    _, theirs = start_pending(other, OTHER_TENANT, "guest-theirs")
    their_link = approval_guest_links(theirs)["approve"]
    # When its link is re-pointed at this tenant, the signature no longer matches: 403
    assert (
        httpx.post(
            with_query(their_link, tenant="local"), data={}, timeout=HTTP_TIMEOUT
        ).status_code
        == 403
    )
    # And even a correctly signed link of this tenant naming their id finds nothing: 404
    forged = sign_link(
        server.url,
        tenant="local",
        approval_id=theirs.approval_id,
        option="approve",
        expires_at=int(time.time()) + 600,
        key=signing_key(),
    )
    assert httpx.get(forged, timeout=HTTP_TIMEOUT).status_code == 404
    assert httpx.post(forged, data={}, timeout=HTTP_TIMEOUT).status_code == 404
    # Then their approval is still pending
    assert stored(OTHER_TENANT, theirs.approval_id).status == "pending"


def test_an_unknown_approval_is_404(server):
    link = sign_link(
        server.url,
        tenant="local",
        approval_id="0" * 32,
        option="approve",
        expires_at=int(time.time()) + 600,
        key=signing_key(),
    )
    assert httpx.get(link, timeout=HTTP_TIMEOUT).status_code == 404


def test_a_form_body_over_64_kb_is_refused(api):
    _, approval = start_pending(api, "local", "guest-large", FORM)
    link = approval_guest_links(approval)["approve"]
    response = httpx.post(link, data={"f.note": "x" * 70_000}, timeout=HTTP_TIMEOUT)
    assert response.status_code == 413
    assert stored("local", approval.approval_id).status == "pending"


def test_the_approval_notification_carries_a_working_guest_link_per_option(api):
    import json

    from relayflow_testing import allowed_server

    with allowed_server() as hook:
        # Given a refund approval that notifies a webhook
        workflow = refund_workflow("notified-refund")
        workflow["steps"]["ask"]["notification_channels"] = [{"webhook": {"url": hook.url}}]
        assert api.put("/workflows/notified-refund", json=workflow).is_success
        run_id = api.post(
            "/workflows/notified-refund/runs", json={"input": {"order": "o-7", "amount": 5}}
        )
        run_id = run_id.json()["run_id"]
        deadline = time.monotonic() + 20
        while not hook.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        # Then the notification names the request and carries one signed link per option
        (received,) = hook.requests
        note = json.loads(received.body)
        assert note["event"] == "relayflow.approval.requested"
        assert note["data"]["run_id"] == run_id
        links = note["data"]["guest_links"]
        assert set(links) == {"approve", "reject"}
        assert links["reject"] in note["text"]
        # And following the approve link answers the request: the run takes on_approve
        assert httpx.get(links["approve"], timeout=HTTP_TIMEOUT).status_code == 200
        answered = httpx.post(links["approve"], data={}, timeout=HTTP_TIMEOUT)
        assert answered.status_code == 200, answered.text
        run = finished_run(api, run_id)
        assert run["status"] == "succeeded"
        assert run["output"]["steps"]["pay"]["output"] == {"refunded": True}
