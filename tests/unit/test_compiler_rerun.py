"""The rerun variant (relayflow.compiler.rerun): a Choice at the start of the main flow that
enters the chosen step, after the machine's set-up states; the normal ASL is not changed."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from relayflow.compiler.check import assert_valid_machine
from relayflow.compiler.recording import RUN_STATE, with_native_recording
from relayflow.compiler.rerun import RERUN_CHOICE, rerun_variant

GOLDEN = Path(__file__).parents[1] / "golden"


def golden(name: str) -> dict:
    return json.loads((GOLDEN / f"{name}.asl.json").read_text())


def rules(choice: dict) -> dict[str, str]:
    return {rule["StringEquals"]: rule["Next"] for rule in choice["Choices"]}


def test_the_choice_is_the_start_and_its_default_the_normal_start():
    asl = golden("approval")
    before = copy.deepcopy(asl)
    variant = rerun_variant(asl, ["ask", "pay", "notify", "alert"])
    assert asl == before
    assert variant["StartAt"] == RERUN_CHOICE
    choice = variant["States"][RERUN_CHOICE]
    assert choice["Default"] == "ask"
    assert rules(choice) == {"ask": "ask", "pay": "pay", "notify": "notify", "alert": "alert"}
    assert all(r["Variable"] == "$.rerun.from_step" for r in choice["Choices"])
    assert_valid_machine(variant)


@pytest.mark.parametrize(("name", "setup"), [("cycle", "_init"), ("saga", "_saga.init")])
def test_set_up_states_still_run_first(name, setup):
    asl = golden(name)
    steps = [k for k in asl["States"] if "." not in k and not k.startswith("_")]
    variant = rerun_variant(asl, steps)
    assert variant["StartAt"] == setup
    assert variant["States"][setup]["Next"] == RERUN_CHOICE
    assert variant["States"][RERUN_CHOICE]["Default"] == asl["States"][setup]["Next"]
    assert_valid_machine(variant)


def test_a_natively_recorded_machine_gets_the_choice_inside_its_branch():
    asl = with_native_recording(golden("approval"), "relayflow-test", 3600)
    variant = rerun_variant(asl, ["ask", "pay"])
    assert variant["StartAt"] == RUN_STATE
    branch = variant["States"][RUN_STATE]["Branches"][0]
    assert branch["StartAt"] == RERUN_CHOICE
    assert rules(branch["States"][RERUN_CHOICE]) == {"ask": "ask", "pay": "pay"}
    assert_valid_machine(variant)
