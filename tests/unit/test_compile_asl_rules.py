"""Issue 12's eight classes of definitions that validated but compiled to ASL AWS refuses: for
each, the smallest definition that showed it, and its fixed compiled form (or its refusal at
validation, with the path and rule)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from workflow_shapes import routing_retry_loop

from relayflow.compiler import compile_workflow
from relayflow.compiler.check import check_machine
from relayflow.compiler.kinds.parallel import branch_merge
from relayflow.compiler.size import (
    MAX_STATE_MACHINE_BYTES,
    SIZING_OPTIONS,
    definition_bytes,
    step_bytes,
)
from relayflow.definition import DefinitionError
from relayflow.validation import load_workflow_text, validate_data
from relayflow.validation.limits import parse_rfc3339


def compiled(definition: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(definition, dict):
        workflow, problems = validate_data(definition)
        assert not problems, problems
        assert workflow is not None
        return compile_workflow(workflow).asl
    return compile_workflow(load_workflow_text(definition, "test.yaml")).asl


def problems_of(definition: str | dict[str, Any]) -> set[tuple[str, str]]:
    if isinstance(definition, dict):
        return {(p.path, p.rule) for p in validate_data(definition)[1]}
    with pytest.raises(DefinitionError) as refused:
        load_workflow_text(definition, "test.yaml")
    return {(p.path, p.rule) for p in refused.value.problems}


def all_states(machine: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in machine["States"].items():
        yield name, state
        for branch in state.get("Branches", []):
            yield from all_states(branch)
        if "ItemProcessor" in state:
            yield from all_states(state["ItemProcessor"])


def reachable(machine: dict[str, Any]) -> set[str]:
    """The states of one scope reachable from its StartAt (Next, Default, Choices, Catch)."""
    seen, todo = set(), [machine["StartAt"]]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        state = machine["States"][name]
        todo += [t for t in (state.get("Next"), state.get("Default")) if t]
        todo += [c["Next"] for c in state.get("Choices", []) + state.get("Catch", [])]
    return seen


def path_keys(node: Any) -> Iterator[tuple[str, Any]]:
    """Every ``key.$`` field of the ASL with its value."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key.endswith(".$"):
                yield key, value
            yield from path_keys(value)
    elif isinstance(node, list):
        for item in node:
            yield from path_keys(item)


def step_config(state: dict[str, Any]) -> dict[str, Any]:
    config = state["Parameters"]["Payload"]["step"]["config"]
    assert isinstance(config, str), "the config travels JSON-encoded"
    return json.loads(config)


def intrinsic_depth(text: str) -> int:
    """How deep intrinsic functions nest in a field (paths hold no parentheses)."""
    depth = deepest = 0
    for char in text:
        if char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    return deepest


# --------------------------------------------------------------------------- 1. Next and End


def test_custom_without_branches_goes_on_with_next_and_no_end():
    # Given a custom step without branches but with on_success
    asl = compiled("""
id: c1
start: decide
steps:
  decide: {type: custom, url: "https://decider.example.com/route", on_success: after}
  after: {type: noop}
""")
    # Then its Task moves on to the next step and does not also end the run
    task = asl["States"]["decide"]
    assert task["Next"] == "after"
    assert "End" not in task


def test_every_compiled_state_has_exactly_one_of_next_and_end():
    asl = compiled("""
id: c1b
start: decide
steps:
  decide:
    type: custom
    url: "https://decider.example.com/route"
    branches: {fast: after}
    on_success: after
  after: {type: noop}
""")
    for name, state in all_states(asl):
        if state["Type"] in ("Choice", "Succeed", "Fail"):
            continue
        assert ("Next" in state) != bool(state.get("End")), name


# --------------------------------------------------------------------------- 2. keys ending .$

DOLLAR_KEYS = """
id: c2
start: shape
http_tools:
  crm:
    base_url: https://crm.example.com
    operations:
      create: {method: POST, path: /contacts, body: {"name.$": "$.trigger.name"}}
steps:
  shape: {type: transform, mapping: {"total.$": "$.trigger.amount"}, on_success: call}
  call: {type: tool, tool: http.crm.create, args: {"id.$": "$.run.id"}, on_success: hook}
  hook:
    type: webhook_out
    url: https://hooks.example.com/x
    body: {"order.$": "$.trigger"}
    on_success: ask
  ask:
    type: approval
    title: Go?
    form_schema: {type: object, properties: {"note.$": {type: string}}}
    on_approve: decide
  decide:
    type: custom
    url: https://decider.example.com/route
    payload_config: {"model.$": "$.trigger"}
    on_success: score
  score: {type: code, code: "return input", input: {"x.$": "$.trigger"}}
"""


