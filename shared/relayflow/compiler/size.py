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
    """``value`` as the compact JSON a deployment sends: no spaces, and non-ASCII characters
    as ``\\uXXXX`` escapes, as the control plane serialises a machine for Step Functions (so
    a character outside ASCII counts 6 or 12 bytes, not its 2 to 4 of UTF-8)."""
    return json.dumps(value, separators=(",", ":"), default=str)


def definition_bytes(asl: dict[str, Any]) -> int:
    """Size of the compiled definition as Step Functions receives it (compact JSON, the same
    measure as :func:`relayflow.compiler.check.definition_size`)."""
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
