"""Every class of invalid definition is refused with its path and rule, all in one pass."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from relayflow.definition import DefinitionError
from relayflow.validation import load_workflow, load_workflow_text, validate_data

EXAMPLES = Path(__file__).resolve().parents[2] / "workflows" / "examples"

BASE: dict[str, Any] = {
    "id": "wf",
    "start": "a",
    "steps": {
        "a": {"type": "transform", "mapping": {"x": "{{ trigger.x }}"}, "on_success": "b"},
        "b": {"type": "noop"},
    },
}


def problems_of(data: dict[str, Any]) -> set[tuple[str, str]]:
    workflow, problems = validate_data(data, "wf.yaml")
    assert workflow is None, "an invalid definition must not produce a model"
    assert all(p.file == "wf.yaml" for p in problems)
    return {(p.path, p.rule) for p in problems}


def with_steps(**steps: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["steps"].update(steps)
    return data


def test_examples_are_valid():
    # Given the shipped examples / When loaded / Then they validate
    for path in sorted(EXAMPLES.glob("*.yaml")):
        workflow = load_workflow(path)
        assert workflow.steps


def test_minimal_definition_is_valid():
    workflow, problems = validate_data(BASE)
    assert problems == []
    assert workflow is not None and workflow.start == "a"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        # unknown step references
        (lambda d: d.update(start="nope"), ("start", "unknown-step")),
        (
            lambda d: d["steps"]["b"].update(on_success="ghost"),
            ("steps.b.on_success", "unknown-step"),
        ),
        (
            lambda d: d["steps"]["a"].update(on_failure="ghost"),
            ("steps.a.on_failure", "unknown-step"),
        ),
        (lambda d: d.update(errors={"on_failure": "ghost"}), ("errors.on_failure", "unknown-step")),
        (
            lambda d: (
                d["steps"].update(c={"type": "condition", "expression": "true", "on_true": "ghost"})
                or d["steps"]["b"].update(on_success="c")
            ),
            ("steps.c.on_true", "unknown-step"),
        ),
        # unreachable
        (lambda d: d["steps"].update(lonely={"type": "noop"}), ("steps.lonely", "unreachable")),
        # invalid keys
        (
            lambda d: d["steps"].update({"Bad-Key": {"type": "noop"}}),
            ("steps.Bad-Key", "step-key"),
        ),
        # bad templates and expressions
        (
            lambda d: d["steps"]["a"].update(mapping={"x": "{{ trigger.x "}),
            ("steps.a.mapping", "template"),
        ),
        (
            lambda d: d["steps"]["a"].update(mapping={"x": "{{ trigger.x + }}"}),
            ("steps.a.mapping", "template"),
        ),
        (
            lambda d: d["steps"]["a"].update(mapping={"x": "{{ steps.nope.output }}"}),
            ("steps.a.mapping", "unknown-step-reference"),
        ),
        (
            lambda d: d["steps"]["a"].update(mapping={"x": "{{ order.total }}"}),
            ("steps.a.mapping", "unknown-variable"),
        ),
        (
            lambda d: (
                d["steps"]["b"].update(type="condition", expression="a >", on_true="a")
                if False
                else d["steps"].__setitem__(
                    "b", {"type": "condition", "expression": "trigger.x >", "on_true": "a"}
                )
            ),
            ("steps.b.expression", "expression"),
        ),
        # bad retry values
        (
            lambda d: d["steps"]["a"].update(retry={"max_attempts": 0}),
            ("steps.a.retry.max_attempts", "greater-than-equal"),
        ),
        (
            lambda d: d["steps"]["a"].update(retry={"base_seconds": 0}),
            ("steps.a.retry.base_seconds", "greater-than-equal"),
        ),
        (
            lambda d: d["steps"]["a"].update(retry={"base_seconds": 10, "max_delay_seconds": 5}),
            ("steps.a.retry", "value-error"),
        ),
        (
            lambda d: d["steps"]["a"].update(
                retry={"retry_on": ["States.ALL", "Relayflow.Transient"]}
            ),
            ("steps.a.retry", "value-error"),
        ),
        (
            lambda d: d["steps"]["a"].update(retry={"backoff": "random"}),
            ("steps.a.retry.backoff", "literal-error"),
        ),
        (
            lambda d: d["steps"]["a"].update(retry={"retry_on": ["not a name"]}),
            ("steps.a.retry.retry_on[0]", "pattern"),
        ),
        # unknown fields and types
        (lambda d: d["steps"]["a"].update(colour="red"), ("steps.a.colour", "unknown-field")),
        (lambda d: d["steps"]["b"].update(type="teleport"), ("steps.b", "step-type")),
        # step types without an executor in this build
        (
            lambda d: d["steps"].__setitem__(
                "b",
                {
                    "type": "llm_batch",
                    "model": "gemini:pro",
                    "items": "{{ trigger.x }}",
                    "prompt_template": "hi",
                },
            ),
            ("steps.b.model", "model-provider"),
        ),
        # triggers
        (
            lambda d: d.update(triggers=[{"type": "cron", "cron": "61 * * * *"}]),
            ("triggers[0].cron", "cron"),
        ),
        (
            lambda d: d.update(
                triggers=[{"type": "cron", "cron": "0 9 * * *", "timezone": "Mars/Olympus"}]
            ),
            ("triggers[0].timezone", "timezone"),
        ),
        (
            lambda d: d.update(
                triggers=[{"type": "event", "source": "shop", "filter": "detail.total >"}]
            ),
            ("triggers[0].filter", "expression"),
        ),
        # run settings
        (lambda d: d.update(run_timeout_seconds=0), ("run_timeout_seconds", "greater-than-equal")),
        # settings a step type cannot honour are refused, not ignored
        (lambda d: d["steps"]["b"].update(retry={}), ("steps.b.retry", "not-applicable")),
        (
            lambda d: d["steps"].__setitem__(
                "b", {"type": "delay", "seconds": 5, "on_failure": "a"}
            ),
            ("steps.b.on_failure", "not-applicable"),
        ),
        (
            lambda d: (
                d["steps"].__setitem__(
                    "b", {"type": "parallel", "branches": ["c"], "timeout_seconds": 5}
                )
                or d["steps"].__setitem__("c", {"type": "noop"})
            ),
            ("steps.b.timeout_seconds", "not-applicable"),
        ),
        (
            lambda d: (
                d["steps"].__setitem__(
                    "b", {"type": "parallel", "branches": ["c"], "retry": {"backoff": "linear"}}
                )
                or d["steps"].__setitem__("c", {"type": "noop"})
            ),
            ("steps.b.retry.backoff", "not-applicable"),
        ),
        (
            lambda d: d["steps"]["a"].update(retry={"jitter": "yes"}),
            ("steps.a.retry.jitter", "bool-type"),
        ),
        # delay until: a zoned timestamp or one path placeholder
        (
            lambda d: d["steps"].__setitem__("b", {"type": "delay", "until": "tomorrow"}),
            ("steps.b.until", "delay-until"),
        ),
        (
            lambda d: d["steps"].__setitem__(
                "b", {"type": "delay", "until": "2030-01-01T09:00:00"}
            ),
            ("steps.b.until", "delay-until"),
        ),
        (
            lambda d: d["steps"].__setitem__(
                "b", {"type": "delay", "until": "{{ trigger.day + 'T09:00:00Z' }}"}
            ),
            ("steps.b.until", "delay-until"),
        ),
        (lambda d: d.update(triggers=[{"type": "sms"}]), ("triggers[0]", "step-type")),
    ],
)
def test_each_invalid_definition_is_refused_with_its_path(mutate, expected):
    # Given a valid definition with one rule broken
    data = copy.deepcopy(BASE)
    mutate(data)
    # When validated / Then the problem names the path and the rule
    assert expected in problems_of(data)


def test_for_each_and_parallel_targets_must_exist_and_fit():
    data = with_steps(
        loop={"type": "for_each", "items": "{{ trigger.items }}", "step": "ghost"},
        par={"type": "parallel", "branches": ["b", "phantom"]},
    )
    data["steps"]["a"]["on_success"] = "loop"
    data["steps"]["loop"]["on_success"] = "par"
    found = problems_of(data)
    assert ("steps.loop.step", "unknown-step") in found
    assert ("steps.par.branches[1]", "unknown-step") in found


def test_for_each_target_cannot_route_or_be_control_flow():
    data = with_steps(
        loop={
            "type": "for_each",
            "items": "{{ trigger.items }}",
            "step": "each",
            "on_success": "b",
        },
        each={"type": "transform", "mapping": 1, "on_success": "b"},
        loop2={"type": "for_each", "items": "{{ trigger.items }}", "step": "wait"},
        wait={"type": "delay", "seconds": 1},
    )
    data["steps"]["a"]["on_success"] = "loop"
    data["steps"]["b"]["on_success"] = "loop2"
    found = problems_of(data)
    assert ("steps.each.on_success", "for-each-target") in found
    assert ("steps.loop2.step", "for-each-target") in found


def test_for_each_items_must_name_a_list():
    data = with_steps(
        loop={"type": "for_each", "items": "{{ trigger.items.map(x, x * 2) }}", "step": "each"},
        each={"type": "noop"},
    )
    data["steps"]["a"]["on_success"] = "loop"
    assert ("steps.loop.items", "for-each-items") in problems_of(data)


def test_a_branch_step_cannot_also_be_routed_to_from_the_main_flow():
    data = with_steps(
        par={"type": "parallel", "branches": ["left", "right"], "on_success": "left"},
        left={"type": "noop"},
        right={"type": "noop"},
    )
    data["steps"]["b"]["on_success"] = "par"
    assert ("steps.left", "scope") in problems_of(data)


def test_a_cycle_without_a_way_out_is_refused():
    data = with_steps(
        c={"type": "transform", "mapping": 1, "on_success": "d"},
        d={"type": "noop", "on_success": "c"},
    )
    data["steps"]["b"]["on_success"] = "c"
    found = problems_of(data)
    assert ("steps.c", "unbounded-cycle") in found


def test_a_cycle_with_a_condition_that_leaves_is_accepted():
    data = with_steps(
        c={"type": "transform", "mapping": 1, "on_success": "d"},
        d={"type": "condition", "expression": "trigger.x > 3", "on_true": "c", "on_false": "e"},
        e={"type": "noop"},
    )
    data["steps"]["b"]["on_success"] = "c"
    workflow, problems = validate_data(data)
    assert problems == [] and workflow is not None


def test_all_problems_are_reported_in_one_pass():
    # Given a definition with five unrelated problems
    data = with_steps(
        lonely={"type": "noop"},
        c={"type": "condition", "expression": "trigger.x >", "on_true": "b"},
    )
    data["steps"]["a"]["retry"] = {"max_attempts": 0}
    data["steps"]["a"]["on_success"] = "c"
    data["steps"]["b"]["on_success"] = "ghost"
    data["triggers"] = [{"type": "cron", "cron": "not cron"}]
    # When validated
    found = problems_of(data)
    # Then every one of them is reported
    assert {
        ("steps.lonely", "unreachable"),
        ("steps.c.expression", "expression"),
        ("steps.a.retry.max_attempts", "greater-than-equal"),
        ("steps.b.on_success", "unknown-step"),
        ("triggers[0].cron", "cron"),
    } <= found


def test_duplicate_yaml_keys_are_refused_with_path_and_line():
    text = """
