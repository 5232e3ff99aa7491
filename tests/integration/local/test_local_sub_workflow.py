"""sub_workflow steps end to end on the local runtime: the compiled
``startExecution.sync:2`` Task runs through the ``start_execution_sync`` compat fix."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from local_asl import machine
from workflow_shapes import FAILING_CHILD

from relayflow.compiler.asl import MAX_SUB_WORKFLOW_DEPTH
from relayflow.definition.models import Workflow
from relayflow.local import LocalRuntime, compat
from relayflow.runner import RunResult, publish_local, run_workflow
from relayflow.validation import load_workflow_text

pytestmark = pytest.mark.integration

SYNC2 = "arn:aws:states:::states:startExecution.sync:2"

CHILD = """
id: child
start: total
steps:
  total:
    type: transform
    mapping: {sum: "{{ trigger.a + trigger.b }}", who: "{{ run.parent.step }}"}
"""

TOO_MANY = "Relayflow.TooManyItems"


def wf(text: str) -> Workflow:
    return load_workflow_text(text, "test.yaml")


def parent(step: str, **extra: Any) -> Workflow:
    """A parent whose first step is the sub_workflow ``step`` (YAML flow mapping)."""
    tail = "\n".join(f"  {k}: {v}" for k, v in extra.items())
    return wf(f"id: parent\nstart: call\nsteps:\n  call: {step}\n{tail}\n")


def run(rt: LocalRuntime, workflow: Workflow, trigger: Any, *children: Workflow) -> RunResult:
    return run_workflow(
        workflow, trigger, runtime=rt, workflows={c.id: c for c in children}, timeout=60
    )


def child_runs(rt: LocalRuntime, workflow_id: str) -> list[dict[str, Any]]:
    arn = f"arn:aws:states:us-east-1:123456789012:stateMachine:relayflow-{workflow_id}"
    listed = rt.sfn_client.list_executions(stateMachineArn=arn)["executions"]
    return [rt.sfn_client.describe_execution(executionArn=e["executionArn"]) for e in listed]


# ------------------------------------------------------------------------------ success


def test_child_output_becomes_the_step_output(rt):
    # Given a parent that starts the child on its live version with a templated input
    child = wf(CHILD)
    workflow = parent(
        '{type: sub_workflow, workflow_id: child, input: {a: "{{ trigger.x }}", b: 2}, '
        "on_success: after}",
        after="{type: transform, mapping: "
        '{total: "{{ steps.call.output.steps.total.output.sum }}"}}',
    )

    # When the parent runs
    result = run(rt, workflow, {"x": 40}, child)

    # Then the step output is the child's run id and its steps, usable by later steps
    assert result.succeeded, (result.error, result.cause)
    # (read from the timeline: the final document keeps the step the run ended on)
    [call] = [step for step in result.steps if step.key == "call"]
    assert call.status == "succeeded"
    assert call.output["steps"]["total"]["output"] == {"sum": 42, "who": "call"}
    assert result.output["steps"]["after"]["output"] == {"total": 42}
    # And the child ran as a standard run document one level deeper, naming its parent
    [described] = [d for d in child_runs(rt, "child") if d["name"] == call.output["run_id"]]
    child_input = json.loads(described["input"])
    assert child_input["trigger"] == {"a": 40, "b": 2}
    assert child_input["steps"] == {}
    assert child_input["run"]["id"] == described["name"]
    assert child_input["run"]["depth"] == 1
    assert child_input["run"]["workflow_id"] == "child"
    assert child_input["run"]["version"] is None
    assert child_input["run"]["parent"] == {
        "run_id": result.run_id,
        "workflow_id": "parent",
        "step": "call",
    }
    assert child_input["AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID"].endswith(result.run_id)
    # And the step shows in the timeline as one native step
    [step] = [s for s in result.steps if s.key == "call"]
    assert (step.status, step.runner) == ("succeeded", "native")


def test_a_pinned_version_runs_that_version_and_live_the_latest(rt):
    # Given version 1 of a child and then version 2 made live
    v1 = wf(CHILD.replace("id: child", "id: versioned"))
    v1_arn = publish_local(rt, v1)
    v2 = wf("id: versioned\nstart: total\nsteps:\n  total: {type: transform, mapping: {sum: v2}}\n")
    v2_arn = publish_local(rt, v2)
    assert v1_arn.endswith(":1") and v2_arn.endswith(":2")

    # When one parent pins version 1 and another follows live
    pinned = run(
        rt,
        parent("{type: sub_workflow, workflow_id: versioned, version: 1, input: {a: 1, b: 1}}"),
        {},
    )
    live = run(rt, parent("{type: sub_workflow, workflow_id: versioned, input: {a: 1, b: 1}}"), {})

    # Then each ran the version it names
    assert pinned.succeeded and live.succeeded
    assert pinned.output["steps"]["call"]["output"]["steps"]["total"]["output"]["sum"] == 2
    assert live.output["steps"]["call"]["output"]["steps"]["total"]["output"] == {"sum": "v2"}
    runs = {d["name"]: d for d in child_runs(rt, "versioned")}
    pinned_run = runs[pinned.output["steps"]["call"]["output"]["run_id"]]
    assert pinned_run["stateMachineVersionArn"] == v1_arn
    assert json.loads(pinned_run["input"])["run"]["version"] == 1


def test_each_for_each_item_starts_its_own_child(rt):
    # Given a for_each whose item step is a sub_workflow
    workflow = wf(
        """
