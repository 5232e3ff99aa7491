"""Parked runs over HTTP and the CLI against a LocalServer (``relayflow serve``):
``GET /runs?status=parked``, ``POST /runs/{id}/resume`` (200, 404, 409, 422),
``relayflow runs list --parked``, ``relayflow runs resume`` and the outcome ``runs get`` shows."""

from __future__ import annotations

import json

import httpx
import pytest
from http_api import cli_json, run_in_status
from relayflow_testing import Received, Reply, Server, tenant_client
from workflow_shapes import charging

from relayflow.cli.main import main

pytestmark = pytest.mark.integration
WITH_REMOTE = True


def fail(received: Received) -> Reply:
    return 500, {"Content-Type": "application/json"}, b'{"error": "down"}'


def ok(received: Received) -> Reply:
    return 200, {"Content-Type": "application/json"}, b'{"id": "ch_9"}'


@pytest.fixture(scope="module")
def http(api: httpx.Client, remote: Server) -> httpx.Client:
    definition = charging(remote.url, {"charge": "{{ steps.charge.output }}"})
    assert api.put("/workflows/charging", json=definition).status_code in (200, 201)
    return api


def parked_run(http: httpx.Client, remote: Server) -> str:
    remote.reply = fail
    run_id = http.post("/workflows/charging/runs", json={"input": {}}).json()["run_id"]
    run_in_status(http, run_id, "parked")
    return run_id


def test_resume_over_the_cli_retries_the_step(http, remote, cli, capsys):
    remote.requests.clear()
    run_id = parked_run(http, remote)
    # The parked run is listed over HTTP and by the CLI, with its step and error
    listed = http.get("/runs", params={"status": "parked"}).json()["items"]
    assert [(r["run_id"], r["parked"]["step"]) for r in listed] == [(run_id, "charge")]
    parked_error = listed[0]["parked"]["error"]
    assert parked_error["Error"] == "Relayflow.HttpError"
    # (with the endpoint's status and body, never a stack trace)
    assert parked_error["details"] == {"status": 500, "body": '{"error": "down"}'}
    assert "answered 500" in parked_error["Cause"] and "stackTrace" not in json.dumps(listed)
    page = cli_json(capsys, ["runs", "list", "--parked", *cli])
    assert [r["run_id"] for r in page["items"]] == [run_id]
    # When the remote recovers and the run is resumed with retry over the CLI
    remote.reply = ok
    answer = cli_json(capsys, ["runs", "resume", run_id, "--action", "retry", *cli])
    assert answer == {"run_id": run_id, "action": "retry", "step": "charge", "status": "running"}
    run = run_in_status(http, run_id, "succeeded")
    # Then the step acted twice and the run's verdict is shown by GET and the CLI
    assert len(remote.to("/charge")) == 2
    assert run["outcome"] == "succeeded"
    assert main(["runs", "get", run_id, *cli]) == 0
    assert "SUCCEEDED" in capsys.readouterr().out
    assert http.get("/runs", params={"status": "parked"}).json()["items"] == []


def test_resume_answers_422_404_and_409_over_http(http, remote, server):
    run_id = parked_run(http, remote)
    # Reserved context keys: 422 naming them; the run stays parked
    refused = http.post(
        f"/runs/{run_id}/resume", json={"action": "skip", "context": {"steps": {}, "run": 1}}
    )
    assert refused.status_code == 422
    assert refused.json()["code"] == "unprocessable"
    assert {d["path"] for d in refused.json()["details"]} == {"context.run", "context.steps"}
    # An unknown action: 422 from the request model
    assert http.post(f"/runs/{run_id}/resume", json={"action": "ignore"}).status_code == 422
    # Another tenant: 404, and the run is unchanged
    with tenant_client(server, "other", timeout=30) as other:
        assert other.post(f"/runs/{run_id}/resume", json={"action": "fail"}).status_code == 404
        assert other.get("/runs", params={"status": "parked"}).json()["items"] == []
    assert http.get(f"/runs/{run_id}").json()["status"] == "parked"
    # When it is skipped with an output, it succeeds with that output downstream
    skipped = http.post(f"/runs/{run_id}/resume", json={"action": "skip", "output": {"id": "m"}})
    assert skipped.status_code == 200
    run = run_in_status(http, run_id, "succeeded")
    assert run["steps"][-1]["output"] == {"charge": {"id": "m"}}
    # And a second resume is a conflict: the run is no longer parked
    again = http.post(f"/runs/{run_id}/resume", json={"action": "retry"})
    assert (again.status_code, again.json()["code"]) == (409, "conflict")


def test_a_failed_park_ends_the_run_failed(http, remote, cli, capsys):
    run_id = parked_run(http, remote)
    answer = cli_json(capsys, ["runs", "resume", run_id, "--action", "fail", *cli])
    assert answer["action"] == "fail"
    run = run_in_status(http, run_id, "failed")
    assert (run["outcome"], run["error"]) == ("failed", "Relayflow.HttpError")
