"""Three compiler bugs the generated corpus (tests/deploy/test_asl_validators.py) found after
issue 12: for each, the smallest definition that showed it and its fixed compiled form.

9. A workflow-wide error handler that no compiled state can route to was still emitted: an
   unreachable state, which Step Functions refuses.
10. A sub_workflow as the item step of a ``for_each`` with ``on_item_failure: continue``:
    the item's Catch skipped the renaming of the child's failure (unreachable states).
11. A cycle whose header's error route leads back into a cycle: past ``max_steps_per_run``
    the step-limit failure took that route, re-entered the cycle and failed again, forever.
"""

from __future__ import annotations

from typing import Any

from workflow_shapes import LOOPING_ROUTE

from relayflow.compiler import compile_workflow
from relayflow.compiler.check import check_machine
from relayflow.validation import validate_data


def compile_data(definition: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The compiled machine and the step runners of a definition validation accepts."""
    workflow, problems = validate_data(definition)
    assert not problems, problems
    assert workflow is not None
    compiled = compile_workflow(workflow)
    return compiled.asl, dict(compiled.step_runners)


# --------------------------------------------------------------------------- 9. handler


def handled_by_h(workflow_id: str, steps: dict[str, Any]) -> dict[str, Any]:
    """A workflow of ``steps`` that starts at ``a`` and whose workflow-wide error route is ``h``."""
    return {"id": workflow_id, "start": "a", "errors": {"on_failure": "h"}, "steps": steps}


def test_a_workflow_handler_no_state_can_route_to_is_not_emitted():
    # Given a workflow-wide error route whose only main-flow step is a native Pass (no Catch)
    definition = handled_by_h("handler-unrouted", {"a": {"type": "noop"}, "h": {"type": "noop"}})

    # When compiled
    asl, runners = compile_data(definition)

    # Then the handler, which nothing can enter, is left out (and needs no runner)
    assert asl["StartAt"] == "a"
    assert asl["States"] == {
        "a": {
            "Type": "Pass",
            "End": True,
            "Result": {"output": None, "status": "succeeded"},
            "ResultPath": "$.steps.a",
        }
    }
    assert runners == {"a": "native"}
    # and the machine passes the post-compile check
    assert check_machine(asl) == []


def test_the_steps_only_an_unrouted_handler_leads_to_are_left_out_too():
    # Given a handler that goes on to a second step, and main-flow steps none of which catch
    definition = handled_by_h(
        "handler-chain-unrouted",
        {
            "a": {"type": "transform", "mapping": {"x": "{{ trigger.x }}"}, "on_success": "b"},
            "b": {"type": "delay", "seconds": 1},
            "h": {"type": "noop", "on_success": "h2"},
            "h2": {"type": "noop"},
        },
    )

    # When compiled
    asl, runners = compile_data(definition)

    # Then neither the handler nor its successor is emitted (only a's and b's states remain)
    assert {name.split(".")[0] for name in asl["States"]} == {"a", "b"}
    assert sorted(runners) == ["a", "b"]
    assert check_machine(asl) == []


def test_a_handler_a_task_can_catch_into_is_kept_and_wired():
    # Given the same handler and one main-flow step that runs in its Lambda
    definition = handled_by_h(
        "handler-routed",
        {
            "a": {"type": "noop", "on_success": "b"},
            "b": {"type": "code", "code": "return 1"},
            "h": {"type": "noop"},
        },
    )

    # When compiled
    asl, _ = compile_data(definition)

    # Then b's Catch takes the workflow-wide route into h
    assert asl["States"]["b"]["Catch"] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "h"}
    ]
    assert "h" in asl["States"]
    assert check_machine(asl) == []


# --------------------------------------------------------------------------- 10. item + child


def continuing_for_each(workflow_id: str, key: str, item: dict[str, Any]) -> dict[str, Any]:
    """A workflow whose for_each ``each`` runs the step ``key`` (``item``) on every trigger
    item and goes on past the items that fail."""
    return {
        "id": workflow_id,
        "start": "each",
        "steps": {
            "each": {
                "type": "for_each",
                "items": "{{ trigger.items }}",
                "step": key,
                "on_item_failure": "continue",
            },
            key: item,
        },
    }


def test_a_continuing_for_each_renames_its_sub_workflow_items_failure_first():
    # Given a for_each that goes on past failed items, each item a sub_workflow
    item = {"type": "sub_workflow", "workflow_id": "billing"}

    # When compiled
    asl, _ = compile_data(continuing_for_each("each-child", "call", item))
    items = asl["States"]["each"]["ItemProcessor"]["States"]

    # Then the item's Catch goes to the child-failure check, which renames the failure
    assert items["call"]["Catch"] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "call.child_failed"}
    ]
    assert items["call.child_raise"]["Parameters"]["Error"] == "Relayflow.SubWorkflowFailed"
    # and every way out of the check records the failed item
    assert items["call.child_raise"]["Next"] == "call.item_failed"
    assert items["call.child_failed"]["Default"] == "call.item_failed"
    assert items["call.too_deep"]["Next"] == "call.item_failed"
    assert items["call.item_failed"] == {
        "Type": "Pass",
        "End": True,
        "Parameters": {"status": "failed", "error.$": "$.error"},
    }
    assert check_machine(asl) == []


def test_a_continuing_for_each_records_an_item_whose_linear_retries_ran_out():
    # Given a continuing for_each whose item step retries linearly
    item = {"type": "code", "code": "return 1", "retry": {"max_attempts": 3, "backoff": "linear"}}

    # When compiled
    asl, _ = compile_data(continuing_for_each("each-linear", "work", item))
    items = asl["States"]["each"]["ItemProcessor"]["States"]

    # Then running out of attempts records the failed item instead of failing the Map
    exhausted = items["work.retry"]["Choices"][1]
    assert exhausted["Next"] == "work.item_failed"
    assert "work.failed" not in items
    assert check_machine(asl) == []


# --------------------------------------------------------------------------- 11. step limit


def test_the_step_limit_fails_the_run_when_the_error_route_re_enters_the_cycle():
    # Given a cycle a → b → a whose header's error route (b) is in the cycle itself
    asl, _ = compile_data(LOOPING_ROUTE)

    # Then past the limit the run fails instead of taking that route back into the loop
    states = asl["States"]
    assert states["a.guard"]["Choices"][0]["Next"] == "a.exceeded"
    assert states["a.exceeded"] == {
        "Type": "Fail",
        "Error": "Relayflow.MaxStepsExceeded",
        "Cause": "the run exceeded max_steps_per_run (3) in the cycle through 'a'",
    }
    # while an ordinary failure of a still takes its route
    assert states["a"]["Catch"][-1]["Next"] == "b"
    assert check_machine(asl) == []


def test_the_step_limit_takes_the_workflow_route_when_the_own_route_loops():
    # Given the same cycle, and a workflow-wide handler that leads out of every cycle
    definition = {
        **LOOPING_ROUTE,
        "errors": {"on_failure": "report"},
        "steps": {**LOOPING_ROUTE["steps"], "report": {"type": "noop"}},
    }

    # When compiled
    asl, _ = compile_data(definition)

    # Then the step-limit failure goes to the handler (b's native Choice cannot catch, so
    # the handler is reached through a.exceeded alone)
    assert asl["States"]["a.exceeded"] == {
        "Type": "Pass",
        "Next": "report",
        "Result": {
            "Error": "Relayflow.MaxStepsExceeded",
            "Cause": "the run exceeded max_steps_per_run (3) in the cycle through 'a'",
        },
        "ResultPath": "$.error",
    }
    assert check_machine(asl) == []


def test_the_step_limit_fails_when_the_route_reaches_another_cycle():
    # Given a header whose error route leaves its cycle but enters a second one: past the
    # limit every route closing a cycle fails again, so that route cannot end the run either
    definition = {
        "id": "loop-into-loop",
        "start": "a",
        "max_steps_per_run": 5,
        "steps": {
            "a": {"type": "code", "code": "return 1", "on_success": "b", "on_failure": "c"},
            "b": {"type": "condition", "expression": "trigger.flag", "on_true": "a"},
            "c": {"type": "noop", "on_success": "d"},
            "d": {"type": "condition", "expression": "trigger.flag", "on_true": "c"},
        },
    }

    # When compiled
    asl, _ = compile_data(definition)

    # Then both cycles' step-limit states fail the run
    assert asl["States"]["a.exceeded"]["Type"] == "Fail"
    assert asl["States"]["c.exceeded"]["Type"] == "Fail"
    assert check_machine(asl) == []


def test_the_step_limit_takes_a_route_that_leaves_every_cycle():
    # Given the golden cycle's shape: the error route ends the run outside the cycle
    definition = {
        **LOOPING_ROUTE,
        "steps": {
            **LOOPING_ROUTE["steps"],
            "a": {**LOOPING_ROUTE["steps"]["a"], "on_failure": "report"},
            "report": {"type": "noop"},
        },
    }

    # When compiled
    asl, _ = compile_data(definition)

    # Then the step-limit failure takes that route with the error set
    assert asl["States"]["a.exceeded"]["Type"] == "Pass"
    assert asl["States"]["a.exceeded"]["Next"] == "report"
    assert check_machine(asl) == []