id: wf
start: a
steps:
  a:
    type: noop
    on_success: b
  b:
    type: noop
  a:
    type: noop
"""
    with pytest.raises(DefinitionError) as info:
        load_workflow_text(text, "dup.yaml")
    (problem,) = [p for p in info.value.problems if p.rule == "duplicate-key"]
    assert problem.path == "steps.a"
    assert "line 10" in problem.message
    assert problem.file == "dup.yaml"


def test_duplicate_json_keys_are_refused():
    text = '{"id": "wf", "start": "a", "steps": {"a": {"type": "noop"}, "a": {"type": "noop"}}}'
    with pytest.raises(DefinitionError) as info:
        load_workflow_text(text, "dup.json", fmt="json")
    assert any(p.rule == "duplicate-key" and p.path == "a" for p in info.value.problems)


def test_yaml_syntax_error_names_the_line():
    with pytest.raises(DefinitionError) as info:
        load_workflow_text("id: wf\nsteps: [\n", "bad.yaml")
    (problem,) = info.value.problems
    assert problem.rule == "syntax" and problem.path.startswith("line ")


def test_json_and_yaml_give_the_same_model(tmp_path):
    data = copy.deepcopy(BASE)
    (tmp_path / "wf.json").write_text(json.dumps(data))
    (tmp_path / "wf.yaml").write_text(yaml.safe_dump(data))
    assert load_workflow(tmp_path / "wf.json") == load_workflow(tmp_path / "wf.yaml")


def test_problem_text_names_file_path_and_rule():
    data = copy.deepcopy(BASE)
    data["steps"]["a"]["retry"] = {"max_attempts": 0}
    _, problems = validate_data(data, "flows/charge.yaml")
    text = str(problems[0])
    assert text.startswith("flows/charge.yaml: steps.a.retry.max_attempts: ")
    assert text.endswith("[greater-than-equal]")


def test_unknown_trigger_type_names_the_trigger_types():
    data = copy.deepcopy(BASE)
    data["triggers"] = [{"type": "sms"}]
    _, problems = validate_data(data)
    (problem,) = [p for p in problems if p.path == "triggers[0]"]
    assert problem.message.startswith("unknown trigger type 'sms'; one of: at, cron, event")


def test_yaml_scalars_follow_yaml_1_2():
    # Given YAML 1.1 spellings that silently change meaning
    text = """
