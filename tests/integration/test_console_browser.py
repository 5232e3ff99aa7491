"""The web console (``/console`` on ``relayflow serve``) driven in headless Chromium: sign in
through the banner's link, start a run from the form and watch it finish, read a failed run's
error, rerun it from a step, resume a parked run, approve an approval, and the empty and
error states. One server and one browser serve the whole module.

With ``RELAYFLOW_CONSOLE_SCREENSHOTS=DIR`` the tests also save the screenshots that
docs/console.md shows (``make console-screenshots`` writes them to docs/console/).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cdp_browser import Browser, CdpError, require_chromium
from relayflow_testing import HTTP_TIMEOUT, Received, Reply, Server
from workflow_shapes import charging, refund_approval

from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration

SCREENSHOTS = os.environ.get("RELAYFLOW_CONSOLE_SCREENSHOTS")


def fail(received: Received) -> Reply:
    return 503, {"Content-Type": "application/json"}, b'{"error": "payments down"}'


def ok(received: Received) -> Reply:
    return 200, {"Content-Type": "application/json"}, b'{"id": "ch_42"}'


def workflows(url: str) -> list[dict[str, Any]]:
    return [
        {
            "id": "greet",
            "name": "Greeting",
            "start": "wait",
            "input_schema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "title": "Name"},
                    "times": {"type": "integer", "description": "How often to greet"},
                },
                "required": ["name"],
            },
            "steps": {
                # 600 s at the module's time scale (0.002): long enough to watch it run.
                "wait": {"type": "delay", "seconds": 600, "on_success": "hello"},
                "hello": {"type": "transform", "mapping": {"message": "Hello {{ trigger.name }}"}},
            },
        },
        {
            "id": "orders",
            "engine": "standard",  # an Express run keeps no native step output to rerun with
            "start": "prepare",
            "steps": {
                "prepare": {
                    "type": "transform",
                    "mapping": {"order": "{{ trigger.order }}"},
                    "on_success": "charge",
                },
                "charge": {
                    "type": "webhook_out",
                    "url": f"{url}/charge",
                    "compensate": {"type": "webhook_out", "url": f"{url}/refund"},
                    "on_success": "receipt",
                },
                "receipt": {
                    "type": "transform",
                    "mapping": {
                        "order": "{{ steps.prepare.output.order }}",
                        "charge": "{{ steps.charge.output.body.id }}",
                    },
                },
            },
        },
        charging(url, {"paid": "{{ steps.charge.output }}"}),
        refund_approval(
            "refund",
            title="Refund order {{ trigger.order }}",
            prompt="Pay back {{ trigger.amount }} EUR?",
            timeout_seconds=86400,
        ),
    ]


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    chromium = Browser(require_chromium(), tmp_path_factory.mktemp("chromium-profile"))
    chromium.call("Emulation.setDeviceMetricsOverride", _viewport(1280, 860))
    try:
        yield chromium
    finally:
        chromium.close()


def _viewport(width: int, height: int) -> dict[str, Any]:
    return {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}


@pytest.fixture(scope="module")
def server(remote: Server) -> Iterator[LocalServer]:
    with LocalServer(time_scale=0.002) as local:
        with httpx.Client(
            base_url=local.url, headers={"X-Api-Key": local.bootstrap_key}, timeout=HTTP_TIMEOUT
        ) as api:
            for definition in workflows(remote.url):
                put = api.put(f"/workflows/{definition['id']}", json=definition)
                assert put.status_code in (200, 201), put.text
        yield local


def sign_in(browser: Browser, server: LocalServer, key: str) -> None:
    """What the serve banner's link does: the key rides in the fragment, the page signs in."""
    browser.open("about:blank")  # from the login page itself a #key link loads nothing
    browser.open(f"{server.url}/console/login#key={key}")
    # The login page's script moves the key into the form and drops it from the address, but
    # never submits it (a link from anywhere could carry another tenant's key): the user does.
    wait_until(browser, "document.getElementById('key').value.length > 0 && !location.hash")
    assert browser.evaluate("location.pathname") == "/console/login"
    assert browser.evaluate("document.getElementById('from-link').hidden") is False
    browser.click("#sign-in")
    wait_until(
        browser,
        "location.pathname === '/console/runs' && document.readyState === 'complete'",
    )


def click_and_load(browser: Browser, selector: str) -> None:
    browser._events.clear()
    browser.click(selector)
    browser.wait_event("Page.loadEventFired")