id: fan-out
start: each
steps:
  each: {type: for_each, items: "{{ trigger.pairs }}", step: call, max_concurrency: 3}
  call: {type: sub_workflow, workflow_id: child, input: {a: "{{ item.a }}", b: "{{ index }}"}}
"""
    )
    before = {d["name"] for d in child_runs(rt, "child")}

    # When it runs over three items
    result = run(rt, workflow, {"pairs": [{"a": 10}, {"a": 20}, {"a": 30}]}, wf(CHILD))

    # Then three distinct children ran and each item's output is its own child's
    assert result.succeeded, (result.error, result.cause)
    items = result.output["steps"]["each"]["output"]
    assert [i["output"]["steps"]["total"]["output"]["sum"] for i in items] == [10, 21, 32]
    run_ids = {i["output"]["run_id"] for i in items}
    assert len(run_ids) == 3
    assert run_ids == {d["name"] for d in child_runs(rt, "child")} - before


# ------------------------------------------------------------------------------ failure


def test_a_failed_child_fails_the_step_with_its_error_and_run_id(rt):
    # Given a child whose only step fails, and a parent without an error route
    workflow = parent("{type: sub_workflow, workflow_id: failing-child, input: {items: [1, 2]}}")

    # When the parent runs
    result = run(rt, workflow, {}, wf(FAILING_CHILD))

    # Then the run fails with Relayflow.SubWorkflowFailed naming the child run and its error
    assert result.status == "failed"
    assert result.error == "Relayflow.SubWorkflowFailed"
    cause = json.loads(result.cause)
    assert cause["status"] == "FAILED"
    assert cause["error"] == TOO_MANY
    assert cause["cause"] == "for_each 'each' allows at most 1 items"
    [described] = [d for d in child_runs(rt, "failing-child") if d["name"] == cause["child_run_id"]]
    assert described["status"] == "FAILED"
    assert described["error"] == cause["error"]
    assert described["cause"] == cause["cause"]
    # And the timeline blames the sub_workflow step
    [step] = [s for s in result.steps if s.key == "call"]
    assert step.status == "failed" and step.error == "Relayflow.SubWorkflowFailed"


def test_a_failed_child_takes_the_on_failure_route(rt):
    # Given a parent routing the step's failure to a handler step
    workflow = parent(
        "{type: sub_workflow, workflow_id: failing-child, input: {items: [1, 2]}, "
        "on_failure: handle}",
        handle="{type: transform, mapping: "
        '{error: "{{ error.Error }}", cause: "{{ error.Cause }}"}}',
    )

    # When the child fails
    result = run(rt, workflow, {}, wf(FAILING_CHILD))

    # Then the handler sees Relayflow.SubWorkflowFailed with the child's run id
    assert result.succeeded, (result.error, result.cause)
    handled = result.output["steps"]["handle"]["output"]
    assert handled["error"] == "Relayflow.SubWorkflowFailed"
    cause = json.loads(handled["cause"])
    assert cause["child_run_id"] in {d["name"] for d in child_runs(rt, "failing-child")}


def test_a_retried_step_starts_a_fresh_child_per_attempt(rt):
    # Given a sub_workflow step retried twice on the child's failure
    workflow = parent(
        "{type: sub_workflow, workflow_id: failing-child, input: {items: [1, 2]}, "
        "retry: {max_attempts: 3, backoff: fixed, base_seconds: 1, "
        "retry_on: [Relayflow.SubWorkflowFailed]}}"
    )
    before = {d["name"] for d in child_runs(rt, "failing-child")}

    # When it runs
    result = run(rt, workflow, {}, wf(FAILING_CHILD))

    # Then three children ran under distinct run ids (one per attempt) and the step failed
    assert result.error == "Relayflow.SubWorkflowFailed"
    started = {d["name"] for d in child_runs(rt, "failing-child")} - before
    assert len(started) == 3
    assert all(re.fullmatch(r"[0-9a-f]{32}", name) for name in started)
    [step] = [s for s in result.steps if s.key == "call"]
    assert step.attempts == 3


def test_a_self_recursive_workflow_stops_at_the_depth_limit(rt):
    # Given a workflow that starts itself
    workflow = wf(
        """
id: recurse
start: again
steps:
  again: {type: sub_workflow, workflow_id: recurse, input: {level: "{{ run.depth }}"}}
