"""Event subscriptions end to end: real HTTP to a LocalServer, ``POST /events`` onto the bus,
moto's pattern matching, the local router delivering to the trigger function, CEL filters and
idempotent run starts, with two tenants.

One server serves the module. Every test subscribes under its own event source, so tests
never see each other's events.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from relayflow_testing import HTTP_TIMEOUT, tenant_client

from relayflow.local.eventbridge import Delivery
from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration

TIME_SCALE = 0.01
OTHER_TENANT = "globex"


@pytest.fixture(scope="module")
def other(server: LocalServer) -> Iterator[httpx.Client]:
    """A client of a second tenant."""
    with tenant_client(server, OTHER_TENANT) as client:
        yield client


@pytest.fixture
def source() -> str:
    """An event source only this test publishes and subscribes to."""
    return f"shop.{uuid.uuid4().hex[:8]}"


def subscriber(
    workflow_id: str, source: str, filter: str | None = None, detail_type: str = "order.created"
) -> dict[str, Any]:
    trigger: dict[str, Any] = {"type": "event", "source": source, "detail_type": detail_type}
    if filter is not None:
        trigger["filter"] = filter
    return {
        "id": workflow_id,
        "start": "mark",
        "steps": {"mark": {"type": "transform", "mapping": {"workflow": workflow_id}}},
        "triggers": [trigger],
    }


def register(client: httpx.Client, definition: dict[str, Any]) -> None:
    response = client.put(f"/workflows/{definition['id']}", json=definition)
    assert response.status_code in (200, 201), response.text


def publish(
    server: LocalServer,
    client: httpx.Client,
    source: str,
    detail: dict[str, Any],
    detail_type: str = "order.created",
) -> str:
    response = client.post(
        "/events", json={"source": source, "detail_type": detail_type, "detail": detail}
    )
    assert response.status_code == 202, response.text
    server.settle()
    return str(response.json()["event_id"])


def runs(client: httpx.Client, workflow_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/workflows/{workflow_id}/runs")
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


def deliveries_of(server: LocalServer, event_id: str) -> list[Delivery]:
    assert server.events is not None
    return [
        d
        for d in server.events.deliveries
        if isinstance(d.payload, dict) and (d.payload.get("event") or {}).get("id") == event_id
    ]


def test_an_event_starts_exactly_the_subscribed_workflows_whose_filters_match(server, api, source):
    # Given three workflows subscribed to the same detail-type with different filters,
    # and one subscribed to another detail-type
    prefix = source.replace(".", "-")
    big, german, small, refunds = (f"{prefix}-{n}" for n in ("big", "de", "small", "refunds"))
    register(api, subscriber(big, source, "trigger.detail.total > 100"))
    register(api, subscriber(german, source, "trigger.detail.country == 'DE'"))
    register(api, subscriber(small, source, "trigger.detail.total < 10"))
    register(api, subscriber(refunds, source, detail_type="order.refunded"))
    # When one order.created event is published
    event_id = publish(server, api, source, {"total": 240, "country": "DE"})
    # Then exactly the two workflows whose filters accept it have one run each
    started = {w: runs(api, w) for w in (big, german, small, refunds)}
    assert {w: len(r) for w, r in started.items()} == {big: 1, german: 1, small: 0, refunds: 0}
    # And each run's trigger is the event as published
    run = api.get(f"/runs/{started[big][0]['run_id']}").json()
    assert run["status"] == "succeeded"
    assert run["input"] == {
        "id": event_id,
        "source": source,
        "detail_type": "order.created",
        "time": run["input"]["time"],
        "account": "123456789012",
        "region": "us-east-1",
        "resources": [],
        "detail": {"total": 240, "country": "DE"},
    }
    # And the third subscription was delivered the event and filtered it out
    outcomes = sorted(d.result["status"] for d in deliveries_of(server, event_id))
    assert outcomes == ["filtered", "started", "started"]


def test_a_redelivered_event_starts_no_second_run(server, api, source):
    workflow_id = f"{source.replace('.', '-')}-once"
    register(api, subscriber(workflow_id, source))
    event_id = publish(server, api, source, {"total": 5})
    (first,) = deliveries_of(server, event_id)
    assert first.result["status"] == "started"
    # When EventBridge delivers the same event (same id) again
    assert server.events is not None
    server.events.enqueue(
        Delivery(
            rule=first.rule,
            function_name=first.function_name,
            payload=copy.deepcopy(first.payload),
        )
    )
    server.settle()
    # Then the delivery finds the run the first one started, and the workflow has one run
    _, again = deliveries_of(server, event_id)
    assert again.result == {**first.result, "status": "duplicate"}
    (run,) = runs(api, workflow_id)
    assert run["run_id"] == first.result["run_id"]


def test_a_filter_that_fails_skips_only_its_own_subscription(server, api, source):
    prefix = source.replace(".", "-")
    broken, sound = f"{prefix}-broken", f"{prefix}-sound"
    # Given a subscription whose filter reads a field the event does not have, and a sound one
    register(api, subscriber(broken, source, "trigger.detail.customer.tier == 'gold'"))
    register(api, subscriber(sound, source, "trigger.detail.total > 1"))
    # When an event arrives
    event_id = publish(server, api, source, {"total": 50})
    # Then the broken filter is reported and skipped, and the sound subscription runs
    by_workflow = {d.result["workflow_id"]: d.result for d in deliveries_of(server, event_id)}
    assert by_workflow[broken]["status"] == "filter_error"
    assert "customer" in by_workflow[broken]["reason"]
    assert by_workflow[sound]["status"] == "started"
    assert (len(runs(api, broken)), len(runs(api, sound))) == (0, 1)


def test_one_tenants_events_never_start_another_tenants_workflows(server, api, other, source):
    prefix = source.replace(".", "-")
    ours, theirs = f"{prefix}-ours", f"{prefix}-theirs"
    # Given both tenants subscribe to the same source and detail-type, without filters
    register(api, subscriber(ours, source))
    register(other, subscriber(theirs, source))
    # When tenant local publishes, even naming the other tenant in the detail
    publish(server, api, source, {"total": 1, "relayflow_tenant": OTHER_TENANT})
    # Then only its own workflow runs
    assert (len(runs(api, ours)), len(runs(other, theirs))) == (1, 0)
    # When the other tenant publishes, only the other tenant's workflow runs
    publish(server, other, source, {"total": 2})
    assert (len(runs(api, ours)), len(runs(other, theirs))) == (1, 1)


def test_a_workflow_subscribed_to_a_run_lifecycle_event_fires_for_its_own_tenant_only(
    server, api, other, source
):
    # Given a workflow, and in each tenant a follower subscribed to its runs' success
    prefix = source.replace(".", "-")
    leader, follower, theirs = f"{prefix}-leader", f"{prefix}-follower", f"{prefix}-theirs"
    register(api, subscriber(leader, f"{source}.unused"))
    on_success = f"trigger.detail.workflow_id == '{leader}'"
    for client, workflow_id in ((api, follower), (other, theirs)):
        definition = subscriber(workflow_id, "relayflow", on_success, "relayflow.run.succeeded")
        register(client, definition)
    # When a run of the leader succeeds
    started = api.post(f"/workflows/{leader}/runs", json={"input": {}})
    assert started.status_code == 201, started.text
    # (the run ends, the recorder publishes its end, the bus delivers it: each in turn)
    deadline = time.monotonic() + 60
    while not runs(api, follower) and time.monotonic() < deadline:
        server.settle()
    assert api.get(f"/runs/{started.json()['run_id']}").json()["status"] == "succeeded"
    server.settle()
    # Then the recorder's relayflow.run.succeeded started this tenant's follower, once,
    # with the run's lifecycle detail, and not the other tenant's
    (run,) = runs(api, follower)
    assert runs(other, theirs) == []
    detail = api.get(f"/runs/{run['run_id']}").json()["input"]["detail"]
    assert detail["workflow_id"] == leader and detail["status"] == "succeeded"
    assert detail["tenant"] == "local"


def test_a_deleted_workflow_no_longer_receives_events(server, api, source):
    workflow_id = f"{source.replace('.', '-')}-gone"
    register(api, subscriber(workflow_id, source))
    assert api.delete(f"/workflows/{workflow_id}").status_code == 200
    event_id = publish(server, api, source, {"total": 3})
    assert deliveries_of(server, event_id) == []
    assert runs(api, workflow_id) == []


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"source": "aws.s3", "detail_type": "x", "detail": {}}, None),
        ({"source": "relayflow", "detail_type": "relayflow.run.succeeded", "detail": {}}, None),
        ({"detail_type": "x", "detail": {}}, "body.source"),
        ({"source": "shop", "detail_type": "x", "detail": []}, "body.detail"),
    ],
    ids=["aws-source", "relayflow-source", "no-source", "detail-not-object"],
)
def test_post_events_refuses_reserved_sources_and_malformed_bodies(api, body, path):
    response = api.post("/events", json=body)
    assert response.status_code == 422, response.text
    error = response.json()
    assert error["code"] == "unprocessable"
    if path is not None:
        assert path in [d["path"] for d in error["details"]]


def test_post_events_needs_an_api_key(server):
    response = httpx.post(
        f"{server.url}/events",
        json={"source": "shop", "detail_type": "x", "detail": {}},
        timeout=HTTP_TIMEOUT,
    )
    assert response.status_code == 401
