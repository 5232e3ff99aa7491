"""The step-through variant of a compiled machine: a gate before every top-level step.

Step-through runs (``docs/run-modes.md``) start on a separately compiled variant of the
workflow's machine, never on the normal one, so normal runs keep their transition count. The
variant is the normal ASL with one extra state per entry into a top-level step: the gate
``<entry state>.gate``, a ``lambda:invoke.waitForTaskToken`` Task on the waitpoint function
(step type ``step_gate``, :mod:`relayflow.steps.step_gate`). Every transition into a step
from outside it (``StartAt``, ``Next``, ``Default``, a Choice rule, a Catch) is sent through
its gate, which waits until ``POST /runs/{id}/continue`` releases it. The gate's own result is
discarded (``ResultPath: null``); ``Relayflow.StepThroughOff`` (the run was told to run to
its end) is caught and goes on to the step at once.

Steps inside a ``parallel`` branch or a ``for_each`` item run without gates: the gate stops
before the ``parallel`` or ``for_each`` step as a whole.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from relayflow.compiler.asl import LAMBDA_INVOKE
from relayflow.document import StepRef, task_parameters

#: The step type the waitpoint function serves as a gate.
STEP_GATE = "step_gate"
#: Raised by a gate when the run should run to its end (caught by the gate itself).
STEP_THROUGH_OFF = "Relayflow.StepThroughOff"
GATE_SUFFIX = ".gate"


def _step_of(state: str, step_keys: frozenset[str]) -> str | None:
    key = state.split(".", 1)[0]
    return key if key in step_keys else None


def _transitions(state: dict[str, Any]) -> Iterable[tuple[dict[str, Any], str]]:
    """``(holder, field)`` of every transition out of ``state``."""
    if isinstance(state.get("Next"), str):
        yield state, "Next"
    if isinstance(state.get("Default"), str):
        yield state, "Default"
    for rule in state.get("Choices") or []:
        if isinstance(rule, dict) and isinstance(rule.get("Next"), str):
            yield rule, "Next"
    for catcher in state.get("Catch") or []:
        if isinstance(catcher, dict) and isinstance(catcher.get("Next"), str):
            yield catcher, "Next"


def gate_state(step_key: str, target: str, function_arn: str) -> dict[str, Any]:
    """The gate that holds ``target`` (the entry state of ``step_key``) until released."""
    return {
        "Type": "Task",
        "Resource": f"{LAMBDA_INVOKE}.waitForTaskToken",
        "Parameters": task_parameters(
            function_arn, StepRef(key=step_key, type=STEP_GATE), task_token=True
        ),
        "ResultPath": None,
        "Next": target,
        "Catch": [{"ErrorEquals": [STEP_THROUGH_OFF], "ResultPath": None, "Next": target}],
    }


def step_through_variant(
    asl: dict[str, Any], step_keys: Iterable[str], gate_function_arn: str
) -> dict[str, Any]:
    """A copy of ``asl`` with a gate before each entry into a top-level step (see the module
    docstring). ``asl`` is not changed."""
    keys = frozenset(step_keys)
    variant = copy.deepcopy(asl)
    states: dict[str, Any] = variant["States"]
    gates: dict[str, dict[str, Any]] = {}

    def through_gate(target: str) -> str:
        step = _step_of(target, keys)
        if step is None:
            return target
        name = f"{target}{GATE_SUFFIX}"
        gates.setdefault(name, gate_state(step, target, gate_function_arn))
        return name

    variant["StartAt"] = through_gate(variant["StartAt"])
    for name, state in states.items():
        source = _step_of(name, keys)
        for holder, field in _transitions(state):
            target = holder[field]
            if _step_of(target, keys) != source:
                holder[field] = through_gate(target)
    states.update(gates)
    return variant