id: wf
start: a
steps:
  a:
    type: transform
    mapping: {answer: yes, time: 1:30, day: 2030-01-01, n: 010, flag: true}
"""
    # When loaded / Then only true/false are booleans, and dates and times stay strings
    workflow = load_workflow_text(text, "scalars.yaml")
    assert workflow.steps["a"].mapping == {
        "answer": "yes",
        "time": "1:30",
        "day": "2030-01-01",
        "n": 10,
        "flag": True,
    }


@pytest.mark.parametrize(
    ("trigger", "path", "rule", "words"),
    [
        # croniter accepts L; EventBridge Scheduler's conversion cannot keep standard meaning
        ({"type": "cron", "cron": "0 0 L * *"}, "triggers[0].cron", "cron", "L"),
        ({"type": "cron", "cron": "0 0 30 2 *"}, "triggers[0].cron", "cron", "never"),
        # 02:30 does not exist in Berlin on 2026-03-29 (clocks go from 02:00 to 03:00)
        (
            {"type": "at", "at": "2026-03-29T02:30:00", "timezone": "Europe/Berlin"},
            "triggers[0].at",
            "at",
            "",
        ),
    ],
)
def test_triggers_are_refused_as_scheduler_would_refuse_them(trigger, path, rule, words):
    data = copy.deepcopy(BASE)
    data["triggers"] = [trigger]
    _, problems = validate_data(data)
    (problem,) = [p for p in problems if p.path == path]
    assert problem.rule == rule
    assert words in problem.message


def test_a_webhook_slug_is_declared_once():
    data = copy.deepcopy(BASE)
    data["triggers"] = [
        {"type": "webhook", "slug": "orders"},
        {"type": "webhook", "slug": "orders"},
    ]
    assert ("triggers[1].slug", "duplicate-slug") in problems_of(data)


def test_a_webhook_transform_is_checked_when_the_workflow_is_saved():
    data = copy.deepcopy(BASE)
    data["triggers"] = [
        {"type": "webhook", "slug": "orders", "transform": {"id": "{{ trigger.body.id "}},
        {"type": "webhook", "slug": "refunds", "transform": {"id": "{{ steps.a.output }}"}},
    ]
    found = problems_of(data)
    assert ("triggers[0].transform", "template") in found
    assert ("triggers[1].transform", "unknown-variable") in found
