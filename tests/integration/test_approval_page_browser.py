"""A person approves through the guest page in a real browser: headless Chromium (Debian's
``chromium`` package, installed by ``make browser``) opens the guest link that a waiting
approval step produced, fills the form, clicks the button and sees the outcome; then the run
continues on its ``on_approve`` route with the form data in the step's output.

Chromium is driven over the DevTools protocol (tests/support/cdp_browser.py, shared with
the console's browser tests); a missing Chromium fails under ``make test`` and in CI.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cdp_browser import Browser, require_chromium
from http_api import finished_run, stored_approval
from relayflow_testing import HTTP_TIMEOUT
from workflow_shapes import refund_approval

from relayflow.approvals.links import approval_guest_links
from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration
TIME_SCALE = 0.01


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    binary = require_chromium()
    chromium = Browser(binary, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield chromium
    finally:
        chromium.close()


def refund_workflow() -> dict[str, Any]:
    return refund_approval(
        "refund-browser",
        title="Refund order {{ trigger.order }}",
        description="The customer asks for their money back.",
        prompt="Refund {{ trigger.amount }} EUR?",
        timeout_seconds=600,
        form_schema={
            "type": "object",
            "properties": {
                "note": {"type": "string", "title": "Note for the customer"},
                "goodwill": {"type": "boolean", "title": "Add a goodwill voucher"},
            },
            "required": ["note"],
        },
    )


def waiting_approval(server: LocalServer, api: httpx.Client) -> tuple[str, Any]:

    assert api.put("/workflows/refund-browser", json=refund_workflow()).status_code in (200, 201)
    started = api.post(
        "/workflows/refund-browser/runs", json={"input": {"order": "A-42", "amount": 120}}
    )
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    return run_id, stored_approval("local", run_id)


# ----------------------------------------------------------------------------- the test


def test_a_guest_approves_in_chromium_and_the_run_continues(server, browser, tmp_path):
    with httpx.Client(
        base_url=server.url, headers={"X-Api-Key": server.bootstrap_key}, timeout=HTTP_TIMEOUT
    ) as api:
        # Given a run waiting for a refund approval, and the guest link for "approve"
        run_id, approval = waiting_approval(server, api)
        link = approval_guest_links(approval)["approve"]
        assert link.startswith(f"{server.url}/guest/approvals/{approval.approval_id}?")

        # When a person opens the link in Chromium
        browser.open(link)
        # Then the page shows the request and the form
        assert browser.text("h1") == "Refund order A-42"
        assert browser.text(".prompt") == "Refund 120 EUR?"
        assert browser.text("#respond") == "Approve"

        # When they fill in the note, tick the voucher and click Approve
        browser.type_into("#field-note", "Sorry for the delay")
        browser.click("#field-goodwill")
        browser.screenshot(tmp_path / "request.png")
        browser.click("#respond")
        # Then the outcome page says the workflow continues
        outcome = browser.wait_for("#outcome")
        browser.screenshot(tmp_path / "outcome.png")
        assert outcome.startswith("Approved — the workflow continues")
        assert (tmp_path / "outcome.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        # And the run continues on on_approve with the decision and the form data
        run = finished_run(api, run_id)
        assert run["status"] == "succeeded"
        assert [step["key"] for step in run["steps"]] == ["ask", "pay"]
        decision = run["steps"][0]["output"]
        assert decision["option"] == "approve" and decision["approved"] is True
        assert decision["data"] == {"note": "Sorry for the delay", "goodwill": True}
        assert decision["responder"] == "guest:approve"
        assert run["output"]["steps"]["pay"]["output"] == {"refunded": True}

        # When the link is opened again, the page says it was already decided
        browser.open(link)
        assert browser.text("h1") == "Already decided"
        assert "by guest:approve" in (browser.text("#outcome") or "")
