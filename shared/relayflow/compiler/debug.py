"""The step-through variant of a compiled machine: a gate before every step.

Step-through runs (``docs/run-modes.md``) start on a separately compiled variant of the
workflow's machine, never on the normal one, so normal runs keep their transition count. The
variant is the normal ASL with one extra state per entry into a step: the gate
``<entry state>.gate``, a ``lambda:invoke.waitForTaskToken`` Task on the waitpoint function
(step type ``step_gate``, :mod:`relayflow.steps.step_gate`). Every transition into a step
from outside it (``StartAt``, ``Next``, ``Default``, a Choice rule, a Catch) is sent through
its gate, which waits until ``POST /runs/{id}/continue`` releases it. The gate's own result is
discarded (``ResultPath: null``); ``Relayflow.StepThroughOff`` (the run was told to run to
its end) is caught and goes on to the step at once.

Every scope is gated the same way: the top level, each ``parallel`` branch and each
``for_each`` item processor. A ``parallel`` or ``for_each`` step waits at its own gate first;
inside, each branch (or each item, as many at once as its concurrency allows) then waits
before each of its steps. Gate names stay unique across the machine because every entry state
belongs to one step, and step keys are unique.
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


def step_of(state: str, step_keys: frozenset[str]) -> str | None:
    """The step whose state ``state`` is (its name up to the first ``.``); ``None`` for the
    machine's own states (``_init``, ``_saga.*``…)."""
    key = state.split(".", 1)[0]
    return key if key in step_keys else None


def transitions(state: dict[str, Any]) -> Iterable[tuple[dict[str, Any], str]]:
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
    """A copy of ``asl`` with a gate before each entry into a step, in every scope (see the
    module docstring). ``asl`` is not changed."""
    keys = frozenset(step_keys)
    variant = copy.deepcopy(asl)
    _gate_scope(variant, keys, gate_function_arn)
    return variant


def _nested_scopes(state: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """The scopes inside a state: a Parallel's branches, a Map's item processor."""
    for branch in state.get("Branches") or []:
        if isinstance(branch, dict):
            yield branch
    for field in ("ItemProcessor", "Iterator"):
        if isinstance(state.get(field), dict):
            yield state[field]


def _gate_scope(scope: dict[str, Any], keys: frozenset[str], gate_function_arn: str) -> None:
    """Gate every entry into a step of one scope (``StartAt`` and ``States``), in place, and
    of the scopes nested in it."""
    states: dict[str, Any] = scope["States"]
    gates: dict[str, dict[str, Any]] = {}

    def through_gate(target: str) -> str:
        step = step_of(target, keys)
        if step is None:
            return target
        name = f"{target}{GATE_SUFFIX}"
        while name in states:
            # The compiled machine has a state of that name (an agent's approval gate).
            name += GATE_SUFFIX
        gates.setdefault(name, gate_state(step, target, gate_function_arn))
        return name

    scope["StartAt"] = through_gate(scope["StartAt"])
    for name, state in states.items():
        source = step_of(name, keys)
        for holder, field in transitions(state):
            target = holder[field]
            if step_of(target, keys) != source:
                holder[field] = through_gate(target)
        for nested in _nested_scopes(state):
            _gate_scope(nested, keys, gate_function_arn)
    states.update(gates)
