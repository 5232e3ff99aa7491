"""sub_workflow through the control plane: a PUT compiles the step against the tenant's
state machines (``relayflow-<stage>-<tenant>_<id>``), refuses unknown children, and a started
parent runs its child on the local runtime."""

from __future__ import annotations

import json
from typing import Any

import pytest
from runs import settle

from relayflow.control.errors import InvalidDefinition
from relayflow.control.recorder import record_status_change, status_change_event
from relayflow.settings import get_settings

pytestmark = pytest.mark.integration


def child(label: str) -> dict[str, Any]:
    return {
        "id": "child",
        "start": "answer",
        "steps": {
            "answer": {
                "type": "transform",
                "mapping": {"label": label, "doubled": "{{ trigger.n * 2 }}"},
            }
        },
    }


def parent(version: int | None = None, workflow_id: str = "child") -> dict[str, Any]:
    step: dict[str, Any] = {
        "type": "sub_workflow",
        "workflow_id": workflow_id,
        "input": {"n": "{{ trigger.n }}"},
    }
    if version is not None:
        step["version"] = version
    return {"id": "parent", "start": "call", "steps": {"call": step}}


def test_a_parent_runs_the_tenants_child_on_its_live_version(runtime, plane, tenant):
    # Given a child with two versions (the second live) and a parent that starts it
    plane.put_workflow(tenant, "child", child("v1"))
    plane.put_workflow(tenant, "child", child("v2"))
    plane.put_workflow(tenant, "parent", parent())

    # When the parent is started through the control plane
    started = plane.start_run(tenant, "parent", {"n": 21})
    detail = settle(runtime, plane, tenant, started.run_id)

    # Then the run succeeds with the live child's output as the step output
    assert detail.status == "succeeded", (detail.error, detail.cause)
    call = detail.output["steps"]["call"]["output"]
    assert call["steps"]["answer"]["output"] == {"label": "v2", "doubled": 42}
    # And the child ran on the tenant's child state machine, through the live alias
    machine = f"relayflow-{get_settings().stage}-{tenant}_child"
    child_arn = f"arn:aws:states:us-east-1:123456789012:execution:{machine}:{call['run_id']}"
    described = runtime.sfn_client.describe_execution(executionArn=child_arn)
    assert described["stateMachineAliasArn"].endswith(f"{machine}:live")
    document = json.loads(described["input"])
    assert document["run"]["tenant"] == tenant
    assert document["run"]["parent"]["run_id"] == started.run_id
    # And the recorder records the child as the tenant's run, started by a sub_workflow step
    record_status_change(status_change_event(described), control=plane)
    recorded = plane.dal.get_run(tenant, call["run_id"])
    assert recorded is not None
    assert (recorded.workflow_id, recorded.status, recorded.trigger_type) == (
        "child",
        "succeeded",
        "sub_workflow",
    )


def test_a_parent_pinned_to_a_version_runs_that_version(runtime, plane, tenant):
    # Given two versions of the child and a parent pinned to version 1
    plane.put_workflow(tenant, "child", child("v1"))
    plane.put_workflow(tenant, "child", child("v2"))
    plane.put_workflow(tenant, "parent", parent(version=1))

    # When it runs
    started = plane.start_run(tenant, "parent", {"n": 1})
    detail = settle(runtime, plane, tenant, started.run_id)

    # Then version 1 of the child ran
    assert detail.status == "succeeded", (detail.error, detail.cause)
    assert detail.output["steps"]["call"]["output"]["steps"]["answer"]["output"]["label"] == "v1"


def test_a_parent_naming_a_missing_child_or_version_is_refused(plane, tenant):
    # Given a tenant with version 1 of a child only (another tenant's workflows do not count)
    plane.put_workflow(f"{tenant}-x", "ghost", {**child("x"), "id": "ghost"})
    plane.put_workflow(tenant, "child", child("v1"))

    # When parents name a workflow the tenant lacks, or a version the child lacks
    with pytest.raises(InvalidDefinition) as missing:
        plane.put_workflow(tenant, "parent", parent(workflow_id="ghost"))
    with pytest.raises(InvalidDefinition) as no_version:
        plane.put_workflow(tenant, "parent", parent(version=7))

    # Then each is refused (422, invalid_definition) with the path and a stable rule
    assert missing.value.status == 422 and missing.value.code == "invalid_definition"
    assert [(p["path"], p["rule"]) for p in missing.value.details] == [
        ("steps.call.workflow_id", "unknown-workflow")
    ]
    assert [(p["path"], p["rule"]) for p in no_version.value.details] == [
        ("steps.call.version", "unknown-workflow-version")
    ]
    # And nothing was stored
    assert plane.dal.get_workflow(tenant, "parent") is None


def test_a_workflow_may_start_itself(plane, tenant):
    # Given a self-recursive definition (the compiled depth guard bounds it)
    recursive = {
        "id": "again",
        "start": "call",
        "steps": {"call": {"type": "sub_workflow", "workflow_id": "again"}},
    }

    # When it is PUT, Then it is accepted as version 1
    assert plane.put_workflow(tenant, "again", recursive).version == 1


def test_an_agent_naming_a_missing_workflow_tool_is_refused(plane, tenant):
    # Given a tenant with the child workflow only
    plane.put_workflow(tenant, "child", child("v1"))
    agent = {
        "id": "asker",
        "start": "ask",
        "steps": {
            "ask": {
                "type": "agent",
                "model": "scripted:x",
                "prompt": "hi",
                "tools": ["workflow.child", "workflow.ghost"],
            }
        },
    }
    # When an agent lists a workflow the tenant lacks as a tool
    with pytest.raises(InvalidDefinition) as missing:
        plane.put_workflow(tenant, "asker", agent)
    # Then it is refused naming the step's tools and the rule; the existing one passes
    assert missing.value.status == 422
    assert [(p["path"], p["rule"]) for p in missing.value.details] == [
        ("steps.ask.tools", "unknown-workflow")
    ]
    assert "ghost" in missing.value.details[0]["message"]
    agent["steps"]["ask"]["tools"] = ["workflow.child"]
    plane.put_workflow(tenant, "asker", agent)
