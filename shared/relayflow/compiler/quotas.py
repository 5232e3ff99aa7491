"""Step Functions quotas a valid definition can reach: the user's input, not a compiler bug.

Pure: a compiled ASL dict in, :class:`~relayflow.definition.problems.Problem` s out. Two quotas
depend on what the definition says rather than on how the compiler builds a machine:

* **Definition size** (1,048,576 bytes, rule ``compiled-size``): a long chain of acting steps,
  large mappings or HTTP bodies, and the ``input_schema`` of every child a ``sub_workflow``
  step checks its input against (embedded in each calling step) all add up. Validation
  measures the machine it compiles with the longest deployed names
  (:mod:`relayflow.validation.limits`); the control plane and the CLI measure the machine they
  are about to deploy or run, which may also hold child schemas, the Express recording
  wrapper or the step-through gates.
* **Execution history** (25,000 events for a Standard execution, rule ``history-events``): an
  inline ``for_each`` writes every item's events into the run's own history, and a cycle's
  steps write theirs until ``max_steps_per_run`` stops it. When even the fewest events a run
  can write before the step's own guard stops it pass the quota, the guard can never fire:
  a run given that many items (or looping that long) would fail on the quota instead of with
  ``Relayflow.TooManyItems`` / ``Relayflow.MaxStepsExceeded``. Express machines keep no
  history and have no such quota; a distributed ``for_each`` runs each item as a child
  execution with a history of its own.

Everything else :mod:`relayflow.compiler.check` reports stays a compiler bug.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from relayflow.compiler.size import MAX_STATE_MACHINE_BYTES, definition_bytes, step_bytes
from relayflow.definition.problems import DefinitionError, Problem

if TYPE_CHECKING:
    from relayflow.definition.models import Workflow

#: Step Functions quota: "Maximum execution history size: 25,000 events" (Standard).
MAX_HISTORY_EVENTS = 25_000
#: The state that starts the cycle counter (:mod:`relayflow.compiler.driver`).
CYCLE_INIT_STATE = "_init"
#: How many of the largest steps a size problem names.
LARGEST_STEPS = 5
#: Fewest history events one state writes when it succeeds first time: ``…StateEntered`` and
#: ``…StateExited``; a Task also ``TaskScheduled``, ``TaskStarted`` and ``TaskSucceeded``; a
#: Parallel or Map also ``…StateStarted`` and ``…StateSucceeded``.
_STATE_EVENTS = 2
_TASK_EVENTS = 5
_SCOPE_EVENTS = 4
#: ``MapIterationStarted`` and ``MapIterationSucceeded`` around each item.
_ITERATION_EVENTS = 2
#: ``ExecutionStarted`` and the event that ends the execution.
_EXECUTION_EVENTS = 2
#: The states a for_each passes before its Map: ``<key>.list`` (Choice), ``<key>.size``
#: (Pass) and ``<key>.check`` (an empty list passes two more, and has no items to count).
_GUARD_EVENTS = 3 * _STATE_EVENTS
#: A step executed inside a cycle writes at least its own state's two events.
_CYCLE_STEP_EVENTS = _STATE_EVENTS


def size_problem(
    asl: Mapping[str, Any], file: str | None = None, *, what: str = "the compiled state machine"
) -> Problem | None:
    """A ``compiled-size`` problem (path ``steps``) when ``asl`` passes Step Functions'
    definition quota, with the measured size, the quota, the largest steps and what to do;
    ``None`` when it fits. ``what`` names the machine in the message."""
    size = definition_bytes(dict(asl))
    if size <= MAX_STATE_MACHINE_BYTES:
        return None
    # A malformed machine (a compiler bug the check reports next) has no step breakdown.
    sizes = step_bytes(dict(asl)) if isinstance(asl.get("States"), Mapping) else {}
    # States the compiler adds for the whole run (``_init``, ``_run``, ``_record.*``) are not
    # any step's.
    steps = {key: count for key, count in sizes.items() if not key.startswith("_")}
    largest = ", ".join(
        f"{key} ({count:,} bytes)"
        for key, count in sorted(steps.items(), key=lambda kv: (-kv[1], kv[0]))[:LARGEST_STEPS]
    )
    average = sum(steps.values()) // max(len(steps), 1)
    checked = sorted(
        name.split(".")[0] for name, _ in _all_states(asl) if name.endswith(".check_input")
    )
    schemas = (
        f" The sub_workflow steps {', '.join(checked[:LARGEST_STEPS])}"
        f"{' …' if len(checked) > LARGEST_STEPS else ''} each embed their child's input_schema: "
        "a smaller schema shrinks every caller."
        if checked
        else ""
    )
    return Problem(
        file,
        "steps",
        "compiled-size",
        f"{what} would be {size:,} bytes; Step Functions accepts at most "
        f"{MAX_STATE_MACHINE_BYTES:,}. Largest steps: {largest}; {len(steps):,} steps take "
        f"{average:,} bytes each on average.{schemas} Move part of the workflow into a "
        "sub_workflow (a state machine of its own), set retry: none where a step needs no "
        "retries (or defaults: {retry: none}), or shrink the largest steps (smaller mappings, "
        "HTTP bodies and routing options)",
    )


def assert_within_size(
    asl: Mapping[str, Any], file: str | None = None, *, what: str = "the compiled state machine"
) -> None:
    """Raise :class:`DefinitionError` (rule ``compiled-size``) when ``asl`` passes the
    definition size quota: ``relayflow compile`` and ``relayflow run`` report it as the
    definition's problem (exit 2), not as a compiler bug."""
    problem = size_problem(asl, file, what=what)
    if problem is not None:
        raise DefinitionError([problem])


