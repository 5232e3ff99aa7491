"""Run modes over HTTP and the CLI against a LocalServer: ``runs start --dry-run`` and
``--step-through``, ``runs continue`` (409 while a step runs) and ``--to-end``."""

from __future__ import annotations

import time

import httpx
import pytest
from http_api import cli_json, finished_run
from workflow_shapes import THREE_STEPS

from relayflow.cli.main import main

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def http(api: httpx.Client) -> httpx.Client:
    assert api.put("/workflows/three", json=THREE_STEPS).status_code in (200, 201)
    return api


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


def test_step_through_over_the_cli_and_http(http, cli, capsys):
    # Given a step-through run started from the CLI
    run = cli_json(capsys, ["runs", "start", "three", "--step-through", *cli])
    assert run["step_through"] is True and run["dry_run"] is False
    assert gate_of(http, run["run_id"]) == "one"
    # When it is continued once, the first step is released
    assert main(["runs", "continue", run["run_id"], *cli]) == 0
    assert f"run {run['run_id']}: step one released" in capsys.readouterr().out
    # And each further continue releases exactly the step the run waits before
    assert gate_of(http, run["run_id"]) == "two"
    released = http.post(f"/runs/{run['run_id']}/continue", json={})
    assert released.status_code == 200 and released.json()["released"] == "two"
    assert gate_of(http, run["run_id"]) == "three"
    # When it is told to run to its end, it finishes
    assert main(["runs", "continue", run["run_id"], "--to-end", *cli]) == 0
    assert finished_run(http, run["run_id"])["status"] == "succeeded"
    # And continuing a finished run is a 409 naming the reason
    assert main(["runs", "continue", run["run_id"], *cli]) == 1
    assert "409 conflict" in capsys.readouterr().err


def test_a_dry_run_started_over_the_cli_is_dry(http, cli, capsys):
    run = cli_json(capsys, ["runs", "start", "three", "--dry-run", *cli])
    assert run["dry_run"] is True
    detail = finished_run(http, run["run_id"])
    assert detail["status"] == "succeeded" and detail["dry_run"] is True
    assert detail["engine_version"]
    # A request that names an unknown run mode is refused by the schema
    refused = http.post("/workflows/three/runs", json={"dry": True})
    assert refused.status_code == 422
    # And continuing a run that is not stepping through is a 409 in the error model
    conflict = http.post(f"/runs/{run['run_id']}/continue", json={"to_end": True})
    assert conflict.status_code == 409 and conflict.json()["code"] == "conflict"
