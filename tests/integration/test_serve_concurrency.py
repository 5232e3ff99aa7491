"""``relayflow serve`` answers requests concurrently over one in-memory state: a request that
is held open does not hold up another client, and concurrent writers and log lines stay
intact."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from relayflow.control.service import ControlPlane
from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration

#: Generous: the assertion is that the GET finishes while the slow request is still held,
#: not how fast; before requests ran concurrently the GET never finished while it was held.
GET_TIMEOUT_SECONDS = 20.0
HOLD_LIMIT_SECONDS = 60.0


def noop(workflow_id: str) -> dict[str, Any]:
    return {
        "id": workflow_id,
        "start": "mark",
        "steps": {"mark": {"type": "transform", "mapping": {"id": workflow_id}}},
    }


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(time_scale=0.01, access_log=io.StringIO()) as local:
        yield local


@pytest.fixture
def api(server: LocalServer) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url,
        headers={"Authorization": f"Bearer {server.bootstrap_key}"},
        timeout=GET_TIMEOUT_SECONDS,
    ) as client:
        yield client


def test_a_held_request_does_not_delay_a_concurrent_get(
    server: LocalServer, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a workflow whose reads are held open on an event until the test releases them
    for workflow_id in ("slow", "quick"):
        assert api.put(f"/workflows/{workflow_id}", json=noop(workflow_id)).status_code == 201
    entered, release = threading.Event(), threading.Event()
    original = ControlPlane.get_workflow

    def held_get_workflow(self: ControlPlane, tenant: str, workflow_id: str) -> Any:
        if workflow_id == "slow":
            entered.set()
            release.wait(HOLD_LIMIT_SECONDS)
        return original(self, tenant, workflow_id)

    monkeypatch.setattr(ControlPlane, "get_workflow", held_get_workflow)
    slow_answer: list[httpx.Response] = []
    slow = threading.Thread(target=lambda: slow_answer.append(api.get("/workflows/slow")))
    slow.start()
    try:
        assert entered.wait(GET_TIMEOUT_SECONDS), "the slow request never reached the API"
        # When another client reads while the slow request is held
        quick = api.get("/workflows/quick")
        listed = api.get("/workflows")
        # Then both are answered in full while the slow one is still being held
        assert not release.is_set() and slow.is_alive()
        assert quick.status_code == 200 and quick.json()["workflow_id"] == "quick"
        assert {w["workflow_id"] for w in listed.json()["items"]} >= {"slow", "quick"}
    finally:
        release.set()
        slow.join(GET_TIMEOUT_SECONDS)
    # And the slow request gets its own answer, not the concurrent one's
    assert slow_answer[0].status_code == 200
    assert slow_answer[0].json()["workflow_id"] == "slow"


def test_concurrent_requests_each_get_their_own_answer(
    server: LocalServer, api: httpx.Client
) -> None:
    # Given 24 workflows registered by 8 clients at once
    ids = [f"par-{n}" for n in range(24)]
    errors: list[str] = []

    def register(chunk: list[str]) -> None:
        with httpx.Client(
            base_url=server.url, headers=dict(api.headers), timeout=GET_TIMEOUT_SECONDS
        ) as client:
            for workflow_id in chunk:
                put = client.put(f"/workflows/{workflow_id}", json=noop(workflow_id))
                got = client.get(f"/workflows/{workflow_id}")
                if put.status_code != 201 or got.json().get("workflow_id") != workflow_id:
                    errors.append(f"{workflow_id}: {put.status_code} {got.text[:200]}")

    threads = [threading.Thread(target=register, args=(ids[n::8],)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HOLD_LIMIT_SECONDS)
    # Then every request was answered with its own workflow, and all are stored
    assert errors == []
    listed = api.get("/workflows", params={"limit": 100}).json()["items"]
    assert set(ids) <= {w["workflow_id"] for w in listed}


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """What the Relayflow logger writes during the test."""
    from relayflow.observability import logger

    handler = logger.registered_handler
    stream = io.StringIO()
    previous = handler.setStream(stream)  # type: ignore[attr-defined]
    try:
        yield stream
    finally:
        handler.setStream(previous)  # type: ignore[attr-defined]


def test_log_lines_of_concurrent_functions_keep_their_own_function_name(
    log_stream: io.StringIO,
) -> None:
    # Given the API and the recorder writing log lines from different threads at once
    from relayflow.local.lambda_endpoint import LambdaContext
    from relayflow.observability import function_handler, logger

    barrier = threading.Barrier(2)

    def make(name: str) -> Any:
        @function_handler
        def handler(event: dict[str, Any], context: Any) -> None:
            barrier.wait(60)  # bounds only a hung test: a loaded machine starts threads late
            for n in range(200):
                logger.info("line", extra={"writer": name, "n": n})

        return handler

    threads = [
        threading.Thread(
            target=make(name),
            args=({}, LambdaContext(function_name=name, invoked_function_arn=f"arn:{name}")),
        )
        for name in ("relayflow-api", "relayflow-recorder")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    err = log_stream.getvalue()
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    mine = [line for line in lines if line.get("message") == "line"]
    # Then no line was lost and each carries the name of the function that wrote it
    assert len(mine) == 400
    assert all(line["function_name"] == line["writer"] for line in mine)
    assert "dictionary changed size" not in err
