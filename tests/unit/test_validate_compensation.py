"""Validation of saga compensation (``compensate:``): each misuse is refused with the path of
the field and a named rule, and the compensation record read back from a failed run's cause."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from relayflow.control.compensation import compensation_record, split_cause
from relayflow.definition.step_models import compensation_call
from relayflow.validation import validate_data

HOOK = "https://example.com/hook"

SAGA: dict[str, Any] = {
    "id": "saga",
    "start": "charge",
    "steps": {
        "charge": {
            "type": "webhook_out",
            "url": HOOK,
            "compensate": "refund",
            "on_success": "ship",
        },
        "ship": {
            "type": "tool",
            "tool": "aws.dynamodb.put_item",
            "args": {"table": "t", "item": {"id": "{{ trigger.id }}"}},
            "compensate": {
                "type": "webhook_out",
                "url": HOOK,
                "body": {"shipment": "{{ output.id }}", "order": "{{ trigger.id }}"},
            },
        },
        "refund": {
            "type": "webhook_out",
            "url": HOOK,
            "body": {"charge": "{{ steps.charge.output.body.id }}", "all": "{{ output }}"},
        },
    },
}


def saga(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(SAGA)
    for key, step in changes.items():
        if step is None:
            data["steps"].pop(key)
        else:
            data["steps"][key] = step
    return data


def problems_of(data: dict[str, Any]) -> set[tuple[str, str]]:
    workflow, problems = validate_data(data, "wf.yaml")
    assert workflow is None, "an invalid definition must not produce a model"
    return {(p.path, p.rule) for p in problems}


def test_a_saga_validates_and_its_compensation_step_is_not_unreachable():
    # Given steps compensated by a step key and by an inline call reading output
    workflow, problems = validate_data(saga())
    # Then it is valid, though no route leads to the compensation step
    assert problems == []
    assert workflow is not None
    refund = compensation_call(workflow.steps["charge"], workflow.steps)
    assert refund is workflow.steps["refund"]
    inline = compensation_call(workflow.steps["ship"], workflow.steps)
    assert inline.type == "webhook_out" and inline.body["shipment"] == "{{ output.id }}"
    assert compensation_call(workflow.steps["refund"], workflow.steps) is None


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # compensate on a step that does not act on the world
        (
            {"note": {"type": "transform", "mapping": {}, "compensate": "refund"}},
            ("steps.note.compensate", "compensate-not-acting"),
        ),
        (
            {"idle": {"type": "noop", "compensate": {"type": "webhook_out", "url": HOOK}}},
            ("steps.idle.compensate", "compensate-not-acting"),
        ),
        # an unknown compensation step
        (
            {"charge": {**SAGA["steps"]["charge"], "compensate": "ghost"}},
            ("steps.charge.compensate", "unknown-step"),
        ),
        # a compensation step that itself compensates
        (
            {
                "refund": {
                    **SAGA["steps"]["refund"],
                    "compensate": {"type": "webhook_out", "url": HOOK},
                }
            },
            ("steps.refund.compensate", "compensation-compensates"),
        ),
        # an inline compensation that compensates
        (
            {
                "ship": {
                    **SAGA["steps"]["ship"],
                    "compensate": {"type": "webhook_out", "url": HOOK, "compensate": "refund"},
                }
            },
            ("steps.ship.compensate.compensate", "compensation-compensates"),
        ),
        # a compensation that routes
        (
            {"refund": {**SAGA["steps"]["refund"], "on_success": "ship"}},
            ("steps.refund.on_success", "compensation-route"),
        ),
        # a compensation that is no call
        (
            {"refund": {"type": "noop"}},
            ("steps.charge.compensate", "compensation-step"),
        ),
        # an inline call with a field its step type does not have
        (
            {
                "ship": {
                    **SAGA["steps"]["ship"],
                    "compensate": {"type": "webhook_out", "url": HOOK, "tool": "aws.x"},
                }
            },
            ("steps.ship.compensate.tool", "compensation-step"),
        ),
        # a compensation reading another step's output, or a variable it does not have
        (
            {
                "ship": {
                    **SAGA["steps"]["ship"],
                    "compensate": {
                        "type": "webhook_out",
                        "url": HOOK,
                        "body": "{{ steps.charge }}",
                    },
                }
            },
            ("steps.ship.compensate.body", "unknown-step-reference"),
        ),
        (
            {
                "ship": {
                    **SAGA["steps"]["ship"],
                    "compensate": {"type": "webhook_out", "url": HOOK, "body": "{{ item }}"},
                }
            },
            ("steps.ship.compensate.body", "unknown-variable"),
        ),
    ],
)
def test_misused_compensation_is_refused_with_its_path_and_rule(changes, expected):
    assert expected in problems_of(saga(**changes))


def test_a_compensation_step_reached_by_a_route_is_refused():
    data = saga()
    data["steps"]["ship"]["on_success"] = "refund"
    assert ("steps.charge.compensate", "compensation-step") in problems_of(data)
    data = saga()
    data["steps"]["refund"]["on_failure"] = "ship"
    assert ("steps.refund.on_failure", "compensation-route") in problems_of(data)


def test_compensation_inside_a_parallel_branch_or_on_a_cycle_is_refused():
    # Given a compensated step in a parallel branch
    data = saga()
    data["start"] = "fork"
    data["steps"]["fork"] = {"type": "parallel", "branches": ["charge"]}
    assert ("steps.charge.compensate", "compensate-in-parallel") in problems_of(data)
    # or the item step of a for_each inside a branch
    data = saga()
    data["start"] = "fork"
    data["steps"]["fork"] = {"type": "parallel", "branches": ["each"]}
    data["steps"]["each"] = {"type": "for_each", "items": "{{ trigger.ids }}", "step": "charge"}
    data["steps"]["charge"].pop("on_success")
    data["steps"].pop("ship")
    assert ("steps.charge.compensate", "compensate-in-parallel") in problems_of(data)
    # And one on a cycle
    data = saga()
    data["steps"]["ship"]["on_success"] = "again"
    data["steps"]["again"] = {
        "type": "condition",
        "expression": "trigger.more == true",
        "on_true": "charge",
    }
    assert ("steps.charge.compensate", "compensate-in-cycle") in problems_of(data)


def test_a_for_each_item_step_may_compensate_and_read_its_index():
    data = {
        "id": "each",
        "start": "each",
        "steps": {
            "each": {"type": "for_each", "items": "{{ trigger.seats }}", "step": "hold"},
            "hold": {
                "type": "webhook_out",
                "url": HOOK,
                "compensate": {"type": "webhook_out", "url": HOOK, "body": "{{ index }}"},
            },
        },
    }
    workflow, problems = validate_data(data)
    assert problems == [] and workflow is not None


def test_the_item_step_of_a_distributed_for_each_may_not_compensate():
    # Given a compensated item step of a for_each whose items run as child executions
    each = {"type": "for_each", "items": "{{ trigger.seats }}", "step": "hold"}
    hold = {
        "type": "webhook_out",
        "url": HOOK,
        "compensate": {"type": "webhook_out", "url": HOOK, "body": "{{ index }}"},
    }
    data = {"id": "each", "start": "each", "steps": {"each": each, "hold": hold}}
    inline, _ = validate_data(copy.deepcopy(data))
    assert inline is not None
    data["steps"]["each"]["mode"] = "distributed"
    # Then validation refuses it with its path, and the message names the way out
    workflow, problems = validate_data(data)
    assert workflow is None
    (problem,) = [p for p in problems if p.rule == "compensate-distributed"]
    assert problem.path == "steps.hold.compensate"
    assert "mode: inline" in problem.message and "'each'" in problem.message


# --------------------------------------------------------------------------- the record


def test_the_record_lists_compensations_in_the_order_they_ran_with_their_errors():
    # Given the walk's done list (newest first): ship ok, charge failed, items of book
    failed = {"Error": "Relayflow.HttpError", "Cause": '{"errorMessage":"422","errorType":"X"}'}
    done = {
        "key": "book",
        "items": [
            {"index": 0},
            {"index": 1, "skipped": True},
            {"index": 2, "error": {"Error": "States.Timeout", "Cause": ""}},
        ],
        "prev": {"key": "charge", "error": failed, "prev": {"key": "ship", "prev": {}}},
    }
    # Then
    assert compensation_record(done) == {
        "status": "partially_compensated",
        "steps": ["ship", "charge", "book[0]", "book[2]"],
        "errors": [
            {
                "step": "charge",
                "error": "Relayflow.HttpError",
                "cause": '{"errorType":"X","errorMessage":"422"}',
            },
            {"step": "book[2]", "error": "States.Timeout", "cause": ""},
        ],
    }
    assert compensation_record({}) is None


def test_split_cause_gives_back_the_original_cause():
    report = {"cause": "boom", "compensation": {"key": "a", "prev": {}}}
    assert split_cause(json.dumps(report)) == (
        "boom",
        {"status": "compensated", "steps": ["a"], "errors": []},
    )
    # Causes without a report are left alone
    for cause in (None, "", "plain", '{"errorType": "X"}', "{not json"):
        assert split_cause(cause) == (cause, None)


def inline_tool(tool: str, args: Any) -> dict[str, Any]:
    step = copy.deepcopy(SAGA["steps"]["ship"])
    step["compensate"] = {"type": "tool", "tool": tool, "args": args}
    return step


@pytest.mark.parametrize(
    ("compensate", "expected"),
    [
        (
            inline_tool("aws.dynamodb.delete_item", {"table": "t", "key": {"id": "x"}}),
            ("steps.ship.compensate.tool", "unknown-tool"),
        ),
        (
            inline_tool("http.payments.void", {}),
            ("steps.ship.compensate.tool", "unknown-tool"),
        ),
        (
            inline_tool("aws.dynamodb.update_item", {"table": "t", "tabel": "t"}),
            ("steps.ship.compensate.args.tabel", "tool-args"),
        ),
        (
            inline_tool("aws.dynamodb.update_item", {"table": "t", "key": {"id": "x"}}),
            ("steps.ship.compensate.args", "tool-args"),  # needs update
        ),
    ],
)
def test_an_inline_tool_compensation_is_checked_like_a_tool_step(compensate, expected):
    # Given an inline compensation calling an unknown tool, an undeclared HTTP tool, or
    # with bad args, Then it is refused with the path and rule a tool step would get
    assert expected in problems_of(saga(ship=compensate))


def test_an_inline_compensation_to_an_undeclared_http_operation_is_refused():
    data = saga(ship=inline_tool("http.payments.void", {}))
    data["http_tools"] = {
        "payments": {
            "base_url": "https://pay.example.com",
            "operations": {"refund": {"method": "POST", "path": "/refunds"}},
        }
    }
    found = problems_of(data)
    assert ("steps.ship.compensate.tool", "unknown-tool") in found
    # And a declared operation passes
    data["steps"]["ship"]["compensate"]["tool"] = "http.payments.refund"
    workflow, problems = validate_data(data, "wf.yaml")
    assert problems == [] and workflow is not None


def test_the_saga_sample_in_the_reliability_doc_validates():
    import re
    from pathlib import Path

    import yaml

    doc = Path(__file__).parents[2] / "docs" / "reliability.md"
    section = doc.read_text().split("## Saga compensation", 1)[1]
    sample = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert sample is not None
    workflow, problems = validate_data(yaml.safe_load(sample.group(1)), "reliability.md")
    assert problems == [], problems
    assert workflow is not None
