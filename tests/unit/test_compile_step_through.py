"""The step-through variant (relayflow.compiler.debug): a gate before each entry into a
top-level step, nothing else changed, and a valid machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relayflow.compiler import compile_workflow
from relayflow.compiler.check import assert_valid_machine
from relayflow.compiler.debug import GATE_SUFFIX, STEP_THROUGH_OFF, step_through_variant
from relayflow.definition import load_workflow, load_workflow_text

EXAMPLES = Path(__file__).resolve().parents[2] / "workflows" / "examples"
GATE_ARN = "arn:aws:lambda:us-east-1:123456789012:function:relayflow-waitpoint"

LOOP = """
id: loop
start: fetch
steps:
  fetch: {type: transform, mapping: {n: 1}, on_success: check}
  check:
    type: condition
    expression: "trigger.again == true"
    on_true: fetch
    on_false: fan
  fan: {type: parallel, branches: [left, right]}
  left: {type: noop}
  right: {type: noop}
"""


def test_every_entry_into_a_top_level_step_goes_through_one_gate():
    workflow = load_workflow_text(LOOP, "loop.yaml")
    asl = compile_workflow(workflow).asl
    variant = step_through_variant(asl, workflow.steps, GATE_ARN)
    assert_valid_machine(variant)
    states = variant["States"]
    gates = {name for name in states if name.endswith(GATE_SUFFIX)}
    # One gate per way into a top-level step; none inside the parallel's branches. The
    # loop back into fetch enters at its cycle counter (fetch.loop), behind a gate too.
    assert gates == {"fetch.gate", "fetch.loop.gate", "check.gate", "fan.gate"}
    # (A cyclic workflow starts at its counters' _init state, which leads to the first gate.)
    assert variant["StartAt"] == "_init" and states["_init"]["Next"] == "fetch.gate"
    targets = {c["Next"] for c in states["check"]["Choices"]} | {states["check"].get("Default")}
    assert "fetch.loop.gate" in targets and "fetch.loop" not in targets
    gate = states["fetch.gate"]
    assert gate["Resource"].endswith("lambda:invoke.waitForTaskToken")
    assert gate["Parameters"]["FunctionName"] == GATE_ARN
    assert gate["Parameters"]["Payload"]["step"]["type"] == "step_gate"
    assert gate["ResultPath"] is None and gate["Next"] == "fetch"
    assert gate["Catch"] == [
        {"ErrorEquals": [STEP_THROUGH_OFF], "ResultPath": None, "Next": "fetch"}
    ]
    branch_states = {n for b in states["fan"]["Branches"] for n in b["States"]}
    assert not any(n.endswith(GATE_SUFFIX) for n in branch_states)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_the_normal_machine_is_untouched_and_the_variant_only_adds_gates(path):
    workflow = load_workflow(path)
    asl = compile_workflow(workflow).asl
    before = json.dumps(asl, sort_keys=True)
    variant = step_through_variant(asl, workflow.steps, GATE_ARN)
    assert_valid_machine(variant)
    # The normal machine (what normal runs execute) is not changed by building the variant
    assert json.dumps(asl, sort_keys=True) == before
    added = set(variant["States"]) - set(asl["States"])
    assert added and all(name.endswith(GATE_SUFFIX) for name in added)
    # Apart from transitions pointing at gates, every original state is as it was
    for name, state in asl["States"].items():
        rewired = json.loads(json.dumps(variant["States"][name]).replace(GATE_SUFFIX, ""))
        assert rewired == state


def test_an_agent_that_suspends_keeps_its_own_choice_in_the_step_through_variant():
    # Given an agent with approval and workflow tools (its loop suspends through a Choice)
    workflow = load_workflow_text(
        """
id: wf
start: ask
steps:
  ask:
    type: agent
    model: scripted:x
    prompt: hi
    tools: [workflow.child, aws.sqs.send_message]
    require_approval_tools: [aws.sqs.send_message]
""",
        "wf.yaml",
    )
    asl = compile_workflow(workflow).asl
    # When the step-through variant is made
    variant = step_through_variant(asl, workflow.steps, "arn:aws:lambda:us-east-1:1:function:w")
    # Then the step-through gate before the agent and the agent's own Choice are two states
    states = variant["States"]
    assert states["ask.gate"]["Type"] == "Task" and states["ask.gate"]["Next"] == "ask"
    assert states["ask"]["Next"] == "ask.await" and states["ask.await"]["Type"] == "Choice"
    assert {c["Next"] for c in states["ask.await"]["Choices"]} == {"ask.approval", "ask.workflow"}
