"""The step-through variant (relayflow.compiler.debug): a gate before each entry into a
step, in every scope (top level, parallel branches, for_each items), nothing else changed,
and a valid machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relayflow.compiler import compile_workflow
from relayflow.compiler.check import assert_valid_machine
from relayflow.compiler.debug import GATE_SUFFIX, STEP_THROUGH_OFF, step_through_variant
from relayflow.validation import load_workflow, load_workflow_text

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


def gate_names(scope: dict) -> set[str]:
    """Every gate state of a scope and the scopes nested in it."""
    found = {name for name in scope["States"] if name.endswith(GATE_SUFFIX)}
    for state in scope["States"].values():
        for nested in [*state.get("Branches", []), state.get("ItemProcessor") or {"States": {}}]:
            found |= gate_names(nested)
    return found


def without_gates(scope: dict) -> dict:
    """A copy of the scope with its gates (in every nested scope) taken out and every
    transition into a gate pointed at the gate's step again."""
    scope = json.loads(json.dumps(scope))
    gates = {
        name: state["Next"]
        for name, state in scope["States"].items()
        if ((state.get("Parameters") or {}).get("Payload") or {}).get("step", {}).get("type")
        == "step_gate"
    }
    scope["StartAt"] = gates.get(scope["StartAt"], scope["StartAt"])
    for name in gates:
        del scope["States"][name]
    for state in scope["States"].values():
        holders = [state, *state.get("Choices", []), *state.get("Catch", [])]
        for holder in holders:
            for field in ("Next", "Default"):
                if holder.get(field) in gates:
                    holder[field] = gates[holder[field]]
        for branch_index, branch in enumerate(state.get("Branches", [])):
            state["Branches"][branch_index] = without_gates(branch)
        if "ItemProcessor" in state:
            state["ItemProcessor"] = without_gates(state["ItemProcessor"])
    return scope


def test_every_entry_into_a_step_goes_through_one_gate_in_every_scope():
    workflow = load_workflow_text(LOOP, "loop.yaml")
    asl = compile_workflow(workflow).asl
    variant = step_through_variant(asl, workflow.steps, GATE_ARN)
    assert_valid_machine(variant)
    states = variant["States"]
    gates = {name for name in states if name.endswith(GATE_SUFFIX)}
    # One gate per way into a top-level step. The loop back into fetch enters at its cycle
    # counter (fetch.loop), behind a gate too.
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
    # And each parallel branch waits before its own step, after the gate before the parallel
    for branch, step in zip(states["fan"]["Branches"], ("left", "right"), strict=True):
        assert branch["StartAt"] == f"{step}.gate"
        assert branch["States"][f"{step}.gate"]["Next"] == step
        payload = branch["States"][f"{step}.gate"]["Parameters"]["Payload"]
        assert payload["step"]["key"] == step and payload["doc.$"] == "$"


EACH = """
id: each
start: prices
steps:
  prices:
    type: for_each
    items: "{{ trigger.lines }}"
    step: price
    on_success: done
  price: {type: transform, mapping: {sku: "{{ item.sku }}"}}
  done: {type: noop}
"""


def test_each_for_each_item_waits_before_each_of_its_steps():
    workflow = load_workflow_text(EACH, "each.yaml")
    asl = compile_workflow(workflow).asl
    variant = step_through_variant(asl, workflow.steps, GATE_ARN)
    assert_valid_machine(variant)
    (map_name,) = [n for n, s in variant["States"].items() if s["Type"] == "Map"]
    processor = variant["States"][map_name]["ItemProcessor"]
    # Each item waits before its step
    assert processor["StartAt"] == "price.gate"
    assert processor["States"]["price.gate"]["Next"] == "price"
    # The item document carries the run and the item index (each item's gate is its own)
    selector = variant["States"][map_name]["ItemSelector"]
    assert selector["run.$"] == "$.run" and selector["index.$"] == "$$.Map.Item.Index"
    assert gate_names(variant) == {"prices.list.gate", "price.gate", "done.gate"}
    # And the normal machine has none of it
    assert gate_names(asl) == set()


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
    # Apart from gates and transitions pointing at them (in every scope), the variant is the
    # normal machine
    assert without_gates(variant) == asl


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
    assert without_gates(variant) == asl


def test_a_gate_never_takes_the_name_of_a_state_the_machine_has():
    # Given a machine with a state that ends in .gate (here an agent's suspension Choice,
    # renamed from its own name, <key>.await, to collide)
    golden = Path(__file__).resolve().parents[1] / "golden" / "agent_approval.asl.json"
    asl = json.loads(golden.read_text().replace("refunder.await", "refunder.gate"))
    assert asl["States"]["refunder.gate"]["Type"] == "Choice"
    variant = step_through_variant(asl, ["refunder", "done", "failed"], GATE_ARN)
    # Then the Choice is kept (routing into the next step's gate) and the step's gate gets a
    # name of its own
    kept = variant["States"]["refunder.gate"]
    assert kept["Type"] == "Choice" and kept["Default"] == "done.gate"
    assert variant["StartAt"] == "refunder.gate.gate"
    assert variant["States"]["refunder.gate.gate"]["Next"] == "refunder"
    assert without_gates(variant) == asl