"""
    )

    # When it runs
    result = run(rt, workflow, {})

    # Then it fails; the innermost child failed with Relayflow.SubWorkflowDepth at the limit
    assert result.error == "Relayflow.SubWorkflowFailed"
    cause, levels = json.loads(result.cause), 1
    while cause["error"] == "Relayflow.SubWorkflowFailed":
        cause, levels = json.loads(cause["cause"]), levels + 1
    assert cause["error"] == "Relayflow.SubWorkflowDepth"
    assert levels == MAX_SUB_WORKFLOW_DEPTH
    deepest = [
        json.loads(d["input"])["run"]["depth"]
        for d in child_runs(rt, "recurse")
        if d.get("error") == "Relayflow.SubWorkflowDepth"
    ]
    assert MAX_SUB_WORKFLOW_DEPTH in deepest


def test_stopping_the_parent_stops_the_child(rt):
    # Given a child that waits a long time (time scale 1: real seconds)
    sleeper = wf("id: sleeper\nstart: nap\nsteps:\n  nap: {type: delay, seconds: 600}\n")
    publish_local(rt, sleeper)
    rt.time_scale = 1.0
    workflow = parent("{type: sub_workflow, workflow_id: sleeper}")
    publish_local(rt, workflow)
    from relayflow.compiler import compile_workflow
    from relayflow.document import execution_input

    arn = rt.create_state_machine("relayflow-parent", compile_workflow(workflow).asl)
    execution = rt.start_execution(arn, execution_input("parent", {}))

    # When the parent is stopped while the child runs
    def running_child() -> list[dict[str, Any]]:
        return [d for d in child_runs(rt, "sleeper") if d["status"] == "RUNNING"]

    from local_asl import wait_for

    [child] = wait_for(running_child)
    rt.stop_execution(execution, error="Test.Stop", cause="stopped by the test")

    # Then the parent is aborted and the child is stopped too
    assert rt.wait(execution, timeout=10).status == "ABORTED"
    wait_for(
        lambda: (
            rt.sfn_client.describe_execution(executionArn=child["executionArn"])["status"]
            == "ABORTED"
        )
    )


# ------------------------------------------------------------------------------ compat fix


def _sync2_machine(child_arn: str) -> dict[str, Any]:
    return machine(
        {
            "Start": {
                "Type": "Task",
                "Resource": SYNC2,
                "Parameters": {
                    "StateMachineArn": child_arn,
                    "Name.$": "$$.Execution.Name",
                    "Input": {"n.$": "$.n"},
                },
                "End": True,
            }
        }
    )


def test_start_execution_sync2_waits_for_the_child_and_returns_its_description(rt):
    # Given a child state machine and a parent Task starting it with startExecution.sync:2
    child = rt.create_state_machine(
        "compat-child",
        machine({"Double": {"Type": "Pass", "Parameters": {"m.$": "$.n"}, "End": True}}),
    )

    # When the parent runs
    record = rt.run("compat-parent", _sync2_machine(child), {"n": 7})

    # Then the Task's result is the child's DescribeExecution, AWS sync:2 shape (JSON Output)
    assert record.status == "SUCCEEDED", record.cause
    assert record.output["Status"] == "SUCCEEDED"
    assert record.output["Output"] == {"m": 7}
    assert record.output["Input"] == {"n": 7}
    assert record.output["Name"] == record.name
    assert record.output["ExecutionArn"].endswith(f":compat-child:{record.name}")
    assert isinstance(record.output["StartDate"], int)


def test_start_execution_sync2_fails_with_the_child_description_as_cause(rt):
    # Given a child that fails
    child = rt.create_state_machine(
        "compat-failing-child",
        machine({"Boom": {"Type": "Fail", "Error": "Child.Broke", "Cause": "no luck"}}),
    )

    # When the parent runs
    record = rt.run("compat-failing-parent", _sync2_machine(child), {"n": 1})

    # Then the Task fails with States.TaskFailed whose Cause describes the child (AWS shape)
    assert record.status == "FAILED"
    assert record.error == "States.TaskFailed"
    cause = json.loads(record.cause)
    assert cause["Status"] == "FAILED"
    assert (cause["Error"], cause["Cause"]) == ("Child.Broke", "no luck")
    assert cause["ExecutionArn"].endswith(f":compat-failing-child:{record.name}")


def test_without_the_fix_moto_cannot_run_start_execution_sync2(rt):
    # Given the runtime with the start_execution_sync fix left out
    child = rt.create_state_machine("skip-child", machine({"Done": {"Type": "Pass", "End": True}}))
    compat.apply(skip=["start_execution_sync"])
    try:
        # When a parent starts the child with startExecution.sync:2
        record = rt.run("skip-parent", _sync2_machine(child), {"n": 1})
    finally:
        compat.apply()

    # Then moto fails the Task instead of running the child
    assert record.status == "FAILED"
    assert record.error == "States.Runtime"
