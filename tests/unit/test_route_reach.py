"""The step graph's one-pass reachability (:meth:`StepGraph.route_reach`) agrees with walking
the routes from each step, on cycles, self-loops, error routes and random graphs; and the
compiler's driver reads only the states a step added."""

from __future__ import annotations

import random
from typing import Any

import pytest
from graph_work import RoutesAsked

from relayflow.compiler import compile_workflow
from relayflow.compiler.driver import added_states
from relayflow.compiler.states import Pass, ScopeMachine
from relayflow.definition.graph import StepGraph
from relayflow.validation import validate_data


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
        # And a step leads to a cycle when the walk from it meets a step that runs before itself
        on_cycle = {k for k in graph.steps if walked_before(graph, k, k)}
        for step in graph.steps:
            assert reach.leads_to_cycle(step) == bool(graph.reachable(step) & on_cycle)


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


def poll_loops(n: int) -> dict[str, Any]:
    """``n`` conditions in a row, each looping on itself, with an error route to the next."""
    steps: dict[str, Any] = {}
    for i in range(n):
        then = f"s{i + 1}" if i + 1 < n else "done"
        steps[f"s{i}"] = {
            "type": "condition",
            "expression": "trigger.x > 1",
            "on_true": f"s{i}",
            "on_false": then,
            "on_failure": then,
        }
    steps["done"] = {"type": "transform", "mapping": {"ok": True}}
    return {"id": "loops", "start": "s0", "steps": steps}


def test_compiling_a_chain_of_loops_asks_for_routes_linear_in_its_length(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given chains of 100 and 400 loops whose error routes lead on (each loop's step limit
    # asks whether its error route can re-enter a cycle), and a count of the routes asked for
    asked: dict[int, int] = {}
    for n in (100, 400):
        workflow, problems = validate_data(poll_loops(n))
        assert workflow is not None, problems
        routes = RoutesAsked().install(monkeypatch)
        # When each is compiled
        compile_workflow(workflow)
        asked[n] = routes.calls
        monkeypatch.undo()
    # Then four times the loops asks for about four times the routes (a walk per loop asked
    # for about 16 times as many)
    assert asked[400] <= 4.5 * asked[100], asked


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
