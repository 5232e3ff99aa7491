"""Step Functions quotas a valid definition reaches are the definition's problem
(relayflow.compiler.quotas): the definition size (``compiled-size``) and the Standard
execution history (``history-events``), refused at validation, by ``relayflow compile`` and by
the control plane with the path, the rule, the measured figure and what to do."""

from __future__ import annotations

import json
from typing import Any

import pytest

from relayflow.cli.main import main
from relayflow.cli.output import EXIT_INVALID
from relayflow.compiler import CompileOptions, compile_workflow
from relayflow.compiler.check import definition_size
from relayflow.compiler.quotas import (
    MAX_HISTORY_EVENTS,
    history_problems,
    size_problem,
)
from relayflow.compiler.size import (
    MAX_STATE_MACHINE_BYTES,
    SIZING_OPTIONS,
    definition_bytes,
)
from relayflow.control.compiled import check_compiled, check_quotas
from relayflow.control.errors import CompilerBug, InvalidDefinition
from relayflow.definition.input_schema import MAX_INPUT_SCHEMA_BYTES
from relayflow.definition.models import Workflow
from relayflow.definition.problems import DefinitionError
from relayflow.runner import compile_checked
from relayflow.validation import validate_data

TOOL = {
    "type": "tool",
    "tool": "aws.sqs.send_message",
    "args": {"queue_url": "q", "body": "{{ run.id }}"},
}
#: A tool item step's Task writes 5 events, its iteration 2 more; the run, the list and
#: item-count guards (a Choice, a Pass and a Choice) and the Map itself 12.
TOOL_EVENTS_PER_ITEM = 7
FIXED_EVENTS = 12
MOST_TOOL_ITEMS = (MAX_HISTORY_EVENTS - FIXED_EVENTS) // TOOL_EVENTS_PER_ITEM


#: A child's input_schema near the 16 KB limit, and a parent whose 70 sub_workflow steps
#: check their input against it.
SCHEMA = {
    "type": "object",
    "properties": {f"field_{i:04d}": {"type": "string"} for i in range(520)},
}
SCHEMA_PARENT: dict[str, Any] = {
    "id": "parent",
    "start": "call_0",
    "steps": {
        f"call_{i}": {
            "type": "sub_workflow",
            "workflow_id": "child",
            **({"on_success": f"call_{i + 1}"} if i < 69 else {}),
        }
        for i in range(70)
    },
}


def chain(count: int, step: dict[str, Any], **workflow: Any) -> dict[str, Any]:
    steps = {
        f"s{i}": {**step, **({"on_success": f"s{i + 1}"} if i + 1 < count else {})}
        for i in range(count)
    }
    return {"id": "chain", "start": "s0", **workflow, "steps": steps}


def for_each(item: dict[str, Any], max_items: int, **each: Any) -> dict[str, Any]:
    return {
        "id": "fan-out",
        "start": "each",
        "steps": {
            "each": {
                "type": "for_each",
                "items": "{{ trigger.items }}",
                "step": "item",
                "max_items": max_items,
                **each,
            },
            "item": item,
        },
    }


def padded_machine(size: int) -> dict[str, Any]:
    """A one-state machine of exactly ``size`` bytes as sent to Step Functions."""
    asl: dict[str, Any] = {
        "StartAt": "a",
        "States": {"a": {"Type": "Pass", "Result": "", "End": True}},
    }
    asl["States"]["a"]["Result"] = "x" * (size - definition_bytes(asl))
    assert definition_bytes(asl) == size
    return asl


# --------------------------------------------------------------------------- compiled-size


def test_a_chain_of_1300_tool_steps_is_refused_with_the_rule_the_size_and_what_to_do():
    # Given 1,300 tool steps with the default retries (about 1,000 bytes of ASL each)
    workflow, problems = validate_data(chain(1300, TOOL))
    # Then validation refuses it at `steps` with the rule, the measured size and the quota
    assert workflow is None
    (problem,) = problems
    assert (problem.path, problem.rule) == ("steps", "compiled-size")
    measured = int(problem.message.split(" would be ")[1].split(" bytes")[0].replace(",", ""))
    assert measured > 1.2 * MAX_STATE_MACHINE_BYTES
    assert f"at most {MAX_STATE_MACHINE_BYTES:,}" in problem.message
    # and what to do: the largest steps, retry: none, a sub_workflow
    assert "Largest steps: s" in problem.message
    assert "retry: none" in problem.message and "sub_workflow" in problem.message


def test_a_chain_just_under_the_quota_is_accepted():
    # Given 1,040 tool steps: as compiled with the longest deployed names, within 0.6 % of
    # the quota
    workflow, problems = validate_data(chain(1040, TOOL))
    assert not problems and workflow is not None
    size = definition_bytes(compile_workflow(workflow, SIZING_OPTIONS).asl)
    assert MAX_STATE_MACHINE_BYTES - 6_000 < size <= MAX_STATE_MACHINE_BYTES


