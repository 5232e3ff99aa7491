"""Run admission meets run modes on ``relayflow serve``: a dry run passes no admission rule; a
step-through run is never folded, takes a gate slot, and when queued starts in step-through
once its slot frees (the recorder starts it on the step-through variant)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from relayflow_testing import eventually

from relayflow.control.admission import key_id

pytestmark = pytest.mark.integration
TENANT = "local"


def register(api: httpx.Client, workflow_id: str, delay: int, **rules: Any) -> str:
    definition = {
        "id": workflow_id,
        "start": "hold",
        "steps": {
            "hold": {"type": "delay", "seconds": delay, "on_success": "echo"},
            "echo": {"type": "transform", "mapping": {"trigger": "{{ trigger }}"}},
        },
        **rules,
    }
    response = api.put(f"/workflows/{workflow_id}", json=definition)
    assert response.status_code in (200, 201), response.text
    return workflow_id


def start(api: httpx.Client, workflow_id: str, payload: Any, **mode: bool) -> httpx.Response:
    return api.post(f"/workflows/{workflow_id}/runs", json={"input": payload, **mode})


def pending_gate(api: httpx.Client, run_id: str) -> str | None:
    waits = api.get("/waitpoints", params={"run_id": run_id}).json()["items"]
    gates = [w["step"] for w in waits if w["label"] == "step-through" and w["status"] == "pending"]
    return gates[-1] if gates else None


def status(api: httpx.Client, run_id: str) -> str:
    return str(api.get(f"/runs/{run_id}").json()["status"])


def test_a_dry_run_passes_a_singleton_and_holds_no_slot(server, api):
    wf = register(api, "single-dry", delay=3000, singleton={"mode": "skip"})
    # Given a real run holding the workflow's singleton slot (paused before its first step,
    # so it holds the slot whatever the timing)
    first = start(api, wf, {"n": 1}, step_through=True)
    assert first.status_code == 201, first.text
    assert eventually(lambda: pending_gate(api, first.json()["run_id"])) == "hold"
    # When a dry run is asked for
    dry = start(api, wf, {"n": 2}, dry_run=True)
    # Then it starts (not skipped), and the slot still names only the real run
    assert dry.status_code == 201, dry.text
    assert dry.json()["admission"] is None and dry.json()["run_id"] != first.json()["run_id"]
    assert api.get(f"/runs/{dry.json()['run_id']}").json()["dry_run"] is True
    holders = server.control().admission.store.holders(TENANT, wf, key_id("default"))
    assert holders == [first.json()["run_id"]]
    # And a real trigger meanwhile is still skipped
    again = start(api, wf, {"n": 3})
    assert again.json()["admission"] == "skipped"
    api.post(f"/runs/{first.json()['run_id']}/cancel")


def test_a_step_through_run_is_not_debounced(server, api):
    # Step-through needs a Standard machine (its gates are callbacks: docs/engines.md).
    wf = register(api, "deb-step", delay=1, debounce={"period": "30s"}, engine="standard")
    # A real trigger is folded into the pending run; a step-through one starts at once
    assert start(api, wf, {"n": 1}).json()["admission"] == "debounced"
    stepped = start(api, wf, {"n": 2}, step_through=True)
    assert stepped.status_code == 201, stepped.text
    assert stepped.json()["admission"] is None
    run_id = stepped.json()["run_id"]
    assert eventually(lambda: pending_gate(api, run_id)) == "hold"
    api.post(f"/runs/{run_id}/cancel")


def test_a_queued_step_through_run_starts_in_step_through_when_its_slot_frees(server, api):
    wf = register(api, "conc-step", delay=200, concurrency={"limit": 1})
    # Given a run holding the only slot until it is let go (a step-through run paused before
    # its first step: it holds the slot by state, not by how long a delay lasts)
    first = start(api, wf, {"n": 1}, step_through=True).json()
    assert eventually(lambda: pending_gate(api, first["run_id"])) == "hold"
    # When a step-through run is asked for, it queues (202) and keeps its mode
    queued = start(api, wf, {"n": 2}, step_through=True)
    assert queued.status_code == 202, queued.text
    assert queued.json()["admission"] == "queued"
    run_id = queued.json()["run_id"]
    assert api.get(f"/runs/{run_id}").json()["step_through"] is True
    assert status(api, run_id) == "queued"
    # Then once the first run ends, it starts and pauses at the gate of its first step
    let_go = api.post(f"/runs/{first['run_id']}/continue", json={"to_end": True})
    assert let_go.status_code == 200, let_go.text
    eventually(lambda: status(api, first["run_id"]) == "succeeded")
    assert eventually(lambda: pending_gate(api, run_id)) == "hold"
    run = api.get(f"/runs/{run_id}").json()
    assert (run["status"], run["step_through"]) == ("running", True)
    assert server.control().dal.get_run(TENANT, run_id).engine_version is not None
    # And continued to its end, it finishes and frees the slot
    assert api.post(f"/runs/{run_id}/continue", json={"to_end": True}).status_code == 200
    eventually(lambda: status(api, run_id) == "succeeded")
    gate = server.control().admission.store.gate(TENANT, wf, key_id("default"))
    assert (gate["running"], gate["queued"]) == (0, 0)
