"""Validation rules ``read-before-run`` (a read of ``steps.<b>`` in a step that ``b`` never
runs before could only ever be empty; reads some route makes possible, a loop back or an
error route, pass) and ``unknown-function`` (a call CEL does not define), each refused with
the path of the field and the rule."""

from __future__ import annotations

from typing import Any

import pytest
from graph_work import RoutesAsked

from relayflow.validation import validate_data


def problems_of(steps: dict[str, Any], start: str = "a") -> set[tuple[str, str]]:
    _, problems = validate_data({"id": "reads", "start": start, "steps": steps}, "wf.yaml")
    return {(p.path, p.rule) for p in problems}


def echo(value: str, then: str | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"type": "transform", "mapping": {"v": value}}
    if then is not None:
        step["on_success"] = then
    return step


def test_a_read_of_a_step_that_always_runs_later_is_refused():
    # Given a reads steps.b although a always runs before b
    found = problems_of({"a": echo("{{ steps.b.output.v }}", "b"), "b": echo("1")})
    # Then the read is refused with its path and rule
    assert found == {("steps.a.mapping", "read-before-run")}


def test_a_step_reading_its_own_output_off_any_loop_is_refused():
    found = problems_of({"a": echo("1", "b"), "b": echo("{{ steps.b.output }}")})
    assert found == {("steps.b.mapping", "read-before-run")}


def test_a_condition_reading_a_later_step_is_refused():
    steps = {
        "a": {"type": "condition", "expression": "steps.c.output.v > 1", "on_true": "b"},
        "b": echo("1", "c"),
        "c": echo("2"),
    }
    assert ("steps.a.expression", "read-before-run") in problems_of(steps)


def test_a_read_after_the_step_or_in_a_loop_back_to_it_passes():
    steps = {
        "a": echo("{{ steps.c.output }}", "b"),  # on a later pass c has run
        "b": echo("{{ steps.a.output }}", "c"),
        "c": {
            "type": "condition",
            "expression": "steps.b.output.v == 1",
            "on_true": "a",
            "on_false": "d",
        },
        "d": echo("{{ steps.c.output }}"),
    }
    assert problems_of(steps) == set()


def test_an_error_route_may_read_the_step_that_failed():
    steps = {
        "a": {
            "type": "webhook_out",
            "url": "https://example.com/x",
            "on_failure": "report",
            "on_success": "done",
        },
        "report": echo("{{ steps.a.output }}"),
        "done": echo("ok"),
    }
    assert problems_of(steps) == set()


def test_a_read_inside_a_for_each_item_of_a_step_after_the_for_each_is_refused():
    steps = {
        "a": {"type": "for_each", "items": "{{ trigger.xs }}", "step": "item", "on_success": "z"},
        "item": echo("{{ steps.z.output }}"),
        "z": echo("done"),
    }
    assert problems_of(steps) == {("steps.item.mapping", "read-before-run")}
    # And reading a step that runs before the for_each passes
    before = {
        "z": echo("first", "a"),
        "a": {"type": "for_each", "items": "{{ trigger.xs }}", "step": "item"},
        "item": echo("{{ steps.z.output }}"),
    }
    assert problems_of(before, start="z") == set()


def test_an_unknown_cel_function_is_refused_naming_it():
    steps = {
        "a": {"type": "condition", "expression": "sum(trigger.xs) > 3", "on_true": "b"},
        "b": echo("{{ trigger.xs.total() }}"),
    }
    _, problems = validate_data({"id": "fn", "start": "a", "steps": steps}, "wf.yaml")
    found = {(p.path, p.rule): p.message for p in problems}
    assert set(found) == {
        ("steps.a.expression", "unknown-function"),
        ("steps.b.mapping", "unknown-function"),
    }
    assert "sum()" in found[("steps.a.expression", "unknown-function")]
    assert "total()" in found[("steps.b.mapping", "unknown-function")]


def test_the_functions_and_macros_of_cel_pass():
    expression = (
        'size(trigger.xs) > 0 && trigger.s.startsWith("a") && trigger.xs.exists(x, x > 1) '
        '&& has(trigger.c) && int("1") == 1 && trigger.xs.map(x, x * 2).size() > 0 '
        '&& timestamp("2024-05-01T10:00:00Z").getHours() == 10 && trigger.s.matches("^a")'
    )
    steps = {"a": {"type": "condition", "expression": expression, "on_true": "b"}, "b": echo("1")}
    assert problems_of(steps) == set()


def _chain(n: int) -> dict[str, Any]:
    """``n`` transform steps, each reading the one before (the chains of the scaling bench)."""
    steps = {f"s{i}": echo(f"{{{{ steps.s{i - 1}.output.v }}}}", f"s{i + 1}") for i in range(n)}
    steps["s0"] = echo("{{ trigger.x }}", "s1")
    del steps[f"s{n - 1}"]["on_success"]
    return steps


def test_validation_walks_a_chain_in_routes_linear_in_its_length(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given chains of 500 and 2,000 steps, each step reading the one before, and a count of
    # the routes the validation asks the step graph for (the work of every graph rule)
    routes = RoutesAsked().install(monkeypatch)
    asked: dict[int, int] = {}
    for n in (500, 2000):
        routes.reset()
        # When each chain is validated
        assert problems_of(_chain(n), start="s0") == set()
        asked[n] = routes.calls
    # Then four times the steps asks for about four times the routes (one walk per reading
    # step asked for 16 times as many: the graph once per step)
    assert asked[2000] <= 4.5 * asked[500], asked