def test_the_quota_is_exactly_one_mebibyte_as_sent():
    # A machine of exactly 1,048,576 bytes fits; one byte more is a compiled-size problem
    assert size_problem(padded_machine(MAX_STATE_MACHINE_BYTES)) is None
    problem = size_problem(padded_machine(MAX_STATE_MACHINE_BYTES + 1), "flow.yaml")
    assert problem is not None and problem.file == "flow.yaml"
    assert "would be 1,048,577 bytes" in problem.message


def test_size_counts_non_ascii_text_as_the_escapes_step_functions_receives():
    # The control plane sends the machine as ASCII JSON: "é" travels as \u00e9 (6 bytes)
    asl = {"StartAt": "a", "States": {"a": {"Type": "Pass", "Result": "é" * 10, "End": True}}}
    sent = json.dumps(asl, separators=(",", ":"))
    assert definition_bytes(asl) == len(sent) == definition_size(asl)
    assert definition_bytes(asl) > len(json.dumps(asl, ensure_ascii=False).encode())


def test_a_definition_of_non_ascii_text_is_measured_as_sent():
    # Given 500 tool steps whose body holds 200 CJK characters: under the quota in UTF-8,
    # over it as the ASCII JSON the control plane sends
    data = chain(500, {**TOOL, "args": {"queue_url": "q", "body": "注文" * 100}})
    workflow = Workflow.model_validate(data)
    asl = compile_workflow(workflow, SIZING_OPTIONS).asl
    utf8 = len(json.dumps(asl, separators=(",", ":"), ensure_ascii=False).encode())
    assert utf8 < MAX_STATE_MACHINE_BYTES < definition_bytes(asl)
    # Then validation refuses it, as Step Functions would
    accepted, problems = validate_data(data)
    assert accepted is None and [p.rule for p in problems] == ["compiled-size"]


def test_child_input_schemas_a_parent_embeds_are_named_when_they_pass_the_quota():
    # Given a parent with 70 sub_workflow steps calling one child whose input_schema is
    # 16 KB: valid on its own (validation cannot see the child's schema)
    assert 15_000 < len(json.dumps(SCHEMA, separators=(",", ":"))) <= MAX_INPUT_SCHEMA_BYTES
    workflow, problems = validate_data(SCHEMA_PARENT)
    assert not problems and workflow is not None
    # When compiled with the child's schema, as the control plane does
    keys = SCHEMA_PARENT["steps"]
    options = CompileOptions(sub_workflow_input_schemas={key: SCHEMA for key in keys})
    asl = compile_workflow(workflow, options).asl
    # Then the machine passes the quota, and the problem names the schema-embedding steps
    problem = size_problem(asl)
    assert problem is not None and problem.rule == "compiled-size"
    assert "each embed their child's input_schema" in problem.message
    assert "call_0" in problem.message


def test_a_local_run_refuses_a_parent_whose_child_schemas_pass_the_quota():
    # Given the parent and child of the schema test, run locally (relayflow run compiles the
    # parent with the children it is given)
    child, _ = validate_data(
        {"id": "child", "input_schema": SCHEMA, "start": "a", "steps": {"a": {"type": "noop"}}}
    )
    parent, problems = validate_data(SCHEMA_PARENT)
    assert child is not None and parent is not None and not problems
    # Then the run is refused as the definition's problem before the runtime sees it
    with pytest.raises(DefinitionError) as raised:
        compile_checked(parent, {"child": child})
    (problem,) = raised.value.problems
    assert problem.rule == "compiled-size" and "input_schema" in problem.message