def wait_until(browser: Browser, expression: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = browser.evaluate(expression)
        if value:
            return value
        time.sleep(0.05)
    raise CdpError(f"never true: {expression}; page: {browser.text('main')!r}")


def shot(browser: Browser, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        browser.screenshot(Path(SCREENSHOTS) / f"{name}.png")


def settled(api: httpx.Client, run_id: str, *statuses: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run = api.get(f"/runs/{run_id}").json()
        if run["status"] in statuses:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never became {statuses}: {run['status']}")


def node_status(browser: Browser, step: str) -> str | None:
    return browser.evaluate(
        f"(g => g && g.dataset.status)(document.querySelector('g[data-step={json.dumps(step)}]'))"
    )


def run_id_of_page(browser: Browser) -> str:
    return str(browser.evaluate("location.pathname.split('/')[3]"))


# ----------------------------------------------------------------------------- tests


def test_empty_states_and_a_refused_key(server, browser):
    # Given a tenant with nothing in it
    created = httpx.post(
        f"{server.url}/admin/keys",
        json={"tenant": "empty", "name": "console"},
        headers={"X-Admin-Token": server.admin_token},
        timeout=HTTP_TIMEOUT,
    ).json()
    # A wrong key is refused on the sign-in page, and nothing else opens
    browser.open(f"{server.url}/console/login")
    browser.type_into("#key", "rf_key_000000000000_wrong")
    click_and_load(browser, "#login button")
    assert "refused" in (browser.text(".flash.error") or "")
    browser.open(f"{server.url}/console/runs")
    assert browser.evaluate("location.pathname") == "/console/login"

    # When the tenant's key signs in, every list says it is empty, and how to fill it
    sign_in(browser, server, created["secret"])
    assert "no workflows" in browser.wait_for(".empty")
    shot(browser, "empty")
    for page, words in (
        ("workflows", "No workflows yet"),
        ("approvals", "No approval is waiting"),
        ("dlq", "No failed run"),
        ("breakers", "No breaker"),
    ):
        browser.open(f"{server.url}/console/{page}")
        assert words in browser.wait_for(".empty")
    # Another tenant's run and an unknown page are not found
    browser.open(f"{server.url}/console/runs/{'0' * 32}")
    assert "not_found" in browser.wait_for(".flash.error")


def test_start_a_run_from_the_form_and_watch_it_finish(server, browser, api):
    sign_in(browser, server, server.bootstrap_key)
    browser.open(f"{server.url}/console/workflows/greet")
    assert browser.evaluate("!!document.querySelector('svg.graph g[data-step=hello]')")
    # An input that breaks the schema is shown beside the form, and nothing starts
    browser.type_into("#f-times", "2")
    click_and_load(browser, "#start-run")
    assert "name" in browser.wait_for(".field-error")
    assert api.get("/workflows/greet/runs").json()["items"] == []

    # When the name is filled in and the run starts
    browser.type_into("#f-name", "Ada")
    shot(browser, "workflow")
    click_and_load(browser, "#start-run")
    run_id = run_id_of_page(browser)
    # Then the run page shows it running, and the page updates itself until it succeeds
    browser.evaluate("window.sameDocument = true")
    assert browser.evaluate("document.querySelector('#live').dataset.status") == "running"
    wait_until(browser, "document.querySelector('#live').dataset.status === 'succeeded'")
    assert browser.evaluate("window.sameDocument") is True  # polled, not reloaded
    assert node_status(browser, "wait") == "succeeded"
    assert node_status(browser, "hello") == "succeeded"
    assert "Hello Ada" in (browser.text("#step-hello") or "")
    assert api.get(f"/runs/{run_id}").json()["input"] == {"name": "Ada", "times": 2}
    shot(browser, "run")

    # And the runs list shows it, filterable by workflow and status
    browser.open(f"{server.url}/console/runs?workflow=greet&status=succeeded")
    assert browser.evaluate(f"!!document.querySelector('tr[data-run=\"{run_id}\"]')")
    shot(browser, "runs")
    browser.open(f"{server.url}/console/runs?workflow=greet&status=failed")
    assert "No runs match" in browser.wait_for(".empty")


def test_a_failed_run_shows_its_error_and_reruns_from_a_step(server, browser, api, remote):
    sign_in(browser, server, server.bootstrap_key)
    # Given a run that failed at charge
    remote.reply = fail
    started = api.post("/workflows/orders/runs", json={"input": {"order": "A-7"}}).json()
    settled(api, started["run_id"], "failed")
    calls = len(remote.to("/charge"))

    # When its page is opened, the error names the step and the cause
    browser.open(f"{server.url}/console/runs/{started['run_id']}")
    error = browser.wait_for("#run-error")
    assert "Relayflow.Transient" in error and "charge" in error and "503" in error
    assert node_status(browser, "prepare") == "succeeded"
    assert node_status(browser, "charge") == "caught"  # its error went to the saga
    assert "Relayflow.Transient" in (browser.text("#step-charge") or "")
    shot(browser, "failed-run")

    # And it is rerun from charge (the failing step, preselected) once payments are back
    remote.reply = ok
    assert browser.evaluate("document.querySelector('#rerun-step').value") == "charge"
    click_and_load(browser, "#rerun")
    rerun_id = run_id_of_page(browser)
    assert rerun_id != started["run_id"]
    wait_until(browser, "document.querySelector('#live').dataset.status === 'succeeded'")
    # Then prepare did not run again (its output was reused), charge ran once more, and
    # receipt read both outputs
    assert node_status(browser, "prepare") == "reused"
    assert node_status(browser, "charge") == "succeeded"
    assert "rerun of" in (browser.text(".facts") or "")
    shot(browser, "rerun")
    run = api.get(f"/runs/{rerun_id}").json()
    assert run["output"] is None or "receipt" in json.dumps(run["output"])
    receipt = next(s for s in run["steps"] if s["key"] == "receipt")["output"]
    assert receipt == {"order": "A-7", "charge": "ch_42"}
    assert len(remote.to("/charge")) == calls + 1


def test_resume_a_parked_run_with_a_skip(server, browser, api, remote):
    sign_in(browser, server, server.bootstrap_key)
    remote.reply = fail
    run_id = api.post("/workflows/charging/runs", json={"input": {}}).json()["run_id"]
    settled(api, run_id, "parked")

    # The parked list and the run page show where it waits and why
    browser.open(f"{server.url}/console/runs?parked=1")
    assert browser.evaluate(f"!!document.querySelector('tr[data-run=\"{run_id}\"]')")
    browser.open(f"{server.url}/console/runs/{run_id}")
    assert "charge" in browser.wait_for("#parked")
    assert node_status(browser, "charge") == "parked"
    shot(browser, "parked-run")

    # When it is resumed by skipping charge with an output
    browser.evaluate("document.querySelector('#resume-action').value = 'skip'")
    browser.type_into("#resume-output", '{"id": "manual-7"}')
    click_and_load(browser, "#resume")
    assert "resumed" in (browser.text(".flash.info") or "")
    # Then it runs on along the success route with that output
    run = settled(api, run_id, "succeeded")
    receipt = next(s for s in run["steps"] if s["key"] == "receipt")["output"]
    assert receipt == {"paid": {"id": "manual-7"}}


def test_approve_an_approval_from_the_inbox(server, browser, api):
    sign_in(browser, server, server.bootstrap_key)
    run_id = api.post(
        "/workflows/refund/runs", json={"input": {"order": "B-9", "amount": 30}}
    ).json()["run_id"]
    deadline = time.monotonic() + 30
    while not [a for a in api.get("/approvals").json()["items"] if a["run_id"] == run_id]:
        assert time.monotonic() < deadline, "the approval never appeared"
        time.sleep(0.05)

    # The inbox lists it with its buttons
    browser.open(f"{server.url}/console/approvals")
    assert "Refund order B-9" in browser.wait_for("form.approval")
    shot(browser, "approvals")
    click_and_load(browser, "form.approval button[value=approve]")
    assert "decided: approve" in (browser.text(".flash.info") or "")
    # Then the run takes its on_approve route
    run = settled(api, run_id, "succeeded")
    assert [s["key"] for s in run["steps"]] == ["ask", "pay"]
    browser.open(f"{server.url}/console/approvals")
    assert "No approval is waiting" in browser.wait_for(".empty")


def test_a_conflicting_action_shows_the_api_error(server, browser, api):
    sign_in(browser, server, server.bootstrap_key)
    run_id = api.post("/workflows/greet/runs", json={"input": {"name": "Bo"}}).json()["run_id"]
    browser.open(f"{server.url}/console/runs/{run_id}")
    browser.wait_for("#live")
    settled(api, run_id, "succeeded")  # it finishes before the cancel arrives
    # A cancel posted for a finished run comes back with the API's 409 message
    browser.evaluate(
        "(f => { f.method = 'post'; f.action = location.pathname + '/cancel';"
        " document.body.appendChild(f); f.submit(); })(document.createElement('form'))"
    )
    browser.wait_event("Page.loadEventFired")
    assert "conflict" in browser.wait_for(".flash.error")
