"""relayflow.compiler.check: broken ASL for every rule, and every compiled machine we ship
passes."""

from __future__ import annotations

import copy
import json

import pytest
from asl_cases import BROKEN, valid_machine
from relayflow_testing import EXAMPLE_WORKFLOWS, GOLDEN_MACHINES

from relayflow.compiler import compile_workflow
from relayflow.compiler.asl_syntax import intrinsic_problem, path_problem, timestamp_problem
from relayflow.compiler.check import (
    MAX_DEFINITION_BYTES,
    CompiledMachineInvalid,
    Violation,
    assert_valid_machine,
    check_machine,
    definition_size,
)
from relayflow.validation import load_workflow


def test_the_reference_machine_is_valid():
    # Given a machine with every state type, paths, intrinsics, timestamps, Retry and Catch
    # When checked / Then nothing is reported
    assert check_machine(valid_machine()) == []


@pytest.mark.parametrize("case", BROKEN, ids=[case.id for case in BROKEN])
def test_every_rule_reports_its_violation_on_the_right_state(case):
    # Given the valid machine broken in one place
    asl = case.machine()
    # When checked
    violations = check_machine(asl)
    # Then the rule is reported on the state that breaks it
    assert (case.rule, case.state) in {(v.rule, v.state) for v in violations}, violations


def test_every_rule_has_a_broken_case():
    rules = {case.rule for case in BROKEN}
    assert rules >= {
        "start-at",
        "scope",
        "state-type",
        "next-or-end",
        "next-resolves",
        "reachable",
        "terminal",
        "choice-rule",
        "path-field",
        "jsonpath",
        "intrinsic",
        "intrinsic-nesting",
        "numeric-range",
        "field-value",
        "timestamp",
        "state-name",
        "duplicate-state",
        "non-finite",
        "json-type",
        "size",
        "catch-order",
        "error-equals",
        "field-conflict",
        "query-language",
        "unknown-field",
    }


@pytest.mark.parametrize("golden", GOLDEN_MACHINES, ids=[p.name for p in GOLDEN_MACHINES])
def test_every_golden_file_passes(golden):
    assert check_machine(json.loads(golden.read_text())) == []


@pytest.mark.parametrize("example", EXAMPLE_WORKFLOWS, ids=[p.name for p in EXAMPLE_WORKFLOWS])
def test_every_example_compiles_to_a_machine_that_passes(example):
    assert check_machine(compile_workflow(load_workflow(example)).asl) == []


def test_assert_valid_machine_names_every_rule_and_state():
    # Given a machine with two problems
    asl = valid_machine()
    asl["States"]["pause"]["Seconds"] = 100_000_000
    asl["States"]["orphan"] = {"Type": "Pass", "End": True}
    # When asserted valid / Then the error lists both, each with its rule and state
    with pytest.raises(CompiledMachineInvalid) as raised:
        assert_valid_machine(asl)
    assert {(v.rule, v.state) for v in raised.value.violations} == {
        ("numeric-range", "pause"),
        ("reachable", "orphan"),
    }
    text = str(raised.value)
    assert "[numeric-range] state 'pause'" in text
    assert "[reachable] state 'orphan'" in text
    assert_valid_machine(valid_machine())  # a valid machine passes silently


def test_the_check_does_not_change_the_machine():
    asl = valid_machine()
    before = copy.deepcopy(asl)
    check_machine(asl)
    assert asl == before


@pytest.mark.parametrize("garbage", [None, [], "x", {"States": []}, {"StartAt": "a"}])
def test_a_malformed_document_is_reported_not_raised(garbage):
    violations = check_machine(garbage)
    assert violations and all(isinstance(v, Violation) for v in violations)


def test_the_size_limit_is_one_mebibyte_of_compact_json():
    # Given a machine padded to exactly 1,048,576 bytes of compact JSON
    asl = {"StartAt": "a", "States": {"a": {"Type": "Pass", "Result": "", "End": True}}}
    asl["States"]["a"]["Result"] = "x" * (MAX_DEFINITION_BYTES - definition_size(asl))
    assert definition_size(asl) == MAX_DEFINITION_BYTES
    # Then it passes, and one byte more does not
    assert check_machine(asl) == []
    asl["States"]["a"]["Result"] += "x"
    [violation] = check_machine(asl)
    assert violation.rule == "size" and violation.state is None
    assert "1,048,577 bytes" in violation.message and "'a'" in violation.message


def test_ten_intrinsics_in_one_field_are_allowed():
    asl = valid_machine()
    merged = "$[0]"
    for _ in range(10):
        merged = f"States.JsonMerge({merged}, $[1], false)"
    asl["States"]["fork"]["ResultSelector"]["merged.$"] = merged
    assert check_machine(asl) == []


