"""Run modes over HTTP and the CLI against a LocalServer: ``runs start --dry-run`` and
``--step-through``, ``runs continue`` (409 while a step runs) and ``--to-end``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from relayflow.cli.main import main
from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration

THREE = {
    "id": "three",
    # Step-through pauses at callback gates, which only Standard machines have (engines.md).
    "engine": "standard",
    "start": "one",
    "steps": {
        "one": {"type": "transform", "mapping": {"n": 1}, "on_success": "two"},
        "two": {"type": "transform", "mapping": {"n": 2}, "on_success": "three"},
        "three": {"type": "transform", "mapping": {"n": 3}},
    },
}


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(time_scale=0.001) as local:
        yield local


@pytest.fixture(scope="module")
def http(server: LocalServer) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url,
        headers={"Authorization": f"Bearer {server.bootstrap_key}"},
        timeout=30,
    ) as client:
        assert client.put("/workflows/three", json=THREE).status_code in (200, 201)
        yield client


@pytest.fixture
def api(server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.delenv("RELAYFLOW_API_URL", raising=False)
    monkeypatch.delenv("RELAYFLOW_API_KEY", raising=False)
    return ["--api", server.url, "--api-key", server.bootstrap_key]


def cli_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Any:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def gate_of(http: httpx.Client, run_id: str) -> str:
    for _ in range(400):
        gates = [
            w["step"]
            for w in http.get("/waitpoints", params={"run_id": run_id}).json()["items"]
            if w["label"] == "step-through" and w["status"] == "pending"
        ]
        if gates:
            return gates[-1]
        time.sleep(0.025)
    raise AssertionError("no gate is pending")


def ended(http: httpx.Client, run_id: str) -> dict[str, Any]:
    for _ in range(400):
        run = http.get(f"/runs/{run_id}").json()
        if run["status"] != "running":
            return run
        time.sleep(0.025)
    raise AssertionError("the run did not end")


def test_step_through_over_the_cli_and_http(http, api, capsys):
    # Given a step-through run started from the CLI
    run = cli_json(capsys, ["runs", "start", "three", "--step-through", *api])
    assert run["step_through"] is True and run["dry_run"] is False
    assert gate_of(http, run["run_id"]) == "one"
    # When it is continued once, the first step is released
    assert main(["runs", "continue", run["run_id"], *api]) == 0
    assert f"run {run['run_id']}: step one released" in capsys.readouterr().out
    # And each further continue releases exactly the step the run waits before
    assert gate_of(http, run["run_id"]) == "two"
    released = http.post(f"/runs/{run['run_id']}/continue", json={})
    assert released.status_code == 200 and released.json()["released"] == "two"
    assert gate_of(http, run["run_id"]) == "three"
    # When it is told to run to its end, it finishes
    assert main(["runs", "continue", run["run_id"], "--to-end", *api]) == 0
    assert ended(http, run["run_id"])["status"] == "succeeded"
    # And continuing a finished run is a 409 naming the reason
    assert main(["runs", "continue", run["run_id"], *api]) == 1
    assert "409 conflict" in capsys.readouterr().err


def test_a_dry_run_started_over_the_cli_is_dry(http, api, capsys):
    run = cli_json(capsys, ["runs", "start", "three", "--dry-run", *api])
    assert run["dry_run"] is True
    detail = ended(http, run["run_id"])
    assert detail["status"] == "succeeded" and detail["dry_run"] is True
    assert detail["engine_version"]
    # A request that names an unknown run mode is refused by the schema
    refused = http.post("/workflows/three/runs", json={"dry": True})
    assert refused.status_code == 422
    # And continuing a run that is not stepping through is a 409 in the error model
    conflict = http.post(f"/runs/{run['run_id']}/continue", json={"to_end": True})
    assert conflict.status_code == 409 and conflict.json()["code"] == "conflict"
