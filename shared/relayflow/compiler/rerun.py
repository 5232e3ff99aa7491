"""The rerun variant of a compiled machine: a Choice at the top that starts at a chosen step.

A rerun (``POST /runs/{id}/rerun``, ``docs/api.md#rerun-from-a-step``) is a new run with an
earlier run's trigger that starts at one step of the main flow. Its execution input carries
the earlier run's step outputs in ``$.steps`` (so templates and conditions of the steps it
runs read them as before) and the step to start at in ``$.rerun.from_step``. The variant is
the normal ASL with one extra state, ``_rerun.from``, a Choice with one rule per main-flow
step sending the run to that step's entry state; it sits where the main flow begins, after
the machine's own set-up states (the cycle counter, the saga's list, the native recording
wrapper's branch), so those still run first. Nothing else changes: what a step does, its
retries, error routes and parks are the normal machine's.

Only the main flow can be entered: a step inside a ``parallel`` branch or a ``for_each``
item runs as part of its owner, so a rerun from it starts at the owner.

Pure: an ASL dict in, the variant out; ``asl`` is not changed.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from relayflow.compiler.debug import step_of, transitions
from relayflow.compiler.recording import RUN_STATE

#: The Choice state the variant starts at (no step key starts with ``_``).
RERUN_CHOICE = "_rerun.from"
#: Where the execution input names the step to start at.
FROM_STEP_PATH = "$.rerun.from_step"


def _main_scope(asl: dict[str, Any]) -> dict[str, Any]:
    """The scope that holds the main flow: the machine, or the one branch of the native
    recording wrapper (:mod:`relayflow.compiler.recording`)."""
    top = asl["States"].get(asl["StartAt"], {})
    if asl["StartAt"] == RUN_STATE and top.get("Type") == "Parallel":
        return top["Branches"][0]
    return asl


def entry_states(scope: dict[str, Any], steps: Iterable[str]) -> dict[str, str]:
    """Step key → the state a transition into that step enters, for the main-flow steps of
    ``scope`` (a step no route enters, e.g. only the start, falls back to its own name)."""
    keys = frozenset(steps)
    states: dict[str, Any] = scope["States"]
    entries: dict[str, str] = {}
    start = step_of(scope["StartAt"], keys)
    if start is not None:
        entries[start] = scope["StartAt"]
    for name, state in states.items():
        source = step_of(name, keys)
        for holder, field in transitions(state):
            target = holder[field]
            step = step_of(target, keys)
            if step is not None and step != source:
                entries.setdefault(step, target)
    for key in keys:
        if key not in entries and key in states:
            entries[key] = key
    return entries


def rerun_variant(asl: dict[str, Any], main_steps: Iterable[str]) -> dict[str, Any]:
    """A copy of ``asl`` that starts at the main-flow step ``$.rerun.from_step`` names (see
    the module docstring); a name no rule matches starts where the normal machine does."""
    variant = copy.deepcopy(asl)
    scope = _main_scope(variant)
    steps = list(main_steps)
    keys = frozenset(steps)
    states: dict[str, Any] = scope["States"]
    # Walk past the set-up Pass states (counters, saga) to the first step's entry.
    holder: dict[str, Any] = scope
    field = "StartAt"
    seen: set[str] = set()
    while step_of(holder[field], keys) is None:
        state = states.get(holder[field])
        if state is None or state.get("Type") != "Pass" or holder[field] in seen:
            break
        seen.add(holder[field])
        holder, field = state, "Next"
    first = holder[field]
    entries = entry_states(scope, steps)
    choices = [
        {"Variable": FROM_STEP_PATH, "StringEquals": key, "Next": entries[key]}
        for key in steps
        if key in entries
    ]
    states[RERUN_CHOICE] = {"Type": "Choice", "Choices": choices, "Default": first}
    holder[field] = RERUN_CHOICE
    return variant
