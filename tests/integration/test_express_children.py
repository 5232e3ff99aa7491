"""Express children of a Standard run's sub_workflow steps get their run items.

Step Functions sends no status changes for Express executions, so the recorder learns of an
Express child only from its parent's history (``relayflow.control.express_children``): when
it records the parent's end, the child's start and end are recorded as if the child had sent
them. Here only the parent's end is handed to the recorder, as on AWS.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from relayflow.control.recorder import record_status_change, status_change_event
from relayflow.control.service import ControlPlane
from relayflow.dal.dlq import DlqDal
from relayflow.local import LocalRuntime

pytestmark = pytest.mark.integration


class Events:
    """The Relayflow bus for the recorder: the detail-types it was given."""

    def __init__(self) -> None:
        self.types: list[str] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.types += [e["DetailType"] for e in Entries]
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e"} for _ in Entries]}


def child(fail: bool = False, engine: str = "auto") -> dict[str, Any]:
    steps: dict[str, Any] = {
        "price": {"type": "transform", "mapping": {"price": "{{ trigger.kg * 2 }}"}},
    }
    if fail:
        steps["price"]["on_success"] = "boom"
        steps["boom"] = {"type": "code", "code": "raise ValueError('no carrier')"}
    return {"id": "quote", "engine": engine, "start": "price", "steps": steps}


PARENT = {
    "id": "ship",
    "engine": "standard",
    "start": "quote",
    "steps": {
        "quote": {
            "type": "sub_workflow",
            "workflow_id": "quote",
            "input": {"kg": "{{ trigger.kg }}"},
        }
    },
}


def record_parent(
    runtime: LocalRuntime, plane: ControlPlane, tenant: str, events: Events | None = None
) -> tuple[Any, dict[str, Any]]:
    """Start the parent, wait for its end, hand only its status change to the recorder."""
    run_id = plane.start_run(tenant, "ship", {"kg": 3}).run_id
    run = plane.dal.get_run(tenant, run_id)
    assert run is not None and run.execution_arn
    runtime.wait(run.execution_arn, timeout=60)
    described = runtime.sfn_client.describe_execution(executionArn=run.execution_arn)
    event = status_change_event(described)
    record_status_change(event, control=plane, events=events)
    return plane.dal.get_run(tenant, run_id), event


def child_run_ids(plane: ControlPlane, tenant: str) -> list[str]:
    return [r.run_id for r in plane.list_runs(tenant, "quote").items]


def only_child(plane: ControlPlane, tenant: str) -> tuple[str, Any]:
    """The id and the stored run item of the tenant's one child run."""
    (child_id,) = child_run_ids(plane, tenant)
    stored = plane.dal.get_run(tenant, child_id)
    assert stored is not None
    return child_id, stored


def test_an_express_childs_end_is_recorded_from_its_parents_history(runtime, plane, tenant):
    # Given an Express child and a Standard parent that runs it
    plane.put_workflow(tenant, "quote", child())
    plane.put_workflow(tenant, "ship", PARENT)
    assert plane.get_workflow(tenant, "quote").engine == "express"
    # When the parent succeeds and only its end reaches the recorder
    events = Events()
    parent, _ = record_parent(runtime, plane, tenant, events)
    assert parent is not None and parent.status == "succeeded"
    # Then the child has its run item: the tenant's, started by the sub_workflow step, Express
    child_id, stored = only_child(plane, tenant)
    output = json.loads(parent.output or "{}")
    assert output["steps"]["quote"]["output"]["run_id"] == child_id
    assert (stored.status, stored.trigger_type, stored.engine) == (
        "succeeded",
        "sub_workflow",
        "express",
    )
    assert json.loads(stored.output or "{}")["steps"]["price"]["output"] == {"price": 6}
    assert stored.started_at and stored.ended_at and stored.ended_at >= stored.started_at
    assert json.loads(stored.input or "{}") == {"kg": 3}
    # And its lifecycle events went out with the parent's
    assert sorted(events.types) == sorted(
        ["relayflow.run.started", "relayflow.run.succeeded", "relayflow.run.succeeded"]
    )
    # And the API shows it like any run, its timeline read as an Express run's
    detail = plane.get_run(tenant, child_id)
    assert detail.status == "succeeded" and detail.timeline_source != "history"
    assert detail.version == 1
    assert [s.key for s in detail.steps] == ["price"]


def test_a_failed_express_child_is_recorded_failed_and_its_parent_archived(runtime, plane, tenant):
    # Given an Express child whose code step raises, run by a Standard parent
    plane.put_workflow(tenant, "quote", child(fail=True))
    plane.put_workflow(tenant, "ship", PARENT)
    # When the parent fails with it
    parent, _ = record_parent(runtime, plane, tenant)
    assert parent is not None and parent.status == "failed"
    # Then the child's run item says how it failed, and where
    child_id, stored = only_child(plane, tenant)
    assert (stored.status, stored.error, stored.engine) == (
        "failed",
        "Relayflow.CodeError",
        "express",
    )
    assert stored.failing_step == "boom"
    # And the DLQ holds the parent, which a retry starts anew, not the child
    dlq = DlqDal(plane.dal)
    assert dlq.get(tenant, child_id) is None
    entry = dlq.get(tenant, parent.run_id)
    assert entry is not None and entry.workflow_id == "ship"


def test_a_repeated_parent_delivery_records_its_child_once(runtime, plane, tenant):
    plane.put_workflow(tenant, "quote", child())
    plane.put_workflow(tenant, "ship", PARENT)
    events = Events()
    _, event = record_parent(runtime, plane, tenant, events)
    # When EventBridge delivers the parent's end again
    assert record_status_change(event, control=plane, events=events)["recorded"] is False
    # Then nothing more is recorded or published
    assert len(child_run_ids(plane, tenant)) == 1
    assert len(events.types) == 3


def test_a_standard_child_is_left_to_its_own_status_changes(runtime, plane, tenant):
    # Given a Standard child (it sends its own status changes, which this test withholds)
    plane.put_workflow(tenant, "quote", child(engine="standard"))
    plane.put_workflow(tenant, "ship", PARENT)
    parent, _ = record_parent(runtime, plane, tenant)
    assert parent is not None and parent.status == "succeeded"
    # Then the parent's end does not record it
    assert child_run_ids(plane, tenant) == []
