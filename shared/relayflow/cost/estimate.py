"""A compiled state machine's cost per 1,000,000 runs, estimated from its states
(``relayflow compile --cost``).

Path-based: the estimate follows the machine's paths from ``StartAt`` to an end and reports
the cheapest and the dearest one.

- Every state entered is one transition; a Lambda Task (``arn:aws:states:::lambda:invoke``)
  is also one Lambda invocation.
- Branches: a ``Choice`` is one path per rule and its ``Default``. ``Catch`` routes are error
  paths and are not followed, and retries are not counted: the estimate is of runs whose steps
  succeed at their first attempt.
- Loops: a route back into a loop is taken at most once, then the run leaves the loop (on the
  dearest path a loop's body runs twice: once before the route back, once on the way out;
  on the cheapest path, once).
- A ``Parallel`` runs every branch (their sums); a ``Map`` runs its iteration ``items`` times
  (default :data:`DEFAULT_ITEMS`: the number of items is only known at run time).
- Express duration is a model, not a measurement: each Lambda invocation takes
  ``lambda_ms`` (default :data:`DEFAULT_LAMBDA_MS`), every other state ``state_ms``, waits their
  ``Seconds``; a Parallel's branches and a Map's iterations are summed (no concurrency), an
  upper bound. The Lambda duration bills ``lambda_ms`` per invocation too.
- Execution log: Express logs every history event of the path (level ``ALL``), each
  :data:`DEFAULT_LOG_EVENT_BYTES`: the execution's start and end, 5 per Task (entered,
  scheduled, started, succeeded, exited), 4 per Parallel and Map (entered, started, succeeded,
  exited) and 2 per Map iteration (started, succeeded), 1 for a ``Fail`` state and 2 for any
  other state. Standard logs errors only: none on a path whose steps succeed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relayflow.cost.bill import (
    ENGINES,
    PLATFORM,
    Bill,
    Engine,
    Platform,
    RunUsage,
    express_memory_mb,
    price_run,
)

DEFAULT_ITEMS = 10
DEFAULT_LAMBDA_MS = 100.0
DEFAULT_STATE_MS = 10.0
#: A log record's billed bytes (message + 26 bytes): about the mean of the examples' records in
#: ``make bench`` (a deployed Express execution's ARN is in every record).
DEFAULT_LOG_EVENT_BYTES = 350
_LAMBDA_RESOURCES = ("arn:aws:states:::lambda:invoke", "arn:aws:lambda:")


@dataclass(frozen=True)
class PathCost:
    """What one path through a machine enters."""

    transitions: int = 0
    lambda_invocations: int = 0
    wait_seconds: float = 0.0
    #: Map iterations and Parallel branches on the path (for the Express memory estimate).
    fan_out: int = 0
    #: History events the path's states produce (what Express logs at level ALL).
    events: int = 0

    def __add__(self, other: PathCost) -> PathCost:
        return PathCost(
            self.transitions + other.transitions,
            self.lambda_invocations + other.lambda_invocations,
            self.wait_seconds + other.wait_seconds,
            self.fan_out + other.fan_out,
            self.events + other.events,
        )

    def times(self, n: int) -> PathCost:
        return PathCost(
            self.transitions * n,
            self.lambda_invocations * n,
            self.wait_seconds * n,
            self.fan_out * n,
            self.events * n,
        )


@dataclass(frozen=True)
class Estimate:
    """The cheapest and dearest path, and each priced on both engines."""

    cheapest: PathCost
    dearest: PathCost
    bills: dict[tuple[str, Engine], Bill]
    items: int
    lambda_ms: float
    state_ms: float

    def per_million(self, path: str, engine: Engine) -> float:
        return self.bills[(path, engine)].per_million()


def machine_paths(
    asl: Mapping[str, Any], *, items: int = DEFAULT_ITEMS
) -> tuple[PathCost, PathCost]:
    """The cheapest and the dearest path through ``asl`` (see the module docstring), compared
    by transitions, then Lambda invocations, then waits."""
    return _Walker(asl, items).run()


def estimate(
    asl: Mapping[str, Any],
    *,
    items: int = DEFAULT_ITEMS,
    lambda_ms: float = DEFAULT_LAMBDA_MS,
    state_ms: float = DEFAULT_STATE_MS,
    platform: Platform = PLATFORM,
) -> Estimate:
    """Both paths of ``asl`` priced per run on both engines, all-in (start and recording
    included, see :func:`relayflow.cost.bill.price_run`)."""
    cheapest, dearest = machine_paths(asl, items=items)
    definition_bytes = len(json.dumps(asl, separators=(",", ":")).encode())
    bills: dict[tuple[str, Engine], Bill] = {}
    for name, cost in (("cheapest", cheapest), ("dearest", dearest)):
        usage = usage_of(cost, definition_bytes, lambda_ms=lambda_ms, state_ms=state_ms)
        for engine in ENGINES:
            bills[(name, engine)] = price_run(usage, engine, platform)
    return Estimate(cheapest, dearest, bills, items, lambda_ms, state_ms)


def usage_of(
    cost: PathCost, definition_bytes: int, *, lambda_ms: float, state_ms: float
) -> RunUsage:
    """The modelled usage of one path (durations per the module docstring)."""
    other_states = cost.transitions - cost.lambda_invocations
    duration_ms = (
        cost.lambda_invocations * lambda_ms + other_states * state_ms + cost.wait_seconds * 1000
    )
    return RunUsage(
        transitions=cost.transitions,
        lambda_invocations=cost.lambda_invocations,
        lambda_ms=cost.lambda_invocations * lambda_ms,
        duration_ms=duration_ms,
        express_memory_mb=express_memory_mb(definition_bytes, 0, cost.fan_out),
        # The execution's start and end are two more events.
        express_log_bytes=(cost.events + 2) * DEFAULT_LOG_EVENT_BYTES,
    )


def _key(cost: PathCost) -> tuple[int, int, float]:
    return (cost.transitions, cost.lambda_invocations, cost.wait_seconds)


class _Walker:
    """Cheapest and dearest paths of one ``States`` map (a machine, a branch or an
    iteration).

    Routes back into a loop are the back edges of a depth-first search from ``StartAt``.
    First the exits: each state's bounds with every back edge dropped (a state whose routes
    all loop back has no exit). Then the paths: a back edge may be taken once, continuing with
    the exit bounds of the state it leads to, so a loop's body runs at most once and the run
    then leaves the loop. Both passes are acyclic, so each state is computed once per pass.
    Paths that end in a ``Fail`` state are left out while any path succeeds."""

    def __init__(self, machine: Mapping[str, Any], items: int) -> None:
        self.states: Mapping[str, Any] = machine.get("States") or {}
        self.start = str(machine.get("StartAt", ""))
        self.items = items
        self.back_edges = back_edges(self.states, self.start)
        self.exits: dict[str, tuple[PathCost, PathCost] | None] = {}
        self.paths: dict[str, tuple[PathCost, PathCost] | None] = {}
        self.succeeding = True

    def run(self) -> tuple[PathCost, PathCost]:
        found = self._path(self.start)
        if found is None:  # every path fails: price the failing ones
            self.exits.clear()
            self.paths.clear()
            self.succeeding = False
            found = self._path(self.start)
        return found or (PathCost(), PathCost())

    def _exit(self, name: str) -> tuple[PathCost, PathCost] | None:
        if name not in self.exits:
            self.exits[name] = self._bounds(name, looping=False)
        return self.exits[name]

    def _path(self, name: str) -> tuple[PathCost, PathCost] | None:
        if name not in self.paths:
            self.paths[name] = self._bounds(name, looping=True)
        return self.paths[name]

    def _bounds(self, name: str, *, looping: bool) -> tuple[PathCost, PathCost] | None:
        state = self.states.get(name)
        if state is None or (self.succeeding and state.get("Type") == "Fail"):
            return None
        own_low, own_high = self._own(state)
        routes = _routes(state)
        if not routes:
            return own_low, own_high
        next_bounds = self._path if looping else self._exit
        options = [next_bounds(n) for n in routes if (name, n) not in self.back_edges]
        if looping:
            options += [self._exit(n) for n in routes if (name, n) in self.back_edges]
        found = [option for option in options if option is not None]
        if not found:
            return None
        return (
            own_low + min((low for low, _ in found), key=_key),
            own_high + max((high for _, high in found), key=_key),
        )

    def _own(self, state: Mapping[str, Any]) -> tuple[PathCost, PathCost]:
        """What entering ``state`` costs, on the cheapest and on the dearest path."""
        kind = state.get("Type")
        if kind == "Task":
            resource = str(state.get("Resource", ""))
            cost = PathCost(1, 1 if resource.startswith(_LAMBDA_RESOURCES) else 0, events=5)
            return cost, cost
        if kind == "Wait":
            seconds = state.get("Seconds")
            cost = PathCost(
                1, 0, float(seconds) if isinstance(seconds, int | float) else 0.0, events=2
            )
            return cost, cost
        if kind == "Parallel":
            low = high = PathCost(1, events=4)
            for branch in state.get("Branches") or []:
                branch_low, branch_high = _Walker(branch, self.items).run()
                low, high = low + _one_more(branch_low), high + _one_more(branch_high)
            return low, high
        if kind == "Map":
            inner = state.get("ItemProcessor") or state.get("Iterator") or {}
            item_low, item_high = _Walker(inner, self.items).run()
            # Each iteration is started and succeeded: 2 events besides its states'.
            iteration = PathCost(events=2)
            return (
                PathCost(1, events=4) + (_one_more(item_low) + iteration).times(self.items),
                PathCost(1, events=4) + (_one_more(item_high) + iteration).times(self.items),
            )
        cost = PathCost(1, events=1 if kind == "Fail" else 2)
        return cost, cost


def _one_more(cost: PathCost) -> PathCost:
    """``cost`` as one Map iteration or Parallel branch (counted for the Express memory)."""
    return PathCost(
        cost.transitions, cost.lambda_invocations, cost.wait_seconds, cost.fan_out + 1, cost.events
    )


def back_edges(states: Mapping[str, Any], start: str) -> set[tuple[str, str]]:
    """The routes that close a loop (``Next``, ``Choices`` and ``Default``; not ``Catch``):
    from a state to one still open in a depth-first search from ``start`` (iterative, so a
    long machine cannot exhaust the stack)."""
    back: set[tuple[str, str]] = set()
    open_states: set[str] = set()
    done: set[str] = set()
    stack: list[tuple[str, list[str]]] = []
    if start in states:
        stack.append((start, _routes(states[start])))
        open_states.add(start)
    while stack:
        name, pending = stack[-1]
        if not pending:
            stack.pop()
            open_states.discard(name)
            done.add(name)
            continue
        target = pending.pop(0)
        if target in open_states:
            back.add((name, target))
        elif target not in done and target in states:
            open_states.add(target)
            stack.append((target, _routes(states[target])))
    return back


def _routes(state: Mapping[str, Any]) -> list[str]:
    """The states a successful pass through ``state`` can go to next."""
    if state.get("Type") == "Choice":
        targets = [str(rule["Next"]) for rule in state.get("Choices") or [] if "Next" in rule]
        if state.get("Default"):
            targets.append(str(state["Default"]))
        return list(dict.fromkeys(targets))
    return [str(state["Next"])] if state.get("Next") else []
