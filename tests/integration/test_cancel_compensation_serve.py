"""Compensation of a cancelled saga run through ``relayflow serve``: ``POST /runs/{id}/cancel``
over HTTP, then the server's own recorder starts the compensation and records its end, so
``GET /runs/{id}`` shows the compensation and the outcome without any test-side recording."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from relayflow_testing import Received, Reply, Server, allowed_server, eventually

from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration
WITH_REMOTE = True


def ok(received: Received) -> Reply:
    return 200, {"Content-Type": "application/json"}, b'{"id": "x1"}'


@pytest.fixture(scope="module")
def remote() -> Iterator[Server]:
    with allowed_server() as server:
        server.reply = ok
        yield server


@pytest.fixture(scope="module")
def http(server: LocalServer) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url,
        headers={"Authorization": f"Bearer {server.bootstrap_key}"},
        timeout=30,
    ) as client:
        yield client


def test_a_run_cancelled_over_http_is_compensated_and_shows_it(http, remote):
    # Given a saga workflow whose run waits after two compensated steps
    definition = {
        "id": "booking",
        "start": "hold_room",
        "steps": {
            "hold_room": {
                "type": "webhook_out",
                "url": f"{remote.url}/rooms",
                "compensate": {"type": "webhook_out", "url": f"{remote.url}/rooms/release"},
                "on_success": "hold_car",
            },
            "hold_car": {
                "type": "webhook_out",
                "url": f"{remote.url}/cars",
                "compensate": {"type": "webhook_out", "url": f"{remote.url}/cars/release"},
                "on_success": "confirm",
            },
            "confirm": {"type": "delay", "seconds": 600_000},
        },
    }
    assert http.put("/workflows/booking", json=definition).status_code == 201
    run_id = http.post("/workflows/booking/runs", json={"input": {}}).json()["run_id"]
    # (waiting for the run to reach the delay, not just for /cars to be called: hold_car is
    # compensated only once it has succeeded and pushed itself onto the saga)
    eventually(
        lambda: any(
            s["key"] == "confirm" for s in http.get(f"/runs/{run_id}").json().get("steps", [])
        )
    )
    assert [r.path for r in remote.requests] == ["/rooms", "/cars"]
    # When it is cancelled over HTTP
    cancelled = http.post(f"/runs/{run_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    # Then both holds are released, newest first, and the run shows the compensation
    run = eventually(lambda: (r := http.get(f"/runs/{run_id}").json()).get("compensation") and r)
    assert [r.path for r in remote.requests] == [
        "/rooms",
        "/cars",
        "/cars/release",
        "/rooms/release",
    ]
    assert (run["status"], run["error"], run["outcome"]) == (
        "aborted",
        "Relayflow.Cancelled",
        "compensated",
    )
    assert run["compensation"] == {
        "status": "compensated",
        "steps": ["hold_car", "hold_room"],
        "errors": [],
    }