def test_compile_exits_2_when_the_express_wrapper_passes_the_quota(tmp_path, capsys):
    # Given a workflow Express can run whose Standard machine is 100 bytes under the quota
    def definition(pad: int) -> dict[str, Any]:
        return {
            "id": "pad",
            "start": "a",
            "steps": {"a": {"type": "transform", "mapping": "x" * pad}},
        }

    workflow, _ = validate_data(definition(0))
    assert workflow is not None
    base = definition_bytes(compile_workflow(workflow, SIZING_OPTIONS).asl)
    data = definition(MAX_STATE_MACHINE_BYTES - 100 - base)
    path = tmp_path / "pad.json"
    path.write_text(json.dumps(data))
    # Then validation accepts it
    assert main(["validate", str(path)]) == 0
    capsys.readouterr()
    # but compiling it for Express (its recording wrapper adds some 3.7 KB) exits 2 naming
    # the rule and the size, not an internal error, and writes nothing
    out = tmp_path / "asl.json"
    assert main(["compile", str(path), "-o", str(out)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert "[compiled-size]" in err and "bytes; Step Functions accepts at most 1,048,576" in err
    assert "internal error" not in err and not out.exists()


def test_validate_exits_2_and_prints_the_rule(tmp_path, capsys):
    path = tmp_path / "long.json"
    path.write_text(json.dumps(chain(1300, TOOL)))
    assert main(["validate", str(path)]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert f"{path}: steps: the compiled state machine would be" in err
    assert "[compiled-size]" in err


# --------------------------------------------------------------------------- history-events


def test_an_inline_for_each_past_the_history_quota_is_refused_with_the_largest_max_items():
    workflow, problems = validate_data(for_each(TOOL, 40_000))
    assert workflow is None
    (problem,) = problems
    assert (problem.path, problem.rule) == ("steps.each.max_items", "history-events")
    assert "40,000 items writes at least 280,012 events" in problem.message
    assert f"({TOOL_EVENTS_PER_ITEM} per item)" in problem.message
    assert f"Lower max_items to at most {MOST_TOOL_ITEMS:,}" in problem.message
    assert "mode: distributed" in problem.message


def test_the_history_boundary_is_the_fewest_events_a_full_run_writes():
    # A for_each whose every item succeeding first time writes exactly 25,000 events fits
    assert validate_data(for_each(TOOL, MOST_TOOL_ITEMS))[1] == []
    # one item more does not
    assert [p.rule for p in validate_data(for_each(TOOL, MOST_TOOL_ITEMS + 1))[1]] == [
        "history-events"
    ]


def test_a_distributed_for_each_keeps_each_items_history_in_its_child():
    assert validate_data(for_each(TOOL, 40_000, mode="distributed"))[1] == []


def test_an_express_workflow_has_no_history_quota():
    # Native item steps take no time: auto picks Express, which keeps no history
    assert validate_data(for_each({"type": "noop"}, 40_000))[1] == []
    # The same on Standard is refused (4 events per item: the Pass and its iteration)
    data = {**for_each({"type": "noop"}, 40_000), "engine": "standard"}
    (problem,) = validate_data(data)[1]
    assert problem.rule == "history-events" and "(4 per item)" in problem.message


def test_max_steps_per_run_past_the_history_quota_is_refused_on_a_cycle():
    def looping(limit: int) -> dict[str, Any]:
        return {
            "id": "loop",
            "start": "a",
            "engine": "standard",
            "max_steps_per_run": limit,
            "steps": {
                "a": {"type": "noop", "on_success": "b"},
                "b": {"type": "condition", "expression": "trigger.n > 1", "on_true": "a"},
            },
        }

    assert validate_data(looping(12_499))[1] == []
    (problem,) = validate_data(looping(12_500))[1]
    assert (problem.path, problem.rule) == ("max_steps_per_run", "history-events")
    assert "Lower max_steps_per_run to at most 12,499" in problem.message
    # Without a cycle the limit is never used
    linear = {**looping(100_000), "steps": {"a": {"type": "noop"}}}
    assert validate_data(linear)[1] == []


def test_history_problems_look_inside_parallel_branches():
    data = {
        "id": "fork",
        "start": "fork",
        "steps": {
            "fork": {"type": "parallel", "branches": ["each", "other"]},
            "other": {"type": "noop"},
            **{k: v for k, v in for_each(TOOL, 10_000)["steps"].items()},
        },
    }
    assert [p.path for p in validate_data(data)[1]] == ["steps.each.max_items"]


# --------------------------------------------------------------------------- control plane


def test_the_control_plane_answers_422_for_a_machine_over_the_quota():
    with pytest.raises(InvalidDefinition) as raised:
        check_compiled(padded_machine(MAX_STATE_MACHINE_BYTES + 1), what="the step-through variant")
    assert raised.value.status == 422 and raised.value.code == "invalid_definition"
    (detail,) = raised.value.details
    assert detail["path"] == "steps" and detail["rule"] == "compiled-size"
    assert detail["message"].startswith("the step-through variant would be 1,048,577 bytes")


def test_any_other_broken_rule_is_still_a_compiler_bug():
    asl = padded_machine(1_000)
    asl["States"]["orphan"] = {"Type": "Pass", "End": True}
    with pytest.raises(CompilerBug) as raised:
        check_compiled(asl)
    assert raised.value.status == 500 and raised.value.details[0]["rule"] == "reachable"


def test_the_control_plane_checks_history_on_the_machine_type_it_deploys():
    # Given a workflow auto would run on Express (so validation accepts it)
    workflow, problems = validate_data(for_each({"type": "noop"}, 40_000))
    assert workflow is not None and not problems
    asl = compile_workflow(workflow).asl
    # Then deployed to an existing Standard machine it is refused; to Express it is not
    with pytest.raises(InvalidDefinition) as raised:
        check_quotas(workflow, asl, "standard")
    assert raised.value.details[0]["path"] == "steps.each.max_items"
    check_quotas(workflow, asl, "express")
    assert history_problems(workflow, asl) != []
