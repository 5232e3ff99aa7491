"""``relayflow serve --state DIR``: workflows, runs, API keys and waits outlive a restart.

Each server is its own process (``relayflow serve``), stopped with SIGTERM as a terminal or a
process manager stops it, then started again on the same directory."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_api import read_banner, relayflow_command, serve_process
from relayflow_testing import eventually

pytestmark = pytest.mark.integration

WORKFLOW = {
    "id": "kept",
    "start": "call",
    "steps": {
        # Loopback is refused by the SSRF guard: the step fails and parks the run.
        "call": {
            "type": "webhook_out",
            "url": "http://127.0.0.1:9/x",
            "on_error": {"action": "park"},
            "on_success": "ask",
        },
        "ask": {
            "type": "approval",
            "title": "Ship it?",
            "timeout_seconds": 600,
            "on_approve": "done",
            "on_reject": "done",
        },
        "done": {"type": "transform", "mapping": {"shipped": "{{ steps.call.output.label }}"}},
    },
}


@dataclass
class Serve:
    url: str
    key: str
    admin_token: str
    banner: str

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"X-Api-Key": self.key}, timeout=30)


@contextmanager
def serve(state: Path) -> Iterator[Serve]:
    """``relayflow serve --state state`` until the block ends (then SIGTERM, as Ctrl-C)."""
    process = serve_process(relayflow_command("serve", "--port", "0", "--state", str(state)))
    try:
        text = read_banner(process, "State (")
        url = re.search(r"control API on (http://\S+)", text)
        key = re.search(r"API key of tenant 'local': (\S+)", text)
        admin = re.search(r"admin token \(relayflow keys --admin-token\): (\S+)", text)
        assert url and key and admin, text
        yield Serve(url.group(1), key.group(1), admin.group(1), text)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    assert process.returncode == 0


def run_in(client: httpx.Client, run_id: str, *statuses: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        run = client.get(f"/runs/{run_id}").json()
        return run if run["status"] in statuses else None

    return eventually(reached)


def start(client: httpx.Client) -> httpx.Response:
    return client.post(
        "/workflows/kept/runs", json={"input": {}}, headers={"Idempotency-Key": "order-7"}
    )


def test_a_restart_keeps_a_parked_run_resumable_and_an_idempotency_key_deduplicated(tmp_path):
    state = tmp_path / "state"
    # Given a server with a workflow, and a run (started with an idempotency key) that parked
    with serve(state) as first, first.client() as api:
        assert "kept in" in first.banner and "restored" not in first.banner
        assert api.put("/workflows/kept", json=WORKFLOW).status_code == 201
        started = start(api)
        assert started.status_code == 201, started.text
        run_id = started.json()["run_id"]
        parked = run_in(api, run_id, "parked")
        assert parked["parked"]["step"] == "call"
        assert api.get("/").json()["state"].startswith(f"kept in {state}")

    # When the server starts again on the same directory
    with serve(state) as second, second.client() as api:
        # Then it says what it brought back, and the key printed last time still works
        assert second.key == first.key
        assert re.search(
            r"restored from .*: 1 workflow\(s\), 1 run\(s\); 1 run\(s\)", second.banner
        )
        assert api.get("/workflows/kept").json()["live_version"] == 1
        # and the same idempotency key answers with the same run, not a new one
        again = start(api)
        assert again.status_code == 200 and again.json()["run_id"] == run_id
        # and the run is still parked at its step, with one park to answer, and resumes
        parked = run_in(api, run_id, "parked")
        assert parked["parked"]["step"] == "call"
        assert [
            r["run_id"] for r in api.get("/runs", params={"status": "parked"}).json()["items"]
        ] == [run_id]
        resumed = api.post(
            f"/runs/{run_id}/resume", json={"action": "skip", "output": {"label": "L-1"}}
        )
        assert resumed.status_code == 200, resumed.text
        # and the run goes on to its approval
        approval = eventually(lambda: api.get("/approvals").json()["items"])[0]
        assert approval["run_id"] == run_id

    # And a restart while the run waits for its approval keeps that wait: the same approval
    # answers and the run ends
    with serve(state) as third, third.client() as api:
        pending = eventually(lambda: api.get("/approvals").json()["items"])
        assert [a["approval_id"] for a in pending] == [approval["approval_id"]]
        answered = api.post(
            f"/approvals/{approval['approval_id']}/respond", json={"option": "approve"}
        )
        assert answered.status_code == 200, answered.text
        run = run_in(api, run_id, "succeeded", "failed")
        assert run["status"] == "succeeded", run
        # with one timeline across the restarts
        steps = {s["key"]: s["status"] for s in run["steps"]}
        assert steps == {"call": "skipped", "ask": "succeeded", "done": "succeeded"}
        assert run["output"]["steps"]["done"]["output"] == {"shipped": "L-1"}

    # And the ended run, its timeline and its key are there after one more restart
    with serve(state) as fourth, fourth.client() as api:
        kept = api.get(f"/runs/{run_id}").json()
        assert kept["status"] == "succeeded"
        assert [s["key"] for s in kept["steps"]] == ["call", "ask", "done"]
        assert start(api).json()["run_id"] == run_id


CHILD = {
    "id": "child",
    "start": "ask",
    "steps": {
        "ask": {
            "type": "approval",
            "title": "Child?",
            "timeout_seconds": 600,
            "on_approve": "done",
        },
        "done": {"type": "transform", "mapping": {"child": True}},
    },
}
PARENT = {
    "id": "parent",
    "start": "sub",
    "steps": {
        "sub": {"type": "sub_workflow", "workflow_id": "child", "on_success": "end"},
        "end": {"type": "transform", "mapping": {"child_run": "{{ steps.sub.output.run_id }}"}},
    },
}


def test_a_sub_workflow_waiting_at_a_restart_goes_on_through_its_parent(tmp_path):
    state = tmp_path / "state"
    # Given a parent run whose child run waits for an approval
    with serve(state) as first, first.client() as api:
        for definition in (CHILD, PARENT):
            assert api.put(f"/workflows/{definition['id']}", json=definition).status_code == 201
        parent_id = api.post("/workflows/parent/runs", json={"input": {}}).json()["run_id"]
        (asked,) = eventually(lambda: api.get("/approvals").json()["items"])
    # When the server restarts, the same child run asks the same approval again
    with serve(state) as second, second.client() as api:
        pending = eventually(lambda: api.get("/approvals").json()["items"])
        assert [(a["approval_id"], a["run_id"]) for a in pending] == [
            (asked["approval_id"], asked["run_id"])
        ]
        # and once it is approved, the child and then the parent end
        approved = api.post(
            f"/approvals/{asked['approval_id']}/respond", json={"option": "approve"}
        )
        assert approved.status_code == 200, approved.text
        parent = run_in(api, parent_id, "succeeded", "failed")
        assert parent["status"] == "succeeded", parent
        assert parent["output"]["steps"]["end"]["output"] == {"child_run": asked["run_id"]}
        assert run_in(api, asked["run_id"], "succeeded", "failed")["status"] == "succeeded"


def test_a_run_that_cannot_go_on_after_a_restart_fails_with_a_clear_error(tmp_path):
    state = tmp_path / "state"
    with serve(state) as first, first.client() as api:
        api.put("/workflows/kept", json=WORKFLOW)
        run_id = start(api).json()["run_id"]
        run_in(api, run_id, "parked")
    # Given a saved run whose history shows no step under way (as if it had only just begun)
    saved = json.loads((state / "state.json").read_text())
    (execution,) = [e for arn, e in saved["executions"].items() if arn.endswith(run_id)]
    execution["events"] = execution["events"][:1]
    (state / "state.json").write_text(json.dumps(saved))
    # When the server starts again
    with serve(state) as second, second.client() as api:
        assert "0 run(s) under way go on, 1 could not" in second.banner
        # Then the run is failed, not left running, and the error says what to do
        run = run_in(api, run_id, "failed")
        assert run["error"] == "Relayflow.ServerStopped"
        assert "rerun" in run["cause"]


def test_a_bootstrap_key_revoked_before_a_restart_is_replaced_not_printed_again(tmp_path):
    state = tmp_path / "state"
    # Given a server whose printed key was revoked
    with serve(state) as first:
        admin = {"X-Admin-Token": first.admin_token}
        keys = httpx.get(f"{first.url}/admin/keys", params={"tenant": "local"}, headers=admin)
        (bootstrap,) = [k for k in keys.json()["items"] if k["name"] == "bootstrap"]
        revoked = httpx.delete(f"{first.url}/admin/keys/{bootstrap['key_id']}", headers=admin)
        assert revoked.status_code == 200, revoked.text
    # When it starts again, the admin token is the same and the printed key is a new one
    with serve(state) as second, second.client() as api:
        assert second.admin_token == first.admin_token
        assert second.key != first.key
        assert api.get("/workflows").status_code == 200
        old = httpx.get(f"{second.url}/workflows", headers={"X-Api-Key": first.key})
        assert old.status_code == 401


def serve_on(state: Path) -> subprocess.CompletedProcess[str]:
    """``relayflow serve --state STATE`` run to its exit (a refusal at start)."""
    return subprocess.run(
        relayflow_command("serve", "--port", "0", "--state", str(state)),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_state_file_of_another_format_is_a_usage_error(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "state.json").write_text('{"format": 99}')
    done = serve_on(state)
    assert done.returncode == 2
    assert "format 99" in done.stderr and "--state" in done.stderr


def test_a_state_directory_other_users_may_write_is_a_usage_error_naming_its_mode(tmp_path):
    # Given a --state directory anyone may write into (another user could swap the saved
    # state, secrets and keys included, before the next start restores it)
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    # When the server starts on it
    done = serve_on(state)
    # Then it refuses to, naming the mode and the fix, and leaves the directory as it was
    assert done.returncode == 2
    assert "mode 0777" in done.stderr and "chmod 700" in done.stderr
    assert (state.stat().st_mode & 0o777) == 0o777