def test_user_keys_ending_in_dollar_never_become_asl_fields():
    # Given user data whose keys end in .$ in every step type that carries user objects
    asl = compiled(DOLLAR_KEYS)
    # Then every .$ field of the compiled machine is one the compiler means as a path
    for key, value in path_keys(asl):
        assert isinstance(value, str), key
        assert value.startswith(("$", "States.")), (key, value)
        assert key in {
            "output.$",
            "branch.$",
            "doc.$",
            "execution_id.$",
            "state.$",
            "attempt.$",
            "task_token.$",
        }, key
    # And the user data reaches each step's Lambda intact, as data
    states = asl["States"]
    assert step_config(states["shape"])["mapping"] == {"total.$": "$.trigger.amount"}
    assert step_config(states["call"])["args"] == {"id.$": "$.run.id"}
    body = step_config(states["call"])["http_tool"]["operations"]["create"]["body"]
    assert body == {"name.$": "$.trigger.name"}
    assert step_config(states["hook"])["body"] == {"order.$": "$.trigger"}
    schema = step_config(states["ask"])["form_schema"]
    assert schema["properties"] == {"note.$": {"type": "string"}}
    assert step_config(states["decide"])["payload_config"] == {"model.$": "$.trigger"}
    assert step_config(states["score"])["input"] == {"x.$": "$.trigger"}


def test_a_transform_with_a_dollar_key_leaves_its_native_pass_for_the_lambda():
    asl = compiled("""
id: c2b
start: shape
steps:
  shape: {type: transform, mapping: {"total.$": "$.trigger.amount", "n": "{{ trigger.n }}"}}
""")
    state = asl["States"]["shape"]
    assert state["Type"] == "Task"
    assert step_config(state)["mapping"] == {"total.$": "$.trigger.amount", "n": "{{ trigger.n }}"}


def test_a_transform_without_dollar_keys_stays_a_native_pass():
    asl = compiled("""
id: c2c
start: shape
steps:
  shape: {type: transform, mapping: {"total": "{{ trigger.amount }}"}}
""")
    state = asl["States"]["shape"]
    assert state["Type"] == "Pass"
    assert state["Parameters"]["output"] == {"total.$": "$.trigger.amount"}


def test_a_sub_workflow_input_key_ending_in_dollar_is_refused_with_its_path():
    found = problems_of("""
id: c2d
start: child
steps:
  child: {type: sub_workflow, workflow_id: kid, input: {"order.$": "$.trigger"}}
""")
    assert found == {("steps.child.input.order.$", "sub-workflow-input")}


# --------------------------------------------------------------------------- 3. delay.seconds


def test_delay_seconds_at_the_wait_limit_compiles_to_that_wait():
    asl = compiled("""
id: c3b
start: wait
steps:
  wait: {type: delay, seconds: 99999999}
""")
    assert asl["States"]["wait"] == {"Type": "Wait", "End": True, "Seconds": 99_999_999}


@pytest.mark.parametrize("seconds", [100_000_000, -1, True])
def test_delay_seconds_beyond_the_wait_limit_below_zero_or_boolean_is_refused(seconds):
    data = {"id": "c3c", "start": "w", "steps": {"w": {"type": "delay", "seconds": seconds}}}
    assert problems_of(data) == {("steps.w.seconds", "delay-seconds")}


# --------------------------------------------------------------------------- 4. until


@pytest.mark.parametrize(
    "until",
    [
        "2030-02-30T09:00:00Z",  # no such date
        "2030-01-01T24:00:00Z",  # hour 24
        "2030-01-01T09:00:00+25:99",  # no such offset
        "2030-01-01T09:60:00Z",  # minute 60
        "٢٠٣٠-01-01T09:00:00Z",  # Arabic-Indic digits match Python's \d
        "2030-01-01t09:00:00z",  # lower-case t and z
        "0000-01-01T09:00:00Z",  # year zero
    ],
)
def test_until_that_is_not_a_real_rfc3339_time_is_refused(until):
    data = {"id": "c4", "start": "w", "steps": {"w": {"type": "delay", "until": until}}}
    assert problems_of(data) == {("steps.w.until", "delay-until")}


def test_a_real_rfc3339_until_compiles_to_that_timestamp():
    data = {
        "id": "c4b",
        "start": "w",
        "steps": {"w": {"type": "delay", "until": "2030-02-28T23:59:59.250-09:30"}},
    }
    assert compiled(data)["States"]["w"]["Timestamp"] == "2030-02-28T23:59:59.250-09:30"


