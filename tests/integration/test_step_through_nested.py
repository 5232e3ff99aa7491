"""Step-through inside parallel branches and for_each items, on the control plane and the
local runtime: each continue releases exactly one step, nested ones included, and normal runs
keep their machine (no gates, the same transitions)."""

from __future__ import annotations

import time

import pytest
from runs import entered_states, settle

from relayflow.control.service import ControlPlane
from relayflow.dal.waits import WaitDal
from relayflow.local import LocalRuntime

pytestmark = pytest.mark.integration

FAN = {
    "id": "fan",
    "start": "fork",
    "steps": {
        "fork": {"type": "parallel", "branches": ["left", "right"], "on_success": "join"},
        "left": {"type": "transform", "mapping": {"side": "left"}},
        "right": {"type": "transform", "mapping": {"side": "right"}},
        "join": {"type": "noop"},
    },
}
EACH = {
    "id": "each",
    "start": "prices",
    "steps": {
        "prices": {
            "type": "for_each",
            "items": "{{ trigger.lines }}",
            "step": "price",
            "max_concurrency": 1,
        },
        "price": {"type": "transform", "mapping": {"sku": "{{ item.sku }}"}},
    },
}


def pending(plane: ControlPlane, tenant: str, run_id: str, count: int) -> list[str]:
    """The steps whose gates are pending, once ``count`` of them are (polls)."""
    for _ in range(400):
        steps = [
            w.step
            for w in WaitDal(plane.dal).list_run_waitpoints(tenant, run_id)
            if w.label == "step-through" and w.status == "pending"
        ]
        if len(steps) >= count:
            return sorted(steps)
        time.sleep(0.025)
    raise AssertionError(f"expected {count} pending gates of run {run_id}")


def entered(runtime: LocalRuntime, plane: ControlPlane, tenant: str, run_id: str) -> list[str]:
    return [name for name in entered_states(runtime, plane, tenant, run_id) if "." not in name]


def test_each_branch_of_a_parallel_waits_before_its_step(runtime, plane, tenant):
    plane.put_workflow(tenant, "fan", FAN)
    run = plane.start_run(tenant, "fan", {}, step_through=True)
    # Given the run waits before the parallel step as a whole
    assert pending(plane, tenant, run.run_id, 1) == ["fork"]
    # When it is released, both branches wait before their own step, which has not run
    assert plane.continue_run(tenant, run.run_id).released == "fork"
    assert pending(plane, tenant, run.run_id, 2) == ["left", "right"]
    assert entered(runtime, plane, tenant, run.run_id) == ["fork"]
    # Then each continue releases exactly one of them
    first = plane.continue_run(tenant, run.run_id).released
    assert first in ("left", "right")
    assert pending(plane, tenant, run.run_id, 1) == [{"left": "right", "right": "left"}[first]]
    second = plane.continue_run(tenant, run.run_id).released
    assert {first, second} == {"left", "right"}
    # And after both branches, the run waits before join
    assert pending(plane, tenant, run.run_id, 1) == ["join"]
    assert sorted(entered(runtime, plane, tenant, run.run_id)) == ["fork", "left", "right"]
    assert plane.continue_run(tenant, run.run_id).released == "join"
    detail = settle(runtime, plane, tenant, run.run_id)
    assert detail.status == "succeeded"
    assert {s.key for s in detail.steps} == {"fork", "left", "right", "join"}


def test_each_for_each_item_waits_before_its_step(runtime, plane, tenant):
    plane.put_workflow(tenant, "each", EACH)
    lines = {"lines": [{"sku": "a"}, {"sku": "b"}]}
    run = plane.start_run(tenant, "each", lines, step_through=True)
    assert pending(plane, tenant, run.run_id, 1) == ["prices"]
    assert plane.continue_run(tenant, run.run_id).released == "prices"
    # One item at a time (max_concurrency 1): each continue runs one item's step
    for done in (1, 2):
        assert pending(plane, tenant, run.run_id, 1) == ["price"]
        assert entered(runtime, plane, tenant, run.run_id).count("price") == done - 1
        assert plane.continue_run(tenant, run.run_id).released == "price"
    detail = settle(runtime, plane, tenant, run.run_id)
    assert detail.status == "succeeded"
    outputs = [s.output for s in detail.steps if s.key.startswith("price[")]
    assert outputs == [{"sku": "a"}, {"sku": "b"}]


def test_to_end_releases_every_waiting_branch(runtime, plane, tenant):
    plane.put_workflow(tenant, "fan", FAN)
    run = plane.start_run(tenant, "fan", {}, step_through=True)
    assert pending(plane, tenant, run.run_id, 1) == ["fork"]
    plane.continue_run(tenant, run.run_id)
    assert pending(plane, tenant, run.run_id, 2) == ["left", "right"]
    # When the run is told to run to its end while two branches wait
    result = plane.continue_run(tenant, run.run_id, to_end=True)
    # Then both branches go on (one call), and the run finishes without pausing again
    assert result.to_end and result.released in ("left", "right")
    detail = settle(runtime, plane, tenant, run.run_id)
    assert detail.status == "succeeded"
    assert {s.key for s in detail.steps} == {"fork", "left", "right", "join"}
    assert pending(plane, tenant, run.run_id, 0) == []
