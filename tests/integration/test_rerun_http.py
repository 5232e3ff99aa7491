"""Rerun from a step over HTTP (``POST /runs/{id}/rerun``) against a LocalServer: the new run
starts at the chosen step with the earlier run's trigger and outputs, on the pinned or the
live version; bad steps are 422 ``unknown_step``, other tenants' runs 404."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from relayflow_testing import Received, Reply, Server, tenant_client

from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration


def fail(received: Received) -> Reply:
    return 500, {"Content-Type": "application/json"}, b'{"error": "down"}'


def ok(received: Received) -> Reply:
    return 200, {"Content-Type": "application/json"}, b'{"id": "ch_9"}'


def definition(url: str, label: str, workflow_id: str = "orders") -> dict[str, Any]:
    return {
        "id": workflow_id,
        "engine": "standard",  # its timeline keeps every step's output (Express: test below)
        "start": "prepare",
        "steps": {
            "prepare": {
                "type": "transform",
                "mapping": {"order": "{{ trigger.order }}", "at": "{{ run.id }}"},
                "on_success": "charge",
            },
            "charge": {"type": "webhook_out", "url": f"{url}/charge", "on_success": "receipt"},
            "receipt": {
                "type": "transform",
                "mapping": {
                    "label": label,
                    "prepared": "{{ steps.prepare.output }}",
                    "charge": "{{ steps.charge.output.body }}",
                },
            },
        },
    }


@pytest.fixture(scope="module")
def http(server: LocalServer, remote: Server) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers={"X-Api-Key": server.bootstrap_key}, timeout=30
    ) as client:
        assert client.put("/workflows/orders", json=definition(remote.url, "v1")).is_success
        yield client


def settled(http: httpx.Client, run_id: str) -> dict[str, Any]:
    for _ in range(800):
        run = http.get(f"/runs/{run_id}").json()
        if run["status"] not in ("running", "queued"):
            return run
        time.sleep(0.025)
    raise AssertionError(f"run {run_id} never finished")


def failed_run(http: httpx.Client, remote: Server) -> dict[str, Any]:
    remote.reply = fail
    started = http.post("/workflows/orders/runs", json={"input": {"order": "A-7"}})
    assert started.status_code == 201, started.text
    run = settled(http, started.json()["run_id"])
    assert (run["status"], run["failing_step"]) == ("failed", "charge")
    return run


def test_a_rerun_starts_at_the_step_with_the_earlier_outputs(http, remote):
    # Given a run that failed at charge after prepare succeeded
    first = failed_run(http, remote)
    prepared = next(s for s in first["steps"] if s["key"] == "prepare")["output"]
    assert prepared["order"] == "A-7"
    calls = len(remote.to("/charge"))

    # When the remote is back and the run is rerun from charge
    remote.reply = ok
    answer = http.post(f"/runs/{first['run_id']}/rerun", json={"from_step": "charge"})

    # Then a new run starts there, keeps prepare's output and succeeds
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["run_id"] != first["run_id"]
    assert (body["rerun_of"], body["rerun_from"], body["version"]) == (
        first["run_id"],
        "charge",
        1,
    )
    rerun = settled(http, body["run_id"])
    assert rerun["status"] == "succeeded", rerun
    assert [s["key"] for s in rerun["steps"]] == ["charge", "receipt"]
    receipt = next(s for s in rerun["steps"] if s["key"] == "receipt")["output"]
    assert receipt["prepared"] == prepared
    assert receipt["charge"] == {"id": "ch_9"}
    assert rerun["input"] == {"order": "A-7"}
    assert len(remote.to("/charge")) == calls + 1

    # And a rerun of the rerun from receipt carries outputs from both runs, calling nothing
    again = http.post(f"/runs/{rerun['run_id']}/rerun", json={"from_step": "receipt"})
    assert again.status_code == 201, again.text
    last = settled(http, again.json()["run_id"])
    assert [s["key"] for s in last["steps"]] == ["receipt"]
    assert last["steps"][0]["output"]["prepared"] == prepared
    assert last["steps"][0]["output"]["charge"] == {"id": "ch_9"}
    assert len(remote.to("/charge")) == calls + 1


def test_current_runs_the_live_version_and_pinned_the_earlier_one(http, remote):
    first = failed_run(http, remote)
    remote.reply = ok
    # Given a version 2 published after the run failed
    assert http.put("/workflows/orders", json=definition(remote.url, "v2")).is_success
    try:
        pinned = http.post(f"/runs/{first['run_id']}/rerun", json={"from_step": "charge"})
        current = http.post(
            f"/runs/{first['run_id']}/rerun", json={"from_step": "charge", "version": "current"}
        )
        labels = {}
        for answer in (pinned, current):
            assert answer.status_code == 201, answer.text
            run = settled(http, answer.json()["run_id"])
            labels[run["version"]] = run["steps"][-1]["output"]["label"]
        # Then each ran the version it asked for
        assert labels == {1: "v1", 2: "v2"}
    finally:
        assert http.post("/workflows/orders/rollback", json={"version": 1}).is_success


def test_bad_reruns_are_refused_with_stable_codes(http, remote, server):
    first = failed_run(http, remote)
    run_id = first["run_id"]
    # An unknown step: 422 naming the steps a rerun may start at
    unknown = http.post(f"/runs/{run_id}/rerun", json={"from_step": "nope"})
    assert unknown.status_code == 422
    assert unknown.json()["code"] == "unknown_step"
    assert unknown.json()["details"] == {"steps": ["prepare", "charge", "receipt"]}
    # A body that breaks the model: 422 unprocessable
    bad = http.post(f"/runs/{run_id}/rerun", json={"from_step": "charge", "version": "9"})
    assert bad.status_code == 422
    # and says what is allowed, with the fix when one is near
    typo = http.post(f"/runs/{run_id}/rerun", json={"from_step": "charge", "version": "curent"})
    assert typo.status_code == 422
    (detail,) = typo.json()["details"]
    assert detail["path"] == "body.version" and "did you mean 'current'" in detail["message"]
    # Another tenant sees no such run
    with tenant_client(server, "someone-else") as other:
        assert other.post(f"/runs/{run_id}/rerun", json={"from_step": "charge"}).status_code == 404
    # The OpenAPI document describes the operation
    paths = http.get("/openapi.json").json()["paths"]
    assert "post" in paths["/runs/{run_id}/rerun"]


def test_a_rerun_keeps_the_runs_modes_unless_the_request_says_otherwise(http, remote):
    # Given a dry run (its charge recorded the call and sent nothing)
    dryable = definition(remote.url, "d", "dryable")
    dryable["steps"]["charge"]["dry_run_output"] = {"body": {"id": "dry"}}
    assert http.put("/workflows/dryable", json=dryable).is_success
    remote.reply = ok
    calls = len(remote.to("/charge"))
    started = http.post(
        "/workflows/dryable/runs", json={"input": {"order": "D-1"}, "dry_run": True}
    )
    assert started.status_code == 201, started.text
    dry = settled(http, started.json()["run_id"])
    assert dry["status"] == "succeeded" and len(remote.to("/charge")) == calls
    # When it is rerun from charge, Then the rerun is a dry run too and sends nothing
    again = http.post(f"/runs/{dry['run_id']}/rerun", json={"from_step": "charge"})
    assert again.status_code == 201, again.text
    assert again.json()["dry_run"] is True
    assert settled(http, again.json()["run_id"])["status"] == "succeeded"
    assert len(remote.to("/charge")) == calls
    # And only a rerun that asks to act does
    live = http.post(f"/runs/{dry['run_id']}/rerun", json={"from_step": "charge", "dry_run": False})
    assert live.status_code == 201, live.text
    assert live.json()["dry_run"] is False
    assert settled(http, live.json()["run_id"])["status"] == "succeeded"
    assert len(remote.to("/charge")) == calls + 1


def test_a_step_through_run_is_rerun_only_when_asked_to_run_without_pauses(http, remote):
    # Given a step-through run, continued to its end
    remote.reply = ok
    started = http.post(
        "/workflows/orders/runs", json={"input": {"order": "S-1"}, "step_through": True}
    )
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    assert http.post(f"/runs/{run_id}/continue", json={"to_end": True}).status_code == 200
    assert settled(http, run_id)["status"] == "succeeded"
    # When it is rerun as it ran, Then 422 mode_not_carried says how to rerun it
    refused = http.post(f"/runs/{run_id}/rerun", json={"from_step": "charge"})
    assert refused.status_code == 422, refused.text
    assert refused.json()["code"] == "mode_not_carried"
    assert '"step_through": false' in refused.json()["message"]
    # And with step_through false it reruns, acting
    calls = len(remote.to("/charge"))
    again = http.post(f"/runs/{run_id}/rerun", json={"from_step": "charge", "step_through": False})
    assert again.status_code == 201, again.text
    assert settled(http, again.json()["run_id"])["status"] == "succeeded"
    assert len(remote.to("/charge")) == calls + 1


def fail_at(*paths: str):
    """A remote that fails the calls to ``paths`` and answers the others."""

    def reply(received: Received) -> Reply:
        return fail(received) if received.path in paths else ok(received)

    return reply


def test_a_rerun_carries_settled_branch_failures_and_fallback_outputs(http, remote):
    # Given a run whose settle-all branch p1 failed (recorded), whose step a continued with
    # its fallback, and which then failed at charge
    definition = {
        "id": "recovering",
        "engine": "standard",
        "start": "fan",
        "steps": {
            "fan": {
                "type": "parallel",
                "branches": ["p1", "p2"],
                "settle": "all",
                "on_success": "a",
            },
            "p1": {"type": "webhook_out", "url": f"{remote.url}/p1", "retry": "none"},
            "p2": {"type": "transform", "mapping": {"two": 2}},
            "a": {
                "type": "webhook_out",
                "url": f"{remote.url}/a",
                "retry": "none",
                "on_error": {"action": "continue", "output": {"v": 7}},
                "on_success": "charge",
            },
            "charge": {
                "type": "webhook_out",
                "url": f"{remote.url}/charge",
                "retry": "none",
                "on_success": "report",
            },
            "report": {
                "type": "transform",
                "mapping": {
                    "p1": "{{ steps.p1.status }}",
                    "p1_error": "{{ steps.p1.error.Error }}",
                    "two": "{{ steps.p2.output.two }}",
                    "v": "{{ steps.a.output.v }}",
                    "a_status": "{{ steps.a.status }}",
                },
            },
        },
    }
    assert http.put("/workflows/recovering", json=definition).is_success
    remote.reply = fail_at("/p1", "/a", "/charge")
    started = http.post("/workflows/recovering/runs", json={"input": {}})
    first = settled(http, started.json()["run_id"])
    assert (first["status"], first["failing_step"]) == ("failed", "charge")
    # When charge works again and the run is rerun from it
    remote.reply = fail_at("/p1", "/a")
    answer = http.post(f"/runs/{first['run_id']}/rerun", json={"from_step": "charge"})
    assert answer.status_code == 201, answer.text
    rerun = settled(http, answer.json()["run_id"])
    # Then the steps after it read the branch's failed record and the fallback as before
    assert rerun["status"] == "succeeded", rerun
    report = next(s for s in rerun["steps"] if s["key"] == "report")["output"]
    assert report == {
        "p1": "failed",
        "p1_error": "Relayflow.HttpError",
        "two": 2,
        "v": 7,
        "a_status": "fallback",
    }


def test_an_express_run_without_its_native_outputs_is_refused_with_the_fix(http, remote):
    # Given an Express workflow (its timeline records no output of native steps)
    express = {**definition(remote.url, "x", "quick"), "engine": "express"}
    assert http.put("/workflows/quick", json=express).is_success
    remote.reply = fail
    run_id = http.post("/workflows/quick/runs", json={"input": {"order": "Q-1"}}).json()["run_id"]
    assert settled(http, run_id)["status"] == "failed"
    remote.reply = ok
    # A rerun from charge would lose prepare's output: 409 naming it and the way out
    refused = http.post(f"/runs/{run_id}/rerun", json={"from_step": "charge"})
    assert refused.status_code == 409, refused.text
    assert refused.json()["code"] == "outputs_not_recorded"
    assert refused.json()["details"] == {"steps": ["prepare"]}
    assert "engine: standard" in refused.json()["message"]
    # From the start nothing is lost
    again = http.post(f"/runs/{run_id}/rerun", json={"from_step": "prepare"})
    assert again.status_code == 201, again.text
    assert settled(http, again.json()["run_id"])["status"] == "succeeded"


def test_the_cli_reruns_and_lists_workflows_and_breakers(http, remote, server, capsys, monkeypatch):
    import json

    from relayflow.cli.main import main

    monkeypatch.delenv("RELAYFLOW_API_URL", raising=False)
    monkeypatch.delenv("RELAYFLOW_API_KEY", raising=False)
    api = ["--api", server.url, "--api-key", server.bootstrap_key]
    first = failed_run(http, remote)
    remote.reply = ok
    # relayflow runs rerun RUN --from STEP
    assert main(["runs", "rerun", first["run_id"], "--from", "charge", *api]) == 0
    line = capsys.readouterr().out
    assert f"rerun of {first['run_id']} from charge, version 1" in line
    rerun_id = line.split()[1].rstrip(":")
    assert settled(http, rerun_id)["rerun_of"] == first["run_id"]
    # A step that is not there: the API's 422, exit 2
    assert main(["runs", "rerun", first["run_id"], "--from", "nope", *api]) == 2
    assert "unknown_step" in capsys.readouterr().err
    # relayflow workflows list / get
    assert main(["workflows", "list", *api, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["items"]
    assert "orders" in {w["workflow_id"] for w in listed}
    assert main(["workflows", "get", "orders", *api]) == 0
    assert "workflow orders" in capsys.readouterr().out
    # relayflow breakers list (none tripped) and a reset of an unknown breaker (404, exit 1)
    assert main(["breakers", "list", *api, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["items"] == []
    assert main(["breakers", "reset", "tool:nothing", *api]) == 1
