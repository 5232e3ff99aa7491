"""``input_schema`` on the local runtime: an agent's workflow tool is offered the child's
schema and a call whose arguments break it never starts the child (the model gets
``Relayflow.InvalidInput``); ``run_workflow`` and ``relayflow run --input`` refuse a trigger
that breaks the workflow's own schema before anything runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from relayflow.cli.main import main
from relayflow.errors import InvalidRunInput
from relayflow.local import LocalRuntime
from relayflow.runner import RunResult, run_workflow
from relayflow.validation import load_workflow_text

pytestmark = pytest.mark.integration
BARE_RUNTIME = True

CHILD = """
id: sized-lookup
input_schema:
  type: object
  properties:
    sku: {type: string}
    qty: {type: integer, minimum: 1}
  required: [sku, qty]
start: quote
steps:
  quote:
    type: transform
    mapping:
      price: "{{ trigger.qty * 5 }}"
"""

PARENT = """
id: sized-quoter
start: ask
steps:
  ask:
    type: agent
    model: scripted:{fixture}
    prompt: "Quote"
    tools: [workflow.sized-lookup]
"""


def call(call_id: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": "workflow_sized-lookup", "input": args}


def turn(*content: dict[str, Any]) -> dict[str, Any]:
    return {"content": list(content), "usage": {"input_tokens": 10, "output_tokens": 5}}


def child_runs(runtime: LocalRuntime) -> int:
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:relayflow-sized-lookup"
    try:
        return len(runtime.sfn_client.list_executions(stateMachineArn=arn)["executions"])
    except Exception:  # not published yet
        return 0


def test_a_call_that_breaks_the_childs_schema_is_refused_then_a_corrected_one_runs(
    runtime, fixtures
):
    # Given a model that calls the child with a qty of 0, then corrects the call
    fixture = fixtures(
        "sized",
        turn(call("c1", {"sku": "A-1", "qty": 0})),
        turn(call("c2", {"sku": "A-1", "qty": 2})),
        turn({"type": "text", "text": "A-1 costs 10."}),
    )
    child = load_workflow_text(CHILD, "child.yaml")
    parent = load_workflow_text(PARENT.format(fixture=fixture), "parent.yaml")
    before = child_runs(runtime)
    # When the parent runs (the local runner resolves the child's schema)
    result = run_workflow(parent, {}, runtime=runtime, workflows={child.id: child}, timeout=60)
    # Then the first call was refused with the violation and started no child
    assert result.succeeded, (result.error, result.cause)
    first, second = result.output["steps"]["ask"]["output"]["tool_calls"]
    assert first["status"] == "failed"
    assert first["error"]["error"] == "Relayflow.InvalidInput"
    assert first["error"]["violations"] == [
        {"pointer": "/qty", "rule": "minimum", "message": "0 is less than the minimum of 1"}
    ]
    # And the corrected call ran the child once
    assert second["status"] == "succeeded"
    assert second["output"]["steps"]["quote"] == {"price": 10}
    assert child_runs(runtime) == before + 1


def test_run_workflow_refuses_a_trigger_that_breaks_the_schema(runtime):
    child = load_workflow_text(CHILD, "child.yaml")
    with pytest.raises(InvalidRunInput, match=r"/qty: 'x' is not of type 'integer' \(rule type\)"):
        run_workflow(child, {"sku": "A-1", "qty": "x"}, runtime=runtime, timeout=60)


def test_relayflow_run_exits_2_naming_each_violation(tmp_path, capsys):
    path = tmp_path / "child.yaml"
    path.write_text(CHILD)
    code = main(["run", str(path), "--input", '{"qty": 0}'])
    err = capsys.readouterr().err
    assert code == 2
    assert "--input does not match workflow 'sized-lookup's input_schema" in err
    assert "(the input): 'sku' is a required property [required]" in err
    assert "/qty: 0 is less than the minimum of 1 [minimum]" in err


CALLER = """
id: sized-caller
start: call
steps:
  call:
    type: sub_workflow
    workflow_id: sized-lookup
    input: {sku: "{{ trigger.sku }}", qty: "{{ trigger.qty }}"}
    retry: {max_attempts: 3, retry_on: [States.ALL]}
    on_failure: handle
  handle:
    type: transform
    mapping: {error: "{{ error.Error }}"}
"""


def run_caller(runtime: LocalRuntime, trigger: dict[str, Any]) -> RunResult:
    """The caller run with ``trigger``, its sub_workflow step starting the child."""
    child = load_workflow_text(CHILD, "child.yaml")
    parent = load_workflow_text(CALLER, "caller.yaml")
    return run_workflow(parent, trigger, runtime=runtime, workflows={child.id: child}, timeout=60)


def test_a_sub_workflow_whose_input_breaks_the_childs_schema_fails_with_invalid_input(runtime):
    # Given a parent whose sub_workflow step renders the child's input from its trigger
    before = child_runs(runtime)
    # When it runs with a qty the child's schema refuses
    result = run_caller(runtime, {"sku": "A-1", "qty": 0})
    # Then no child started, the step's retries did not repeat it, and the failure route
    # saw Relayflow.InvalidInput naming the violation
    assert result.succeeded, (result.error, result.cause)
    assert result.output["steps"]["handle"]["output"] == {"error": "Relayflow.InvalidInput"}
    assert child_runs(runtime) == before
    calls = [s for s in result.steps if s.key == "call"]
    assert len(calls) == 1 and calls[0].status == "failed"
    assert "/qty: 0 is less than the minimum of 1" in json.dumps(result.output["error"])


def test_a_sub_workflow_whose_input_matches_starts_the_child(runtime):
    before = child_runs(runtime)
    result = run_caller(runtime, {"sku": "A-1", "qty": 4})
    assert result.succeeded, (result.error, result.cause)
    assert result.output["steps"]["call"]["output"]["steps"]["quote"]["output"] == {"price": 20}
    assert child_runs(runtime) == before + 1