def test_parse_rfc3339_gives_the_instant():
    instant = parse_rfc3339("2030-01-01T09:00:00+02:00")
    assert instant is not None
    assert instant.isoformat() == "2030-01-01T09:00:00+02:00"
    assert parse_rfc3339("2028-02-29T00:00:00Z") is not None  # a leap day
    assert parse_rfc3339("2030-02-29T00:00:00Z") is None


# --------------------------------------------------------------------------- 5. .inf / .nan


@pytest.mark.parametrize("number", [".inf", "-.inf", ".nan"])
def test_yaml_non_finite_numbers_are_refused_with_their_path(number):
    found = problems_of(f"""
id: c5
start: shape
steps:
  shape: {{type: transform, mapping: {{limit: {number}, list: [1, {number}]}}}}
""")
    # The intake policy refuses the first non-finite number it meets, with its path
    assert found == {("steps.shape.mapping.limit", "non-finite-number")}


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_json_non_finite_numbers_are_refused_with_their_path(number):
    text = (
        '{"id": "c5b", "start": "s", "steps": {"s": {"type": "transform", '
        f'"mapping": {{"x": {number}}}}}}}}}'
    )
    with pytest.raises(DefinitionError) as refused:
        load_workflow_text(text, "test.json")
    assert {(p.path, p.rule) for p in refused.value.problems} == {
        ("steps.s.mapping.x", "non-finite-number")
    }


def test_a_non_finite_timeout_is_refused_too():
    data = {
        "id": "c5c",
        "start": "s",
        "http_tools": {"api": {"base_url": "https://api.example.com", "timeout_seconds": math.inf}},
        "steps": {"s": {"type": "tool", "tool": "http.api", "args": {"path": "/"}}},
    }
    assert ("http_tools.api.timeout_seconds", "non-finite-number") in problems_of(data)


# --------------------------------------------------------------------------- 6. retry reset

LINEAR_ON_A_CYCLE = {
    "condition": routing_retry_loop("c6", "condition"),
    "custom": routing_retry_loop("c6b", "custom"),
}


@pytest.mark.parametrize("kind", sorted(LINEAR_ON_A_CYCLE))
def test_a_routing_step_with_linear_retry_on_a_cycle_resets_before_routing(kind):
    asl = compiled(LINEAR_ON_A_CYCLE[kind])
    states = asl["States"]
    # Then the step's Task goes through the reset, and the reset on to the route
    assert states["check"]["Next"] == "check.retry_reset"
    assert "End" not in states["check"]
    assert states["check.retry_reset"]["Next"] == "check.route"
    assert "End" not in states["check.retry_reset"]
    # And every state of the machine is reachable
    assert reachable(asl) == set(states)


# --------------------------------------------------------------------------- 7. branch merge


def parallel_of(count: int) -> dict[str, Any]:
    steps: dict[str, Any] = {
        "fan": {"type": "parallel", "branches": [f"b{i}" for i in range(count)]}
    }
    steps |= {f"b{i}": {"type": "transform", "mapping": i} for i in range(count)}
    return {"id": "c7", "start": "fan", "steps": steps}


def merged_order(fields: list[str]) -> list[int]:
    text = " ".join(fields).replace("$[", " ").replace("].steps", " ")
    return [int(i) for i in text.split() if i.isdigit()]


@pytest.mark.parametrize("count", [2, 11])
def test_up_to_eleven_branches_merge_in_one_field_of_at_most_ten_intrinsics(count):
    states = compiled(parallel_of(count))["States"]
    merge = states["fan"]["ResultSelector"]["steps.$"]
    assert merge.count("States.JsonMerge(") == count - 1 <= 10
    assert intrinsic_depth(merge) == math.ceil(math.log2(count))
    # And every branch is merged, each once, in branch order, with no extra state
    assert merged_order([merge]) == list(range(count))
    assert "fan.merge" not in states


@pytest.mark.parametrize("count", [12, 40, 100])
def test_wide_parallels_merge_groups_of_branches_then_the_groups(count):
    # Given a parallel wider than one field can merge (10 intrinsics at most per field)
    asl = compiled(parallel_of(count))
    states = asl["States"]
    parts = states["fan"]["ResultSelector"]["parts"]
    # Then each group field holds at most 10 intrinsic calls, and together they merge every
    # branch once, in order
    assert all(field.count("States.JsonMerge(") <= 10 for field in parts.values())
    assert merged_order(list(parts.values())) == list(range(count))
    # And one Pass merges the groups, in order, within the same limit
    join = states["fan.merge"]["Parameters"]["steps.$"]
    assert join.count("States.JsonMerge(") <= 10
    assert states["fan"]["Next"] == "fan.merge"
    assert [p.split(".")[-1] for p in join.replace(",", " ").split() if "$.parts" in p] == [
        f"p{n}" for n in range(len(parts))
    ]
    # And the whole machine passes the post-compile check
    assert check_machine(asl) == []


