"""The default retries and an all-settled parallel on ``relayflow serve``: a recording HTTP
server counts each step's requests, and ``GET /runs/{id}`` shows the timeline."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from relayflow_testing import Received, Reply, Server, allowed_server, bootstrap_client

from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def remote() -> Iterator[Server]:
    """/ok answers 200 (echo); /down always answers 503 (a transient failure); /blip answers
    503 to the first request of each delivery id, then 200."""
    with allowed_server() as server:
        seen: set[str] = set()

        def reply(received: Received) -> Reply:
            delivery = received.headers.get("x-relayflow-delivery", "")
            first_blip = received.path == "/blip" and delivery not in seen
            seen.add(delivery)
            if received.path == "/down" or first_blip:
                return 503, {"Content-Type": "application/json"}, b'{"error":"down"}'
            return Server.echo(received)

        server.reply = reply
        yield server


@pytest.fixture(scope="module")
def api(remote: Server) -> Iterator[httpx.Client]:
    with LocalServer(time_scale=0.001) as local, bootstrap_client(local) as client:
        yield client


def calls(remote: Server, path: str, run_id: str) -> int:
    return sum(
        1
        for r in remote.to(path)
        if r.headers.get("x-relayflow-delivery", "").startswith(f"{run_id}:")
    )


def finished(api: httpx.Client, workflow: dict[str, Any]) -> dict[str, Any]:
    # Standard: these tests read each step's attempts from the execution history, which an
    # Express run (what auto picks for these short workflows) does not have.
    workflow = {"engine": "standard", **workflow}
    assert api.put(f"/workflows/{workflow['id']}", json=workflow).is_success
    started = api.post(f"/workflows/{workflow['id']}/runs", json={"input": {"order": "o-1"}})
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    deadline = time.monotonic() + 30
    while (run := api.get(f"/runs/{run_id}").json())["status"] == "running":
        assert time.monotonic() < deadline, f"run {run_id} still running"
        time.sleep(0.05)
    return run


def hook(remote: Server, path: str, **extra: Any) -> dict[str, Any]:
    return {"type": "webhook_out", "url": f"{remote.url}{path}", "body": {"n": 1}, **extra}


def test_a_transient_failure_is_attempted_three_times_by_default(api, remote):
    # Given a webhook_out step without a retry policy whose endpoint answers 503
    run = finished(
        api, {"id": "default-retry", "start": "call", "steps": {"call": hook(remote, "/down")}}
    )
    # Then the run failed after 3 attempts, and the endpoint saw 3 requests
    assert (run["status"], run["error"]) == ("failed", "Relayflow.Transient")
    (step,) = run["steps"]
    assert (step["key"], step["status"], step["attempts"]) == ("call", "failed", 3)
    assert calls(remote, "/down", run["run_id"]) == 3


def test_retry_none_makes_one_attempt(api, remote):
    run = finished(
        api,
        {"id": "no-retry", "start": "call", "steps": {"call": hook(remote, "/down", retry="none")}},
    )
    assert run["status"] == "failed"
    assert run["steps"][0]["attempts"] == 1
    assert calls(remote, "/down", run["run_id"]) == 1


def test_a_settled_parallel_keeps_the_branch_that_succeeded(api, remote):
    # Given two branches, one of which calls an endpoint that is down
    workflow = {
        "id": "settled",
        "start": "fan",
        "steps": {
            "fan": {
                "type": "parallel",
                "branches": ["good", "bad"],
                "settle": "all",
                "on_success": "after",
            },
            "good": hook(remote, "/ok"),
            "bad": hook(remote, "/down"),
            "after": {
                "type": "transform",
                "mapping": {
                    "good": "{{ steps.good.output.status }}",
                    "bad": "{{ steps.bad.error.Error }}",
                },
            },
        },
    }
    run = finished(api, workflow)
    # Then the run succeeded: the good branch's output and the bad branch's error went on
    assert run["status"] == "succeeded", run
    steps = {step["key"]: step for step in run["steps"]}
    assert steps["after"]["output"] == {"good": 200, "bad": "Relayflow.Transient"}
    assert (steps["bad"]["status"], steps["bad"]["attempts"]) == ("caught", 3)
    assert calls(remote, "/ok", run["run_id"]) == 1
    assert calls(remote, "/down", run["run_id"]) == 3


def test_a_retry_after_a_transient_failure_acts_once_more_and_succeeds(api, remote):
    # Given an endpoint that fails the first request transiently, then answers
    run = finished(api, {"id": "blip", "start": "call", "steps": {"call": hook(remote, "/blip")}})
    # Then the default retry sent the request a second time, and only that one succeeded
    assert run["status"] == "succeeded", run
    (step,) = run["steps"]
    assert (step["status"], step["attempts"], step["output"]["status"]) == ("succeeded", 2, 200)
    assert calls(remote, "/blip", run["run_id"]) == 2
