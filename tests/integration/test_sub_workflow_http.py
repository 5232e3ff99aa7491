"""sub_workflow through `relayflow serve` over HTTP: success, a failing child, the depth guard,
and the child runs the recorder finds (each one the tenant's run, started by the parent)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from relayflow.compiler.asl import MAX_SUB_WORKFLOW_DEPTH
from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration
UNTHROTTLED = True


def put(api: httpx.Client, definition: dict[str, Any]) -> None:
    answer = api.put(f"/workflows/{definition['id']}", json=definition)
    assert answer.status_code in (200, 201), answer.text


def run_to_end(
    server: LocalServer, api: httpx.Client, workflow_id: str, data: Any
) -> dict[str, Any]:
    started = api.post(f"/workflows/{workflow_id}/runs", json={"input": data})
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    deadline = time.monotonic() + 30
    while True:
        run = api.get(f"/runs/{run_id}").json()
        if run["status"] != "running":
            server.settle()
            return run
        assert time.monotonic() < deadline, f"run {run_id} still running"
        time.sleep(0.05)


CHILD = {
    "id": "price",
    "start": "quote",
    "steps": {
        "quote": {"type": "transform", "mapping": {"total": "{{ trigger.qty * 3 }}"}},
    },
}


def parent(child: str) -> dict[str, Any]:
    return {
        "id": f"order-{child}",
        "start": "call",
        "steps": {
            "call": {
                "type": "sub_workflow",
                "workflow_id": child,
                "input": {"qty": "{{ trigger.qty }}"},
                "on_success": "done",
            },
            "done": {
                "type": "transform",
                "mapping": {"total": "{{ steps.call.output.steps.quote.output.total }}"},
            },
        },
    }


def dividing(workflow_id: str) -> dict[str, Any]:
    """A child that divides by its trigger's qty (and so fails when qty is 0)."""
    return {
        "id": workflow_id,
        "start": "divide",
        "steps": {"divide": {"type": "transform", "mapping": {"r": "{{ 1 / trigger.qty }}"}}},
    }


def test_the_childs_output_is_the_steps_output(server, api):
    put(api, CHILD)
    put(api, parent("price"))
    run = run_to_end(server, api, "order-price", {"qty": 7})
    assert run["status"] == "succeeded", run
    assert run["output"]["steps"]["done"]["output"] == {"total": 21}
    child_id = next(s["output"] for s in run["steps"] if s["key"] == "call")["run_id"]
    # The child is a run of the tenant, recorded as started by a sub_workflow step
    child = api.get(f"/runs/{child_id}").json()
    assert (child["workflow_id"], child["status"]) == ("price", "succeeded")


def test_a_failing_child_fails_the_step_with_its_error_and_run_id(server, api):
    put(api, dividing("broken"))
    put(api, parent("broken"))
    run = run_to_end(server, api, "order-broken", {"qty": 0})
    assert (run["status"], run["error"], run["failing_step"]) == (
        "failed",
        "Relayflow.SubWorkflowFailed",
        "call",
    )
    cause = json.loads(run["cause"])
    assert cause["status"] == "FAILED" and cause["child_run_id"]
    assert cause["error"].startswith("Relayflow.")
    child = api.get(f"/runs/{cause['child_run_id']}").json()
    assert (child["workflow_id"], child["status"]) == ("broken", "failed")
    # The parent is in the DLQ (a retry starts a new child); the child is not
    assert api.get(f"/dlq/{run['run_id']}").json()["failing_step"] == "call"
    assert api.get(f"/dlq/{cause['child_run_id']}").status_code == 404


def test_a_failed_child_leaves_a_true_record_for_the_error_route(server, api):
    # Given a parent whose failure route reads the sub_workflow step's record
    put(api, dividing("broken-too"))
    definition = parent("broken-too")
    definition["steps"]["call"]["on_failure"] = "report"
    definition["steps"]["report"] = {"type": "transform", "mapping": {"seen": "{{ steps.call }}"}}
    put(api, definition)
    # When the child fails
    run = run_to_end(server, api, "order-broken-too", {"qty": 0})
    assert run["status"] == "succeeded", run
    # Then the record names the child that ran and says it failed (never "started" with a
    # run id no child has)
    seen = run["output"]["steps"]["report"]["output"]["seen"]
    assert seen["status"] == "failed"
    child = api.get(f"/runs/{seen['run_id']}").json()
    assert (child["workflow_id"], child["status"]) == ("broken-too", "failed")
    assert seen["error"]["child_run_id"] == seen["run_id"]
    assert seen["error"]["error"].startswith("Relayflow.")


def test_the_depth_guard_stops_a_workflow_that_starts_itself(server, api):
    put(
        api,
        {
            "id": "recurse",
            "start": "again",
            "steps": {"again": {"type": "sub_workflow", "workflow_id": "recurse"}},
        },
    )
    run = run_to_end(server, api, "recurse", {})
    assert (run["status"], run["error"]) == ("failed", "Relayflow.SubWorkflowFailed")
    cause, levels = json.loads(run["cause"]), 1
    while cause["error"] == "Relayflow.SubWorkflowFailed":
        cause, levels = json.loads(cause["cause"]), levels + 1
    assert cause["error"] == "Relayflow.SubWorkflowDepth"
    assert levels == MAX_SUB_WORKFLOW_DEPTH


def test_a_parent_naming_a_workflow_the_tenant_lacks_is_refused(api):
    answer = api.put("/workflows/order-ghost", json=parent("ghost"))
    assert answer.status_code == 422, answer.text
    assert "unknown-workflow" in answer.text
