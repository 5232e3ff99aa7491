"""Approvals and waitpoints through `relayflow serve` over HTTP (authorizer + API function +
local runtime), and the `relayflow approvals` / `waitpoints` commands against it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from http_api import finished_run, publish, start_run
from relayflow_testing import eventually, tenant_client

from relayflow.cli.main import main

pytestmark = pytest.mark.integration

APPROVAL = {
    "id": "purchase",
    "start": "ask",
    "steps": {
        "ask": {
            "type": "approval",
            "title": "Buy {{ trigger.item }}?",
            "options": ["approve", "reject"],
            "form_schema": {
                "type": "object",
                "properties": {"budget": {"type": "integer", "minimum": 1}},
                "required": ["budget"],
            },
            "on_approve": "buy",
            "on_reject": "skip",
        },
        "buy": {"type": "transform", "mapping": {"budget": "{{ steps.ask.output.data.budget }}"}},
        "skip": {"type": "noop"},
    },
}
WAITPOINT = {
    "id": "callback",
    "start": "wait",
    "steps": {
        "wait": {
            "type": "waitpoint",
            "timeout_seconds": 60,
            "on_success": "done",
            "on_failure": "broken",
        },
        "done": {"type": "transform", "mapping": {"got": "{{ steps.wait.output }}"}},
        "broken": {"type": "transform", "mapping": {"why": "{{ error.Cause }}"}},
    },
}


@pytest.fixture(scope="module")
def client(api: httpx.Client) -> httpx.Client:
    publish(api, APPROVAL, WAITPOINT)
    return api


def pending_approval(client: httpx.Client, run_id: str) -> dict[str, Any]:
    def find() -> Any:
        items = client.get("/approvals").json()["items"]
        return next((a for a in items if a["run_id"] == run_id), None)

    return eventually(find)


def test_an_approval_is_listed_decided_once_and_resumes_the_run(client, server):
    run_id = start_run(client, "purchase", {"item": "a laptop"})
    approval = pending_approval(client, run_id)
    assert approval["title"] == "Buy a laptop?" and approval["status"] == "pending"
    assert "task_token" not in approval and "task_token" not in json.dumps(approval)
    path = f"/approvals/{approval['approval_id']}"
    # When the data breaks the form
    bad = client.post(f"{path}/respond", json={"option": "approve", "data": {"budget": 0}})
    assert bad.status_code == 422 and bad.json()["code"] == "unprocessable"
    # When it is answered with valid data
    ok = client.post(f"{path}/respond", json={"option": "approve", "data": {"budget": 900}})
    assert ok.status_code == 200, ok.text
    decision = ok.json()["decision"]
    assert decision["option"] == "approve" and "bootstrap" in decision["responder"]
    # Then the run continues on on_approve with the form data
    run = finished_run(client, run_id)
    assert run["status"] == "succeeded"
    assert run["output"]["steps"]["buy"]["output"] == {"budget": 900}
    # And a second answer is a clear 409
    again = client.post(f"{path}/respond", json={"option": "reject"})
    assert again.status_code == 409
    assert again.json()["code"] == "approval_decided"
    assert "already decided" in again.json()["message"]
    assert client.get(path).json()["status"] == "decided"


def test_another_tenants_approval_answers_404(client, server):
    run_id = start_run(client, "purchase", {"item": "a desk"})
    approval = pending_approval(client, run_id)
    with tenant_client(server, "globex") as other:
        path = f"/approvals/{approval['approval_id']}"
        assert other.get(path).status_code == 404
        refused = other.post(f"{path}/respond", json={"option": "approve", "data": {"budget": 5}})
        assert refused.status_code == 404 and refused.json()["code"] == "not_found"
        assert other.get("/approvals").json()["items"] == []
    # And the owner can still decide it
    answer = client.post(f"{path}/respond", json={"option": "reject", "data": {"budget": 1}})
    assert answer.status_code == 200
    assert finished_run(client, run_id)["status"] == "succeeded"


def test_waitpoint_complete_twice_and_fail_over_http(client):
    run_id = start_run(client, "callback")
    (waitpoint,) = eventually(
        lambda: client.get("/waitpoints", params={"run_id": run_id}).json()["items"]
    )
    path = f"/waitpoints/{waitpoint['waitpoint_id']}"
    assert client.get(path).json()["status"] == "pending"
    done = client.post(f"{path}/complete", json={"data": [1, 2]})
    assert done.status_code == 200 and done.json()["status"] == "completed"
    assert finished_run(client, run_id)["output"]["steps"]["done"]["output"] == {"got": [1, 2]}
    twice = client.post(f"{path}/complete", json={"data": 3})
    assert twice.status_code == 409 and twice.json()["code"] == "waitpoint_completed"
    # A second run is failed on purpose: it takes its failure route with the message
    run_id = start_run(client, "callback")
    (waitpoint,) = eventually(
        lambda: client.get("/waitpoints", params={"run_id": run_id}).json()["items"]
    )
    failed = client.post(
        f"/waitpoints/{waitpoint['waitpoint_id']}/fail", json={"message": "card declined"}
    )
    assert failed.status_code == 200 and failed.json()["status"] == "failed"
    steps = finished_run(client, run_id)["output"]["steps"]
    assert steps["broken"]["output"] == {"why": "card declined"}
    assert client.get("/waitpoints/" + "0" * 32).status_code == 404


def test_cli_lists_and_responds_to_approvals_and_completes_waitpoints(client, cli, capsys):
    run_id = start_run(client, "purchase", {"item": "a chair"})
    approval = pending_approval(client, run_id)
    # approvals list shows it
    assert main(["approvals", "list", *cli]) == 0
    assert approval["approval_id"] in capsys.readouterr().out
    # approvals respond decides it
    argv = ["approvals", "respond", approval["approval_id"], "--option", "approve"]
    assert main([*argv, "--data", '{"budget": 42}', *cli, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "decided"
    assert finished_run(client, run_id)["output"]["steps"]["buy"]["output"] == {"budget": 42}
    # a second respond fails with the API's message
    assert main([*argv, *cli]) != 0
    assert "already decided" in capsys.readouterr().err
    # waitpoints list / complete
    run_id = start_run(client, "callback")
    eventually(lambda: client.get("/waitpoints", params={"run_id": run_id}).json()["items"])
    assert main(["waitpoints", "list", "--run", run_id, *cli, "--json"]) == 0
    (waitpoint,) = json.loads(capsys.readouterr().out)["items"]
    complete = ["waitpoints", "complete", waitpoint["waitpoint_id"], "--data", '{"ok": 1}']
    assert main([*complete, *cli]) == 0
    assert "completed" in capsys.readouterr().out
    assert finished_run(client, run_id)["output"]["steps"]["done"]["output"] == {"got": {"ok": 1}}
    # and waitpoints fail on another run
    run_id = start_run(client, "callback")
    eventually(lambda: client.get("/waitpoints", params={"run_id": run_id}).json()["items"])
    assert main(["waitpoints", "list", "--run", run_id, *cli, "--json"]) == 0
    (waitpoint,) = json.loads(capsys.readouterr().out)["items"]
    fail = ["waitpoints", "fail", waitpoint["waitpoint_id"], "--error", "E1", "--message", "no"]
    assert main([*fail, *cli]) == 0
    capsys.readouterr()
    assert finished_run(client, run_id)["output"]["steps"]["broken"]["output"] == {"why": "E1: no"}


TARGETS: dict[str, Any] = {
    "yes": {"type": "noop"},
    "no": {"type": "noop"},
    "late": {"type": "noop"},
    "broken": {"type": "transform", "mapping": {"error": "{{ error.Error }}"}},
}


@pytest.mark.parametrize(
    ("action", "route", "taken"),
    [
        ("approve", {"on_approve": "yes", "on_reject": "no"}, "yes"),
        ("reject", {"on_approve": "yes", "on_reject": "no"}, "no"),
        ("route", {"on_approve": "yes", "on_reject": "no", "on_timeout": "late"}, "late"),
        ("fail", {"on_approve": "yes", "on_reject": "no", "on_failure": "broken"}, "broken"),
    ],
)
def test_an_expired_approval_takes_its_timeout_action_and_refuses_answers(
    client, action, route, taken
):
    # Given an approval that expires after a second with this timeout action
    workflow_id = f"expiring-{action}"
    definition = {
        "id": workflow_id,
        "start": "ask",
        "steps": {
            "ask": {
                "type": "approval",
                "title": "Ship it?",
                "timeout_seconds": 1,
                "timeout_action": action,
                **route,
            },
            **{key: TARGETS[key] for key in route.values()},
        },
    }
    publish(client, definition)
    run_id = start_run(client, workflow_id)
    approval = pending_approval(client, run_id)
    # When nobody answers in time
    run = finished_run(client, run_id, timeout=60)
    # Then the run took the timeout action's route
    assert run["status"] == "succeeded", run
    assert taken in run["output"]["steps"]
    if action in ("approve", "reject"):
        output = run["output"]["steps"]["ask"]["output"]
        assert (output["approved"], output["timed_out"]) == (action == "approve", True)
    if action == "fail":
        assert run["output"]["steps"]["broken"]["output"] == {"error": "States.Timeout"}
    # And a late answer is refused: the approval expired
    late = client.post(f"/approvals/{approval['approval_id']}/respond", json={"option": "approve"})
    assert late.status_code == 409 and late.json()["code"] == "approval_expired"


def test_a_waitpoint_that_times_out_takes_on_timeout_and_refuses_completion(client):
    definition = {
        "id": "late-callback",
        "start": "wait",
        "steps": {
            "wait": {
                "type": "waitpoint",
                "timeout_seconds": 1,
                "on_timeout": "gave_up",
                "on_success": "done",
            },
            "gave_up": {"type": "noop"},
            "done": {"type": "noop"},
        },
    }
    publish(client, definition)
    run_id = start_run(client, "late-callback")
    (waitpoint,) = eventually(
        lambda: client.get("/waitpoints", params={"run_id": run_id}).json()["items"]
    )
    run = finished_run(client, run_id, timeout=60)
    assert run["status"] == "succeeded" and "gave_up" in run["output"]["steps"]
    late = client.post(f"/waitpoints/{waitpoint['waitpoint_id']}/complete", json={"data": 1})
    assert late.status_code == 409 and late.json()["code"] == "waitpoint_expired"


def test_one_approval_per_item_through_a_sub_workflow_in_a_for_each(client):
    # Given a child that asks about one line, started once per line of the order
    child = {
        "id": "ask-line",
        "start": "ask",
        "steps": {
            "ask": {
                "type": "approval",
                "title": "Ship line {{ trigger.line }}?",
                "timeout_seconds": 600,
            }
        },
    }
    parent = {
        "id": "ship-lines",
        "start": "each",
        "steps": {
            "each": {"type": "for_each", "items": "{{ trigger.lines }}", "step": "ask"},
            "ask": {
                "type": "sub_workflow",
                "workflow_id": "ask-line",
                "input": {"line": "{{ item }}"},
            },
        },
    }
    publish(client, child, parent)
    run_id = start_run(client, "ship-lines", {"lines": ["L1", "L2"]})

    # When both requests are answered
    def both() -> Any:
        items = client.get("/approvals").json()["items"]
        mine = [a for a in items if a["title"] in ("Ship line L1?", "Ship line L2?")]
        return mine if len(mine) == 2 else None

    requests = eventually(both)
    assert len({a["run_id"] for a in requests}) == 2  # one child run each
    for approval, option in zip(requests, ("approve", "reject"), strict=True):
        path = f"/approvals/{approval['approval_id']}/respond"
        assert client.post(path, json={"option": option}).status_code == 200
    # Then the parent finishes with each child's decision
    run = finished_run(client, run_id)
    assert run["status"] == "succeeded", run
    decisions = sorted(
        item["output"]["steps"]["ask"]["output"]["option"]
        for item in run["output"]["steps"]["each"]["output"]
    )
    assert decisions == ["approve", "reject"]