@pytest.mark.parametrize("count", [1, 2, 3, 11])
def test_the_one_field_merge_stays_within_ten_intrinsics(count):
    merge = branch_merge(count)
    assert intrinsic_depth(merge) <= 10
    assert merge.count("States.JsonMerge(") == max(count - 1, 1)


# --------------------------------------------------------------------------- 8. size


def chain(count: int, step: dict[str, Any]) -> dict[str, Any]:
    steps = {
        f"s{i}": {**step, **({"on_success": f"s{i + 1}"} if i + 1 < count else {})}
        for i in range(count)
    }
    return {"id": "c8", "start": "s0", "steps": steps}


RETRY = {"max_attempts": 3, "backoff": "exponential", "base_seconds": 2}
TOOL_WITH_RETRY = {
    "type": "tool",
    "tool": "aws.sqs.send_message",
    "retry": RETRY,
    "args": {"queue_url": "q", "body": "{{ run.id }}"},
}


def test_a_thousand_tool_steps_with_retries_are_refused_with_the_size_message():
    # Given 1,000 tool steps, each with a retry policy (about 1.2 KB of ASL each)
    data = chain(1000, TOOL_WITH_RETRY)
    # When validated
    workflow, problems = validate_data(data)
    # Then the definition is refused: the compiled size, the quota and the largest steps
    assert workflow is None
    (problem,) = problems
    assert (problem.path, problem.rule) == ("steps", "compiled-size")
    assert "1,048,576" in problem.message
    assert "Largest steps: s" in problem.message
    assert "sub_workflow" in problem.message


def test_eight_hundred_tool_steps_with_retries_compile_under_the_quota():
    data = chain(800, TOOL_WITH_RETRY)
    workflow, problems = validate_data(data)
    assert not problems and workflow is not None
    # Both as measured with the longest deployed names and as compiled locally
    assert (
        definition_bytes(compile_workflow(workflow, SIZING_OPTIONS).asl) <= MAX_STATE_MACHINE_BYTES
    )
    assert definition_bytes(compile_workflow(workflow).asl) <= MAX_STATE_MACHINE_BYTES


def test_step_sizes_add_up_to_the_states_and_name_their_steps():
    asl = compiled(chain(3, {"type": "transform", "mapping": 1, "retry": RETRY}))
    sizes = step_bytes(asl)
    assert set(sizes) == {"s0", "s1", "s2"}
    # Every state is counted once: the sizes plus the machine's own fields make the total
    states_json = json.dumps(asl["States"], separators=(",", ":"))
    assert sum(sizes.values()) + len(sizes) - 1 + 2 == len(states_json)


def test_a_step_carries_only_the_http_operation_it_calls():
    big = {"blob": "x" * 5000}
    asl = compiled(
        {
            "id": "c8b",
            "start": "a",
            "http_tools": {
                "crm": {
                    "base_url": "https://crm.example.com",
                    "operations": {
                        "create": {"method": "POST", "path": "/c", "body": big},
                        "update": {"method": "PUT", "path": "/c/1", "body": big},
                    },
                }
            },
            "steps": {
                "a": {"type": "tool", "tool": "http.crm.create", "on_success": "b"},
                "b": {"type": "tool", "tool": "http.crm", "args": {"method": "GET", "path": "/c"}},
            },
        }
    )
    assert list(step_config(asl["States"]["a"])["http_tool"]["operations"]) == ["create"]
    assert step_config(asl["States"]["b"])["http_tool"]["operations"] == {}
    assert definition_bytes(asl) < 2 * 5000


def test_every_step_sample_event_carries_its_config_as_the_compiler_does():
    # The events/<function>/*.json samples are what `sam local invoke` sends: the same shape
    # as a compiled Task's payload, config JSON-encoded
    from pathlib import Path

    from relayflow import naming

    root = Path(__file__).resolve().parents[2] / "events"
    samples = [p for kind in naming.STEP_FUNCTIONS for p in sorted((root / kind).glob("*.json"))]
    assert samples
    for sample in samples:
        step = json.loads(sample.read_text())["step"]
        if sample.name == "malformed_payload.json":
            continue  # a payload without a config, on purpose
        assert isinstance(step["config"], str), sample.name
        assert isinstance(json.loads(step["config"]), dict), sample.name
