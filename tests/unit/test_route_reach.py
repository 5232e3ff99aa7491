"""The step graph's one-pass reachability (:meth:`StepGraph.route_reach`) agrees with walking
the routes from each step, on cycles, self-loops, error routes and random graphs; and the
compiler's driver reads only the states a step added."""

from __future__ import annotations

import random
from typing import Any

from relayflow.compiler.driver import added_states
from relayflow.compiler.states import Pass, ScopeMachine
from relayflow.definition.graph import StepGraph


def walked_before(graph: StepGraph, before: str, step: str) -> bool:
    """The definition of "runs before": some route, one or more, leads from ``before``."""
    return any(step in graph.reachable(edge.target) for edge in graph.routes(before))


def random_steps(rng: random.Random, n: int) -> dict[str, Any]:
    steps: dict[str, Any] = {}
    for i in range(n):
        step: dict[str, Any] = {"type": "condition", "expression": "true"}
        for name in ("on_true", "on_false"):
            if rng.random() < 0.7:
                step[name] = f"s{rng.randrange(n)}"
        if rng.random() < 0.2:
            step["on_failure"] = f"s{rng.randrange(n)}"
        steps[f"s{i}"] = step
    return steps


def test_route_reach_agrees_with_walking_the_routes_on_random_graphs() -> None:
    rng = random.Random(42)
    for _ in range(60):
        # Given a random graph of conditions with loops, self-loops and error routes
        graph = StepGraph(random_steps(rng, rng.randrange(1, 14)), "s0", "s1")
        # When the one-pass index is built
        reach = graph.route_reach()
        # Then it answers every pair as the walk from each step does
        for before in graph.steps:
            for step in graph.steps:
                assert reach.runs_before(before, step) == walked_before(graph, before, step)


def test_a_step_runs_before_itself_only_on_a_cycle() -> None:
    steps = {
        "a": {"type": "transform", "on_success": "b"},
        "b": {"type": "condition", "on_true": "a", "on_false": "c"},
        "c": {"type": "transform", "on_success": "d"},
        "d": {"type": "condition", "on_true": "d", "on_false": "e"},
        "e": {"type": "transform"},
    }
    reach = StepGraph(steps, "a").route_reach()
    assert [k for k in steps if reach.runs_before(k, k)] == ["a", "b", "d"]
    assert reach.runs_before("a", "e") and not reach.runs_before("e", "a")
    assert reach.runs_before("b", "a") and not reach.runs_before("c", "b")


def test_cycles_of_a_scope_come_in_scope_order() -> None:
    steps = {
        "a": {"type": "condition", "on_true": "a", "on_false": "b"},
        "b": {"type": "transform", "on_success": "c"},
        "c": {"type": "condition", "on_true": "b", "on_false": "d"},
        "d": {"type": "transform"},
    }
    graph = StepGraph(steps, "a")
    scopes, _ = graph.scopes()
    assert graph.cycles(scopes[0]) == [["a"], ["b", "c"]]


def test_the_driver_reads_only_the_states_added_since_it_last_looked() -> None:
    # Given a machine whose first two states belong to a step already
    machine = ScopeMachine("x")
    owners: dict[str, str] = {}
    for name in ("x", "y"):
        machine.add(name, Pass())
    owners.update(dict.fromkeys(added_states(machine, owners), "first"))
    # When the next step adds two more
    machine.add("z", Pass())
    machine.add("w", Pass())
    # Then those two, in their order, are the ones added
    assert added_states(machine, owners) == ["z", "w"]
    assert owners == {"x": "first", "y": "first"}
