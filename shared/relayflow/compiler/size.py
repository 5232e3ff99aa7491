"""The compiled definition's size against Step Functions' quota, and who contributes to it."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from relayflow import naming
from relayflow.compiler.options import CompileOptions

#: Step Functions' quota on a state machine definition: bytes of its JSON (UTF-8).
MAX_STATE_MACHINE_BYTES = 1_048_576
#: The longest names a deployment puts into a compiled machine: the longest region name,
#: the ``prod`` stage in function names (``relayflow-<stage>-<kind>``) and 80-character state
#: machine names (sub_workflow targets). A definition measured with these fits every stack.
SIZING_REGION = "ap-southeast-4"
SIZING_OPTIONS = CompileOptions(
    function_arns={
        kind: naming.function_arn(f"prod-{kind}", SIZING_REGION) for kind in naming.STEP_FUNCTIONS
    },
    region=SIZING_REGION,
    state_machine_name=lambda workflow_id: "r" * 80,
)


def compact_json(value: Any) -> str:
    """``value`` as the compact JSON a deployment sends (no spaces, UTF-8 kept)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def definition_bytes(asl: dict[str, Any]) -> int:
    """Size of the compiled definition as Step Functions counts it (compact UTF-8 JSON)."""
    return len(compact_json(asl).encode())


def step_bytes(asl: dict[str, Any]) -> Counter[str]:
    """Bytes of the definition each step accounts for: its main state and its ``<key>.*``
    auxiliary states (a Parallel's or Map's nested states count for their own steps)."""
    sizes: Counter[str] = Counter()

    def walk(states: dict[str, Any]) -> None:
        for name, state in states.items():
            own = {k: v for k, v in state.items() if k not in ("Branches", "ItemProcessor")}
            sizes[name.split(".")[0]] += len(compact_json({name: own}).encode()) - 2
            for branch in state.get("Branches", []):
                walk(branch["States"])
            if "ItemProcessor" in state:
                walk(state["ItemProcessor"]["States"])

    walk(asl["States"])
    return sizes
