"""``cancel_on`` on ``relayflow serve``: an event published with ``POST /events`` reaches the
trigger function through the subscription trigger sync made, and cancels the matching run of
the publishing tenant only."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from relayflow_testing import eventually, tenant_client

from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration
OTHER_TENANT = "globex"


@pytest.fixture(scope="module")
def other(server: LocalServer) -> Iterator[httpx.Client]:
    with tenant_client(server, OTHER_TENANT) as client:
        yield client


def cancellable(workflow_id: str, source: str) -> dict[str, Any]:
    return {
        "id": workflow_id,
        "start": "hold",
        "steps": {"hold": {"type": "delay", "seconds": 60_000}},
        "cancel_on": [
            {
                "event": "order.cancelled",
                "source": source,
                "match": "event.detail.order == trigger.order",
            }
        ],
    }


def status(api: httpx.Client, run_id: str) -> str:
    return str(api.get(f"/runs/{run_id}").json()["status"])


def publish(server: LocalServer, client: httpx.Client, source: str, detail: Any) -> None:
    body = {"source": source, "detail_type": "order.cancelled", "detail": detail}
    response = client.post("/events", json=body)
    assert response.status_code == 202, response.text
    server.settle()


def test_a_cancel_event_stops_the_matching_run_only(server, api, other):
    source = f"shop.{uuid.uuid4().hex[:8]}"
    workflow_id = f"ship-{uuid.uuid4().hex[:8]}"
    # Given the same workflow for two tenants, each with runs for orders o-1 and o-2
    for client in (api, other):
        response = client.put(f"/workflows/{workflow_id}", json=cancellable(workflow_id, source))
        assert response.status_code == 201, response.text
    mine = {
        order: api.post(f"/workflows/{workflow_id}/runs", json={"input": {"order": order}})
        for order in ("o-1", "o-2")
    }
    theirs = other.post(f"/workflows/{workflow_id}/runs", json={"input": {"order": "o-1"}})
    ids = {order: answer.json()["run_id"] for order, answer in mine.items()}
    # When the other tenant publishes order.cancelled for o-1
    publish(server, other, source, {"order": "o-1"})
    # Then its own run of o-1 is cancelled, and neither of mine
    eventually(lambda: status(other, theirs.json()["run_id"]) == "aborted")
    assert status(api, ids["o-1"]) == status(api, ids["o-2"]) == "running"
    # When I publish order.cancelled for o-1
    publish(server, api, source, {"order": "o-1"})
    # Then my run of o-1 is aborted as a cancel, and o-2 keeps running
    eventually(lambda: status(api, ids["o-1"]) == "aborted")
    run = api.get(f"/runs/{ids['o-1']}").json()
    assert run["error"] == "Relayflow.Cancelled"
    assert status(api, ids["o-2"]) == "running"
    # And an event of another source or detail-type cancels nothing
    publish(server, api, "elsewhere", {"order": "o-2"})
    assert status(api, ids["o-2"]) == "running"
    api.post(f"/runs/{ids['o-2']}/cancel")


def test_cancel_on_with_a_bad_match_is_refused_naming_the_path(api):
    definition = cancellable("bad-cancel", "shop")
    definition["cancel_on"][0]["match"] = "event.detail.order =="
    response = api.put("/workflows/bad-cancel", json=definition)
    assert response.status_code == 422, response.text
    assert "cancel_on" in response.text and "match" in response.text


# --------------------------------------------------------------------------- wait_for_event


def awaiting(workflow_id: str, source: str, timeout: int, on_timeout: bool = False) -> dict:
    wait: dict[str, Any] = {
        "type": "wait_for_event",
        "event": "payment.received",
        "source": source,
        "match": "event.detail.order == trigger.order",
        "timeout_seconds": timeout,
        "on_success": "receipt",
    }
    steps: dict[str, Any] = {
        "paid": wait,
        "receipt": {
            "type": "transform",
            "mapping": {"amount": "{{ steps.paid.output.detail.amount }}"},
        },
    }
    if on_timeout:
        wait["on_timeout"] = "chase"
        steps["chase"] = {"type": "transform", "mapping": {"chased": True}}
    # The final output keeps the wait's output too (else it leaves once receipt has read it).
    return {"id": workflow_id, "start": "paid", "steps": steps, "outputs": ["paid"]}


def paid(server: LocalServer, client: httpx.Client, source: str, order: str) -> None:
    body = {
        "source": source,
        "detail_type": "payment.received",
        "detail": {"order": order, "amount": 12},
    }
    assert client.post("/events", json=body).status_code == 202
    server.settle()


def test_wait_for_event_is_completed_by_the_matching_event_of_its_tenant_only(server, api, other):
    source = f"billing.{uuid.uuid4().hex[:8]}"
    workflow_id = f"await-{uuid.uuid4().hex[:8]}"
    for client in (api, other):
        response = client.put(f"/workflows/{workflow_id}", json=awaiting(workflow_id, source, 600))
        assert response.status_code == 201, response.text
    # Given my run waiting for order o-1's payment, and the other tenant's identical run
    mine = api.post(f"/workflows/{workflow_id}/runs", json={"input": {"order": "o-1"}}).json()
    theirs = other.post(f"/workflows/{workflow_id}/runs", json={"input": {"order": "o-1"}}).json()
    waits = server.control().dal

    def registered(tenant: str) -> bool:
        from relayflow.dal.event_waits import EventWaitDal

        return bool(EventWaitDal(waits).waiting(tenant, workflow_id, "payment.received"))

    eventually(lambda: registered("local") and registered(OTHER_TENANT))
    # When the other tenant publishes the payment of o-1, and I publish one of o-2
    paid(server, other, source, "o-1")
    paid(server, api, source, "o-2")
    # Then only their run resumes; mine keeps waiting
    eventually(lambda: status(other, theirs["run_id"]) == "succeeded")
    assert status(api, mine["run_id"]) == "running"
    # When my o-1 payment arrives, my run resumes with the event as the step's output
    paid(server, api, source, "o-1")
    eventually(lambda: status(api, mine["run_id"]) == "succeeded")
    run = api.get(f"/runs/{mine['run_id']}").json()
    assert run["output"]["steps"]["paid"]["output"]["detail"]["order"] == "o-1"
    assert run["output"]["steps"]["receipt"]["output"] == {"amount": 12}


@pytest.mark.parametrize("routed", [False, True])
def test_wait_for_event_times_out_to_on_timeout_or_wait_timeout(server, api, routed):
    source = f"billing.{uuid.uuid4().hex[:8]}"
    workflow_id = f"late-{uuid.uuid4().hex[:8]}"
    definition = awaiting(workflow_id, source, 1, on_timeout=routed)
    assert api.put(f"/workflows/{workflow_id}", json=definition).status_code == 201
    run_id = api.post(f"/workflows/{workflow_id}/runs", json={"input": {"order": "o-9"}}).json()[
        "run_id"
    ]
    eventually(lambda: status(api, run_id) != "running")
    run = api.get(f"/runs/{run_id}").json()
    if routed:
        assert run["status"] == "succeeded"
        assert run["output"]["steps"]["chase"]["output"] == {"chased": True}
    else:
        assert (run["status"], run["error"]) == ("failed", "Relayflow.WaitTimeout")
