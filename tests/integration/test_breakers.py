"""Circuit breakers against moto's DynamoDB and the local runtime: conditional transitions
under concurrency, the half-open trial, tool steps that fail fast, workflow starts refused over
HTTP (LocalServer), skipped scheduled runs, and the breaker routes.

DynamoDB applies each conditional write to an item atomically; plain moto does not under
threads, and the local runtime's ``dynamodb_atomic_requests`` compat fix gives that guarantee
back (one lock per request), so the concurrency tests run against what DynamoDB promises.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from http_api import finished_run
from relayflow_testing import (
    HTTP_TIMEOUT,
    Received,
    Reply,
    Server,
    step_config,
    tenant_client,
)

from relayflow.dal.breakers import BreakerDal, iso_time
from relayflow.document import StepRef
from relayflow.errors import CircuitOpen, HttpError, InvalidArgsError, TransientError
from relayflow.local.serve import LocalServer
from relayflow.reliability.breakers import (
    TOOL_TRIAL_LEASE_SECONDS,
    Admission,
    BreakerPolicy,
    Breakers,
    tool_breaker_id,
)
from relayflow.settings import override_settings
from relayflow.steps.boundary import REAL

pytestmark = pytest.mark.integration
UNTHROTTLED = True

OTHER_TENANT = "globex"
THREADS = 20
T0 = 1_900_000_000.0


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def other(server: LocalServer) -> Iterator[httpx.Client]:
    with tenant_client(server, OTHER_TENANT, timeout=30) as client:
        yield client


class Clock:
    """A controllable clock (epoch seconds)."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def breakers(server: LocalServer, clock: Clock) -> Breakers:
    return Breakers(BreakerDal(), clock=clock)


@pytest.fixture
def metrics(monkeypatch) -> list[tuple[str, float, dict[str, str]]]:
    """Every ``observability.record_metric`` call (metrics are only written inside Lambda)."""
    seen: list[tuple[str, float, dict[str, str]]] = []
    lock = threading.Lock()

    def record(name: str, value: float, unit: str = "Count", **dimensions: str) -> None:
        with lock:
            seen.append((name, value, dimensions))

    monkeypatch.setattr("relayflow.observability.record_metric", record)
    return seen


@pytest.fixture
def remote() -> Iterator[Server]:
    """An HTTP API on 127.0.0.1 that fails every request with a 500 (an HttpError)."""
    with override_settings(ssrf_allow=["127.0.0.1"]):
        srv = Server()
        srv.reply = failing
        yield srv
        srv.stop()


def failing(received: Received) -> Reply:
    return 500, {"Content-Type": "application/json"}, b'{"error": "down"}'