def history_problems(
    workflow: Workflow, asl: Mapping[str, Any], file: str | None = None
) -> list[Problem]:
    """``history-events`` problems of ``asl``, ``workflow`` compiled, run as a Standard
    execution (the caller knows the engine: an Express machine has no history quota).

    One problem at ``steps.<key>.max_items`` per inline for_each, and one at
    ``max_steps_per_run`` for a workflow with cycles, where the fewest events a run writes
    before that guard stops it pass :data:`MAX_HISTORY_EVENTS`: a definition refused here would
    surely break a run that reaches its own limit."""
    return list(_history_problems(workflow, asl, file))


def _history_problems(
    workflow: Workflow, asl: Mapping[str, Any], file: str | None
) -> Iterator[Problem]:
    states = dict(_all_states(asl))
    for key, step in workflow.steps.items():
        state = states.get(key)
        if step.type != "for_each" or state is None or not _inline_map(state):
            continue
        items = step.max_items
        processor = state.get("ItemProcessor") or state.get("Iterator") or {}
        per_item = _ITERATION_EVENTS + _fewest_events(processor)
        fixed = _EXECUTION_EVENTS + _GUARD_EVENTS + _SCOPE_EVENTS
        events = fixed + items * per_item
        if events > MAX_HISTORY_EVENTS:
            most = (MAX_HISTORY_EVENTS - fixed) // per_item
            yield Problem(
                file,
                f"steps.{key}.max_items",
                "history-events",
                f"an inline for_each of {items:,} items writes at least {events:,} events "
                f"into the run's history ({per_item} per item), over Step Functions' "
                f"{MAX_HISTORY_EVENTS:,}-event quota for a Standard execution: a run given "
                f"that many items would fail on the quota, not with Relayflow.TooManyItems. "
                f"Lower max_items to at most {most:,}, or use mode: distributed (each item "
                "a child execution with a history of its own)",
            )
    # ``_init`` starts the cycle counter: only a workflow with cycles has it.
    max_steps_per_run = workflow.max_steps_per_run if CYCLE_INIT_STATE in states else None
    if max_steps_per_run is not None:
        events = _EXECUTION_EVENTS + max_steps_per_run * _CYCLE_STEP_EVENTS
        if events > MAX_HISTORY_EVENTS:
            most = (MAX_HISTORY_EVENTS - _EXECUTION_EVENTS) // _CYCLE_STEP_EVENTS
            yield Problem(
                file,
                "max_steps_per_run",
                "history-events",
                f"max_steps_per_run {max_steps_per_run:,} lets cycles write at least "
                f"{events:,} events into the run's history ({_CYCLE_STEP_EVENTS} per step), "
                f"over Step Functions' {MAX_HISTORY_EVENTS:,}-event quota for a Standard "
                "execution: a looping run would fail on the quota, not with "
                f"Relayflow.MaxStepsExceeded. Lower max_steps_per_run to at most {most:,}",
            )


def _all_states(scope: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every state of ``scope`` with its name, inside Parallel branches and Map processors."""
    states = scope.get("States")
    if not isinstance(states, Mapping):
        return
    for name, state in states.items():
        if not isinstance(state, Mapping):
            continue
        yield str(name), state
        for branch in state.get("Branches") or ():
            if isinstance(branch, Mapping):
                yield from _all_states(branch)
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if isinstance(processor, Mapping):
            yield from _all_states(processor)


def _inline_map(state: Mapping[str, Any]) -> bool:
    """Whether ``state`` is an inline Map (a Distributed Map's items run as child executions,
    each with a history of its own)."""
    if state.get("Type") != "Map":
        return False
    processor = state.get("ItemProcessor") or state.get("Iterator") or {}
    config = processor.get("ProcessorConfig") if isinstance(processor, Mapping) else None
    return (config.get("Mode", "INLINE") if isinstance(config, Mapping) else "INLINE") == "INLINE"


def _fewest_events(scope: Mapping[str, Any]) -> int:
    """The fewest history events a pass through ``scope`` writes: its cheapest path from
    ``StartAt`` to an end, every state succeeding first time."""
    states = scope.get("States")
    if not isinstance(states, Mapping):
        return 0
    best: dict[str, int] = {}

    def cost(name: str, visiting: frozenset[str]) -> int | None:
        if name in best:
            return best[name]
        state = states.get(name)
        if not isinstance(state, Mapping) or name in visiting:
            return None
        own = _state_cost(state)
        if state.get("Type") in ("Succeed", "Fail") or state.get("End") is True:
            best[name] = own
            return own
        nexts = [state.get("Next"), state.get("Default")]
        nexts += [
            rule.get("Next") for rule in state.get("Choices") or () if isinstance(rule, Mapping)
        ]
        onward = [cost(n, visiting | {name}) for n in nexts if isinstance(n, str)]
        reachable = [c for c in onward if c is not None]
        if not reachable:
            return None
        best[name] = own + min(reachable)
        return best[name]

    start = scope.get("StartAt")
    found = cost(start, frozenset()) if isinstance(start, str) else None
    return found or 0


def _state_cost(state: Mapping[str, Any]) -> int:
    kind = state.get("Type")
    if kind == "Task":
        return _TASK_EVENTS
    if kind == "Parallel":
        branches = [b for b in state.get("Branches") or () if isinstance(b, Mapping)]
        return _SCOPE_EVENTS + sum(_fewest_events(b) for b in branches)
    if kind == "Map":
        return _SCOPE_EVENTS  # no item at all is the fewest
    return _STATE_EVENTS