def test_a_state_name_of_80_characters_is_allowed():
    asl = valid_machine()
    asl["States"]["fork"]["Branches"][0] = {
        "StartAt": "l" * 80,
        "States": {"l" * 80: {"Type": "Pass", "End": True}},
    }
    assert check_machine(asl) == []


def test_state_name_length_counts_utf16_code_units():
    # 79 characters plus one outside the Basic Multilingual Plane: 81 UTF-16 code units
    asl = valid_machine()
    name = "l" * 79 + "\U0001f600"
    asl["States"]["fork"]["Branches"][0] = {
        "StartAt": name,
        "States": {name: {"Type": "Pass", "End": True}},
    }
    assert [(v.rule, v.state) for v in check_machine(asl)] == [
        ("state-name", f"fork.Branches[0].{name}")
    ]


def test_keys_ending_in_dollar_outside_payload_templates_are_plain_data():
    # A Pass Result is static: Step Functions never evaluates its keys
    asl = valid_machine()
    left = asl["States"]["fork"]["Branches"][0]["States"]["left"]
    left["Result"] = {"a.$": "text", "rows": [{"b.$": 5}]}
    assert check_machine(asl) == []


@pytest.mark.parametrize(
    "path",
    [
        "$",
        "$.a",
        "$.a.b_c-d",
        "$['a b']",
        '$["a"]',
        "$.a[0]",
        "$[0].v",
        "$.a[-1]",
        "$..x",
        "$.a[*]",
        "$.a[0,2]",
        "$.a[1:3]",
        "$.a[::2]",
        "$.a[?(@.n > 1)]",
        "$['a','b']",
        "$$.Execution.Id",
        "$$.Map.Item.Value",
    ],
)
def test_valid_paths(path):
    assert path_problem(path) is None


@pytest.mark.parametrize(
    "path", ["", "a", "$a", "$.", "$.a.", "$.a[", "$.a[b]", "$.a b", "$['a]", "$.a[?(@.x]"]
)
def test_invalid_paths(path):
    assert path_problem(path) is not None


@pytest.mark.parametrize("path", ["$..x", "$.a[*]", "$.a[0,1]", "$.a[1:2]", "$.a[-1]", "$.*"])
def test_reference_paths_name_one_node(path):
    assert path_problem(path) is None
    assert path_problem(path, reference=True) is not None


def test_the_context_root_can_be_refused():
    assert path_problem("$$.Execution", context=False) is not None
    assert path_problem("$.Execution", context=False) is None


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        ("States.UUID()", 1),
        ("States.Format('{} and \\{\\} it\\'s \\\\', $.a)", 1),
        ("States.Array(1, -2.5, 1e3, true, false, null, 'x', $.a[0], $$.Execution.Id)", 1),
        ("States.JsonMerge(States.StringToJson($.a), $.b, false)", 2),
        ("States.MathRandom(1, 10)", 1),
        ("States.MathRandom(1, 10, 7)", 1),
        (" States.ArrayLength( $.a ) ", 1),
    ],
)
def test_valid_intrinsics(text, calls):
    assert intrinsic_problem(text.strip()) == (None, calls)


@pytest.mark.parametrize(
    "text",
    [
        "States.Nope()",
        "States.Format",
        "States.Format('x'",
        "States.Format('x') extra",
        "States.Format('a\\tb')",
        "States.Format('x)",
        "States.MathAdd(1)",
        "States.UUID(1)",
        "States.Array(bogus)",
        "States.Array($.a b)",
    ],
)
def test_invalid_intrinsics(text):
    problem, _ = intrinsic_problem(text)
    assert problem is not None


@pytest.mark.parametrize(
    "value",
    [
        "2030-01-01T09:00:00Z",
        "2030-01-01T09:00:00.123456Z",
        "2030-01-01T09:00:00+02:00",
        "2030-01-01T09:00:00-23:59",
        "2028-02-29T00:00:00Z",
    ],
)
def test_valid_timestamps(value):
    assert timestamp_problem(value) is None


@pytest.mark.parametrize(
    "value",
    [
        "2030-02-30T09:00:00Z",
        "2029-02-29T00:00:00Z",
        "2030-01-01T24:00:00Z",
        "2030-01-01T09:60:00Z",
        "2030-01-01T09:00:00+25:99",
        "2030-01-01T09:00:00+24:00",
        "2030-01-01T09:00:00",
        "2030-01-01 09:00:00Z",
        "2030-01-01T09:00:00z",
        "٢٠٣٠-01-01T09:00:00Z",
        "2030-01-01T09:00:00.Z",
        20300101,
    ],
)
def test_invalid_timestamps(value):
    assert timestamp_problem(value) is not None