def together(count: int, action: Callable[[], Any]) -> list[Any]:
    """Run ``action`` in ``count`` threads released at once; each one's result or exception."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def work(index: int) -> None:
        barrier.wait()
        try:
            results[index] = action()
        except Exception as exc:
            results[index] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    # Every caller's result is needed: a caller still running would leave ``None`` in its
    # place and fake a lost trip. The bound only ends a test that hangs.
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a caller is still running"
    return results


def trip(breakers: Breakers, tenant: str, breaker_id: str, policy: BreakerPolicy) -> None:
    for _ in range(policy.failure_threshold):
        breakers.failed(Admission(tenant, breaker_id), policy, "Relayflow.HttpError: 500")
    item = breakers.get(tenant, breaker_id)
    assert item is not None and item.state == "open"


# ----------------------------------------------------------------------------- transitions


def test_concurrent_failures_trip_a_breaker_exactly_once(breakers, tenant, metrics):
    # Given a closed breaker with a threshold of 5
    breaker_id = tool_breaker_id("http.billing")
    policy = BreakerPolicy(failure_threshold=5, cooldown_seconds=60)
    # When 20 callers record a failure at the same moment
    results = together(
        THREADS,
        lambda: breakers.failed(Admission(tenant, breaker_id), policy, "Relayflow.HttpError: 500"),
    )
    # Then exactly one of them tripped it
    assert not [r for r in results if isinstance(r, Exception)], results
    assert results.count(True) == 1
    item = breakers.get(tenant, breaker_id)
    assert item is not None
    assert (item.state, item.trips) == ("open", 1)
    assert item.reopens_at == T0 + 60
    # And it counted the failures up to the trip (later ones found it open)
    assert 5 <= item.consecutive_failures <= THREADS
    # And one audit item and one BreakerTrips metric record the trip
    (audit,) = breakers.store.list_trips(tenant, breaker_id)
    assert audit.from_state == "closed"
    assert audit.failures >= 5
    assert audit.last_error == "Relayflow.HttpError: 500"
    assert audit.tenant == tenant
    assert audit.reopens_at == iso_time(T0 + 60)
    assert [m for m in metrics if m[0] == "BreakerTrips"] == [
        ("BreakerTrips", 1, {"BreakerKind": "tool"})
    ]


def test_a_half_open_breaker_admits_exactly_one_trial(breakers, clock, tenant):
    # Given a tripped breaker whose cooldown is over
    breaker_id = tool_breaker_id("http.billing")
    trip(breakers, tenant, breaker_id, BreakerPolicy(failure_threshold=3, cooldown_seconds=30))
    clock.advance(30)
    # When 20 callers ask to go through at once
    results = together(
        THREADS, lambda: breakers.admit(tenant, breaker_id, lease_seconds=TOOL_TRIAL_LEASE_SECONDS)
    )
    # Then one is admitted as the trial and every other is refused
    admitted = [r for r in results if isinstance(r, Admission)]
    refused = [r for r in results if isinstance(r, CircuitOpen)]
    assert len(admitted) == 1 and admitted[0].trial_token
    assert len(refused) == THREADS - 1
    assert {r.details["breaker_id"] for r in refused} == {breaker_id}
    item = breakers.get(tenant, breaker_id)
    assert item is not None
    assert (item.state, item.trial_token) == ("half_open", admitted[0].trial_token)


def test_a_breaker_goes_open_then_half_open_then_closed(breakers, clock, tenant):
    breaker_id = tool_breaker_id("aws.sqs.send_message")
    policy = BreakerPolicy(failure_threshold=2, cooldown_seconds=30)
    # Given two failures in a row
    assert breakers.failed(Admission(tenant, breaker_id), policy, "boom") is False
    assert breakers.failed(Admission(tenant, breaker_id), policy, "boom") is True
    # Then it is open, and refuses callers until the cooldown is over
    with pytest.raises(CircuitOpen) as refused:
        breakers.admit(tenant, breaker_id, lease_seconds=60)
    assert refused.value.details["reopens_at"] == iso_time(T0 + 30)
    assert breakers.info(breakers.get(tenant, breaker_id)).state == "open"
    clock.advance(29.9)
    with pytest.raises(CircuitOpen):
        breakers.admit(tenant, breaker_id, lease_seconds=60)
    # When the cooldown is over it is half-open: the next caller is the trial
    clock.advance(0.1)
    assert breakers.info(breakers.get(tenant, breaker_id)).state == "half_open"
    trial = breakers.admit(tenant, breaker_id, lease_seconds=60)
    assert trial.trial_token is not None
    # And while the trial runs, everyone else is refused until its lease ends
    with pytest.raises(CircuitOpen) as during:
        breakers.admit(tenant, breaker_id, lease_seconds=60)
    assert during.value.details["reopens_at"] == iso_time(T0 + 30 + 60)
    # When the trial succeeds, the breaker closes and forgets its failures
    breakers.succeeded(trial)
    item = breakers.get(tenant, breaker_id)
    assert item is not None
    assert (item.state, item.consecutive_failures) == ("closed", 0)
    assert breakers.admit(tenant, breaker_id, lease_seconds=60).trial_token is None
    info = breakers.info(item)
    assert (info.state, info.opened_at, info.reopens_at) == ("closed", None, None)


def test_a_failed_trial_opens_the_breaker_for_another_cooldown(breakers, clock, tenant, metrics):
    breaker_id = tool_breaker_id("http.billing")
    policy = BreakerPolicy(failure_threshold=1, cooldown_seconds=10)
    trip(breakers, tenant, breaker_id, policy)
    clock.advance(10)
    trial = breakers.admit(tenant, breaker_id, lease_seconds=60)
    # When the trial fails
    assert breakers.failed(trial, policy, "Relayflow.HttpError: 500") is True
    # Then it is open again from now, and that trip is audited too
    item = breakers.get(tenant, breaker_id)
    assert item is not None
    assert (item.state, item.trips, item.reopens_at) == ("open", 2, T0 + 20)
    trips = breakers.store.list_trips(tenant, breaker_id)
    assert [t.from_state for t in trips] == ["closed", "half_open"]
    assert len([m for m in metrics if m[0] == "BreakerTrips"]) == 2


def test_a_dead_trial_lets_another_through_once_its_lease_ends(breakers, clock, tenant):
    breaker_id = tool_breaker_id("http.billing")
    trip(breakers, tenant, breaker_id, BreakerPolicy(failure_threshold=1, cooldown_seconds=10))
    clock.advance(10)
    first = breakers.admit(tenant, breaker_id, lease_seconds=TOOL_TRIAL_LEASE_SECONDS)
    # Given the trial never reports (its function died)
    clock.advance(TOOL_TRIAL_LEASE_SECONDS - 1)
    with pytest.raises(CircuitOpen):
        breakers.admit(tenant, breaker_id, lease_seconds=TOOL_TRIAL_LEASE_SECONDS)
    # When its lease has run out, the next caller becomes the trial
    clock.advance(1)
    second = breakers.admit(tenant, breaker_id, lease_seconds=TOOL_TRIAL_LEASE_SECONDS)
    assert second.trial_token not in (None, first.trial_token)
    # And the dead trial's late verdict changes nothing
    breakers.succeeded(first)
    item = breakers.get(tenant, breaker_id)
    assert item is not None
    assert (item.state, item.trial_token) == ("half_open", second.trial_token)


@pytest.mark.parametrize(
    "error",
    [
        TransientError("timed out"),
        TransientError("HTTP 503", status=503),
        InvalidArgsError("bad args"),
    ],
    ids=["timeout", "503", "invalid-args"],
)
def test_transient_and_caller_errors_do_not_count(breakers, tenant, error):
    breaker_id = tool_breaker_id("http.billing")
    policy = BreakerPolicy(failure_threshold=2, cooldown_seconds=60)
    # When the call fails that way many times over
    for _ in range(5):
        with pytest.raises(type(error)):
            breakers.guard(tenant, breaker_id, policy, lambda: (_ for _ in ()).throw(error))
    # Then nothing was counted (no write at all), and calls still go through
    assert breakers.get(tenant, breaker_id) is None
    assert breakers.guard(tenant, breaker_id, policy, lambda: "ok") == "ok"


def test_a_success_forgets_the_failures_before_it(breakers, tenant):
    breaker_id = tool_breaker_id("http.billing")
    policy = BreakerPolicy(failure_threshold=3, cooldown_seconds=60)

    def fail() -> Any:
        raise HttpError("HTTP 500", status=500)

    for _ in range(2):
        with pytest.raises(HttpError):
            breakers.guard(tenant, breaker_id, policy, fail)
    assert breakers.guard(tenant, breaker_id, policy, lambda: "ok") == "ok"
    for _ in range(2):
        with pytest.raises(HttpError):
            breakers.guard(tenant, breaker_id, policy, fail)
    # Then two more failures are not three in a row
    item = breakers.get(tenant, breaker_id)
    assert item is not None
    assert (item.state, item.consecutive_failures) == ("closed", 2)
    assert item.last_error == "Relayflow.HttpError: HTTP 500"


def test_a_transient_trial_hands_the_trial_to_the_next_caller(breakers, clock, tenant):
    breaker_id = tool_breaker_id("http.billing")
    policy = BreakerPolicy(failure_threshold=1, cooldown_seconds=10)
    trip(breakers, tenant, breaker_id, policy)
    clock.advance(10)
    # When the trial call times out (no verdict)
    with pytest.raises(TransientError):
        breakers.guard(
            tenant, breaker_id, policy, lambda: (_ for _ in ()).throw(TransientError("timeout"))
        )
    # Then the breaker stays open, and the very next call is the new trial, which closes it
    assert breakers.guard(tenant, breaker_id, policy, lambda: "ok") == "ok"
    item = breakers.get(tenant, breaker_id)
    assert item is not None and item.state == "closed"


# ----------------------------------------------------------------------------- tool steps


def tool_event(tenant: str, tool: str, config: dict[str, Any]) -> dict[str, Any]:
    return {
        "step": StepRef(key="call", type="tool", config={"tool": tool, **config}).wire(),
        "doc": {
            "run": {
                "id": "run-1",
                "workflow_id": "wf",
                "tenant": tenant,
                "started_at": "2026-11-30T09:00:00.000Z",
            },
            "trigger": {},
            "steps": {},
        },
        "context": {"attempt": 0},
    }


def test_an_open_tool_breaker_fails_fast_before_any_http_request(server, remote, tenant):
    from relayflow.steps import tool

    # Given the tenant's breaker of http.billing tripped by earlier calls
    breakers = Breakers(BreakerDal())
    trip(breakers, tenant, "tool:http.billing", BreakerPolicy(1, 600))
    event = tool_event(
        tenant,
        "http.billing",
        {
            "args": {"method": "POST", "path": "/charge"},
            "http_tool": {"base_url": f"{remote.url}/v1", "timeout_seconds": 30},
            "breaker": {"failure_threshold": 1, "cooldown_seconds": 600},
        },
    )
    # When a tool step calls it
    with pytest.raises(CircuitOpen) as raised:
        tool.run(event, REAL)
    # Then it fails with Relayflow.CircuitOpen, naming the breaker and when it reopens
    assert type(raised.value).__name__ == "Relayflow.CircuitOpen"
    assert raised.value.details["breaker_id"] == "tool:http.billing"
    assert raised.value.details["reopens_at"]
    # And no request reached the server
    assert remote.requests == []
    # While another tenant's breaker of the same tool is untouched: its call goes out
    with pytest.raises(HttpError):
        tool.run(tool_event(f"{tenant}-b", "http.billing", step_config(event)), REAL)
    assert len(remote.requests) == 1


def test_an_open_tool_breaker_fails_fast_before_any_aws_call(server, tenant, monkeypatch):
    from relayflow.steps import tool
    from relayflow.tools import aws as aws_tools

    calls: list[str] = []
    monkeypatch.setattr(aws_tools, "client", lambda service: calls.append(service))
    breakers = Breakers(BreakerDal())
    trip(breakers, tenant, "tool:aws.sqs.send_message", BreakerPolicy(1, 600))
    event = tool_event(
        tenant,
        "aws.sqs.send_message",
        {"args": {"queue_url": "https://sqs/q", "body": "x"}, "breaker": {"failure_threshold": 1}},
    )
    with pytest.raises(CircuitOpen):
        tool.run(event, REAL)
    assert calls == []


def test_a_tool_step_without_a_breaker_calls_through(server, remote, tenant):
    from relayflow.steps import tool

    trip(Breakers(BreakerDal()), tenant, "tool:http.billing", BreakerPolicy(1, 600))
    event = tool_event(
        tenant,
        "http.billing",
        {"args": {}, "http_tool": {"base_url": remote.url, "timeout_seconds": 30}},
    )
    with pytest.raises(HttpError):
        tool.run(event, REAL)
    assert len(remote.requests) == 1


# ----------------------------------------------------------------------------- whole workflows


def run_to_end(server: LocalServer, api: httpx.Client, workflow_id: str) -> dict[str, Any]:
    started = api.post(f"/workflows/{workflow_id}/runs", json={"input": {"zero": 0}})
    assert started.status_code == 201, started.text
    run = finished_run(api, started.json()["run_id"])
    server.settle()  # the recorder's pass over this end (and the breaker) is complete
    return run


def breaker_of(api: httpx.Client, breaker_id: str) -> dict[str, Any] | None:
    listed = api.get("/breakers", params={"limit": 100})
    assert listed.status_code == 200, listed.text
    return next((b for b in listed.json()["items"] if b["breaker_id"] == breaker_id), None)


def test_a_failing_http_tool_trips_its_breaker_and_the_next_run_routes_circuit_open(
    server, api, remote, metrics
):
    # Given a workflow whose HTTP tool answers 500 (a non-transient HttpError), with a breaker
    # that opens after 3 failures, and an on_failure route that keeps the error
    definition = {
        "id": "charge",
        "start": "call",
        "http_tools": {"payments": {"base_url": f"{remote.url}/v1", "timeout_seconds": 30}},
        "steps": {
            "call": {
                "type": "tool",
                "tool": "http.payments",
                "args": {"method": "POST", "path": "/charges"},
                "breaker": {"failure_threshold": 3, "cooldown_seconds": 600},
                "on_failure": "failed",
            },
            "failed": {"type": "transform", "mapping": {"error": "{{ error.Error }}"}},
        },
    }
    assert api.put("/workflows/charge", json=definition).is_success
    # When it runs three times, each call reaches the API and fails
    for _ in range(3):
        run = run_to_end(server, api, "charge")
        assert run["output"]["steps"]["failed"]["output"] == {"error": "Relayflow.HttpError"}
    assert len(remote.requests) == 3
    # Then the breaker is open, and the next run's tool step fails fast with
    # Relayflow.CircuitOpen, routed to on_failure like any failure, without a request
    run = run_to_end(server, api, "charge")
    assert run["status"] == "succeeded"
    assert run["output"]["steps"]["failed"]["output"] == {"error": "Relayflow.CircuitOpen"}
    assert len(remote.requests) == 3
    breaker = breaker_of(api, "tool:http.payments")
    assert breaker is not None
    assert (breaker["state"], breaker["kind"], breaker["trips"]) == ("open", "tool", 1)
    assert breaker["last_error"].startswith("Relayflow.HttpError")
    assert [m for m in metrics if m[0] == "BreakerTrips"] == [
        ("BreakerTrips", 1, {"BreakerKind": "tool"})
    ]


def failing_workflow(workflow_id: str, *, threshold: int, cooldown: int) -> dict[str, Any]:
    """A run fails (division by zero), and a daily cron trigger feeds the dispatch tests."""
    return {
        "id": workflow_id,
        "start": "compute",
        "breaker": {"failure_threshold": threshold, "cooldown_seconds": cooldown},
        "triggers": [{"type": "cron", "cron": "0 9 * * *", "input": {"zero": 0}}],
        "steps": {"compute": {"type": "transform", "mapping": {"r": "{{ 1 / trigger.zero }}"}}},
    }


def open_workflow_breaker(
    server: LocalServer, api: httpx.Client, workflow_id: str, *, cooldown: int = 600
) -> None:
    """PUT a failing workflow with a breaker of threshold 2, and fail it twice."""
    definition = failing_workflow(workflow_id, threshold=2, cooldown=cooldown)
    assert api.put(f"/workflows/{workflow_id}", json=definition).is_success
    for _ in range(2):
        assert run_to_end(server, api, workflow_id)["status"] == "failed"


def test_an_open_workflow_breaker_refuses_starts_with_409_and_when_it_reopens(server, api, metrics):
    # Given a workflow whose breaker the recorder opened after two failed runs
    open_workflow_breaker(server, api, "nightly")
    # When another run is started through the API
    before = time.time()
    refused = api.post("/workflows/nightly/runs", json={"input": {}})
    # Then it is refused: 409, naming the breaker and when it reopens
    assert refused.status_code == 409, refused.text
    body = refused.json()
    assert body["code"] == "conflict"
    assert body["details"]["breaker_id"] == "workflow:nightly"
    reopens = body["details"]["reopens_at"]
    assert reopens.endswith("Z")
    assert 0 < int(refused.headers["Retry-After"]) <= 600
    assert "Traceback" not in refused.text
    # And GET /breakers shows it open until then, with the trip
    breaker = breaker_of(api, "workflow:nightly")
    assert breaker is not None
    assert (breaker["state"], breaker["kind"], breaker["trips"]) == ("open", "workflow", 1)
    assert breaker["reopens_at"] == reopens
    assert breaker["consecutive_failures"] == 2
    assert breaker["last_error"].startswith("Relayflow.ExpressionError: expression '1 / trigger")
    assert "stackTrace" not in breaker["last_error"]
    (audit,) = BreakerDal().list_trips("local", "workflow:nightly")
    assert audit.failures == 2
    assert audit.tripped_at >= time.strftime("%Y-%m-%dT%H:%M", time.gmtime(before - 60))
    assert ("BreakerTrips", 1, {"BreakerKind": "workflow"}) in metrics


def test_a_scheduled_run_of_an_open_workflow_breaker_is_skipped_and_recorded(server, api, metrics):
    from relayflow.control.dispatch import handle_trigger
    from relayflow.control.service import get_control_plane

    open_workflow_breaker(server, api, "hourly")
    before = len(api.get("/workflows/hourly/runs").json()["items"])
    delivery = {
        "kind": "schedule",
        "tenant": "local",
        "workflow_id": "hourly",
        "trigger_index": 0,
        "scheduled_time": "2026-11-30T09:00:00Z",
        "input": {"zero": 0},
    }
    # When the schedule fires (and its delivery is repeated)
    result = handle_trigger(delivery, control=get_control_plane())
    again = handle_trigger(delivery, control=get_control_plane())
    # Then no run starts: the result says why
    assert result["status"] == again["status"] == "skipped"
    assert "circuit breaker is open" in result["reason"]
    assert len(api.get("/workflows/hourly/runs").json()["items"]) == before
    # And the skip is recorded once beside the breaker, and counted
    (skip,) = BreakerDal().list_skips("local", "workflow:hourly")
    assert skip.idempotency_key == "schedule:0:2026-11-30T09:00:00Z"
    assert (skip.trigger_type, skip.workflow_id) == ("schedule", "hourly")
    assert skip.reopens_at
    assert [m for m in metrics if m[0] == "RunSkipped"] == [
        ("RunSkipped", 1, {"Reason": "BreakerOpen"}),
        ("RunSkipped", 1, {"Reason": "BreakerOpen"}),
    ]


def test_a_half_open_workflow_breaker_lets_one_scheduled_run_through(server, api):
    from relayflow.control.dispatch import Dispatcher
    from relayflow.control.service import ControlPlane

    open_workflow_breaker(server, api, "daily", cooldown=60)
    # Given the trigger function's clock past the cooldown
    control = ControlPlane(breakers=Breakers(BreakerDal(), clock=lambda: time.time() + 61))
    dispatcher = Dispatcher(control)

    def fire(hour: int) -> Any:
        return dispatcher.dispatch(
            {
                "kind": "schedule",
                "tenant": "local",
                "workflow_id": "daily",
                "trigger_index": 0,
                "scheduled_time": f"2026-11-30T{hour:02d}:00:00Z",
                "input": {"zero": 0},
            }
        )

    # When two schedules fire while it is half-open
    first, second = fire(9), fire(10)
    # Then the first run is the trial; the second is skipped while the trial runs
    assert first.status == "started"
    assert second.status == "skipped"
    assert "circuit breaker is open" in (second.reason or "")
    item = control.breakers.get("local", "workflow:daily")
    assert item is not None
    assert (item.state, item.trial_token) == ("half_open", first.run_id)
    # And when the trial run fails, the recorder opens the breaker again
    assert first.run_id
    assert finished_run(api, first.run_id)["status"] == "failed"
    server.settle()
    reopened = control.breakers.get("local", "workflow:daily")
    assert reopened is not None
    assert (reopened.state, reopened.trips) == ("open", 2)


def test_a_workflow_without_a_breaker_ignores_an_old_open_one(server, api):
    # Given an open breaker, then a version that declares none
    open_workflow_breaker(server, api, "relaxed")
    definition = failing_workflow("relaxed", threshold=2, cooldown=600)
    definition["breaker"] = None
    assert api.put("/workflows/relaxed", json=definition).is_success
    # Then runs start again
    assert api.post("/workflows/relaxed/runs", json={"input": {"zero": 1}}).status_code == 201


# ----------------------------------------------------------------------------- routes


def test_get_breakers_lists_and_reset_closes(server, api):
    open_workflow_breaker(server, api, "weekly")
    assert breaker_of(api, "workflow:weekly")["state"] == "open"
    # When the breaker is reset
    reset = api.post("/breakers/workflow:weekly/reset")
    # Then it is closed with its failures forgotten, and runs start again
    assert reset.status_code == 200, reset.text
    body = reset.json()
    assert (body["breaker_id"], body["state"], body["consecutive_failures"]) == (
        "workflow:weekly",
        "closed",
        0,
    )
    assert (body["opened_at"], body["reopens_at"]) == (None, None)
    assert breaker_of(api, "workflow:weekly")["state"] == "closed"
    assert api.post("/workflows/weekly/runs", json={"input": {"zero": 1}}).status_code == 201


def test_breakers_are_per_tenant_and_another_tenants_reset_is_not_found(server, api, other):
    open_workflow_breaker(server, api, "monthly")
    # Then the other tenant sees none of the local tenant's breakers
    assert all(
        b["breaker_id"] != "workflow:monthly" for b in other.get("/breakers").json()["items"]
    )
    # And resetting it as the other tenant is a 404, exactly like an unknown breaker
    for client, breaker_id in (
        (other, "workflow:monthly"),
        (api, "workflow:never-seen"),
        (api, "tool:http.never_called"),
    ):
        response = client.post(f"/breakers/{breaker_id}/reset")
        assert response.status_code == 404, response.text
        assert response.json()["code"] == "not_found"
    # And the breaker is still open for its owner
    assert breaker_of(api, "workflow:monthly")["state"] == "open"
    # A malformed breaker id is a bad request
    assert api.post("/breakers/nonsense/reset").status_code == 400


def test_breaker_routes_need_an_api_key(server):
    assert httpx.get(f"{server.url}/breakers", timeout=HTTP_TIMEOUT).status_code == 401
    assert (
        httpx.post(f"{server.url}/breakers/workflow:x/reset", timeout=HTTP_TIMEOUT).status_code
        == 401
    )


def test_the_skip_record_and_trip_audit_stay_out_of_the_listing(server, api):
    open_workflow_breaker(server, api, "quarterly")
    ids = [b["breaker_id"] for b in api.get("/breakers", params={"limit": 100}).json()["items"]]
    assert ids == sorted(set(ids))
    assert "workflow:quarterly" in ids
    raw = json.dumps(api.get("/breakers").json())
    assert "TRIP#" not in raw and "SKIP#" not in raw
