"""A for_each whose items are not a list fails with ``Relayflow.NotAList``, which its
``on_failure`` catches (issue 27, item 7); a list, empty or not, goes on to the Map."""

from __future__ import annotations

from typing import Any

import pytest

from relayflow.local import LocalRuntime
from relayflow.runner import RunResult, run_workflow
from relayflow.validation import validate_data

pytestmark = pytest.mark.integration
BARE_RUNTIME = True

DEFINITION: dict[str, Any] = {
    "id": "not-a-list",
    "start": "each",
    "engine": "standard",
    "steps": {
        "each": {
            "type": "for_each",
            "items": "{{ trigger.items }}",
            "step": "double",
            "on_failure": "caught",
        },
        "double": {"type": "transform", "mapping": {"v": "{{ item }}"}},
        "caught": {"type": "transform", "mapping": {"error": "{{ error.Error }}"}},
    },
}


def run(runtime: LocalRuntime, trigger: Any, definition: dict[str, Any] = DEFINITION) -> RunResult:
    workflow, problems = validate_data(definition)
    assert workflow is not None, problems
    return run_workflow(workflow, trigger, runtime=runtime)


def outputs(result: RunResult) -> dict[str, Any]:
    return {step.key: step.output for step in result.steps}


@pytest.mark.parametrize(
    "trigger",
    [
        {"items": {"a": 1}},
        {"items": "abc"},
        {"items": 3},
        {"items": True},
        {"items": None},
        {"other": []},
    ],
    ids=["object", "string", "number", "boolean", "null", "absent"],
)
def test_items_that_are_not_a_list_take_the_failure_route(runtime, trigger):
    # Given a for_each whose items are not a list / When it runs
    result = run(runtime, trigger)
    # Then its on_failure caught Relayflow.NotAList and the run succeeded through it
    assert result.status == "succeeded", (result.error, result.cause)
    assert outputs(result)["caught"] == {"error": "Relayflow.NotAList"}
    assert "double" not in outputs(result)
    # And the timeline shows the for_each ended with the error its route caught
    each = next(step for step in result.steps if step.key == "each")
    assert (each.status, each.error) == ("caught", "Relayflow.NotAList")


@pytest.mark.parametrize("mode", ["inline", "distributed"])
def test_too_many_items_end_the_step_in_the_timeline_too(runtime, mode):
    definition = {
        **DEFINITION,
        "steps": {
            **DEFINITION["steps"],
            "each": {**DEFINITION["steps"]["each"], "max_items": 2, "mode": mode},
        },
    }
    result = run(runtime, {"items": [1, 2, 3]}, definition)
    assert result.status == "succeeded", (result.error, result.cause)
    assert outputs(result)["caught"] == {"error": "Relayflow.TooManyItems"}
    each = next(step for step in result.steps if step.key == "each")
    assert (each.status, each.error) == ("caught", "Relayflow.TooManyItems")
    assert "at most 2 items" in (each.cause or "")


@pytest.mark.parametrize(
    ("items", "expected"),
    [([], []), ([2], [{"output": {"v": 2}, "status": "succeeded"}])],
    ids=["empty", "one"],
)
def test_a_list_goes_on_to_the_map(runtime, items, expected):
    result = run(runtime, {"items": items})
    assert result.status == "succeeded", (result.error, result.cause)
    assert outputs(result)["each"] == expected
    assert "caught" not in outputs(result)


def test_without_a_route_not_a_list_fails_the_run_with_its_name(runtime):
    # Given no on_failure / When the items are a string
    definition = {
        **DEFINITION,
        "steps": {
            "each": {"type": "for_each", "items": "{{ trigger.items }}", "step": "double"},
            "double": DEFINITION["steps"]["double"],
        },
    }
    result = run(runtime, {"items": "abc"}, definition)
    # Then the run fails with the named error (not States.Runtime), and so does the step
    assert (result.status, result.error) == ("failed", "Relayflow.NotAList")
    each = next(step for step in result.steps if step.key == "each")
    assert (each.status, each.error) == ("failed", "Relayflow.NotAList")
