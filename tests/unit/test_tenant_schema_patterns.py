"""Tenants' JSON Schema patterns run on RE2, never on Python's backtracking ``re``.

``^(a+)+$`` against a run of ``a`` and a ``!`` takes exponential time on ``re`` (26
characters took 6.5 s on ``serve``, stalling other tenants). Each test here asserts results:
what is accepted and refused, and that the tenant's pattern never reaches ``re``. The timing
figures are in bench/redos_bench.py.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from definitions import noop_workflow, validation_problems
from test_ai_agent_rules import BASE as AGENT_WORKFLOW

from relayflow.control.errors import Unprocessable
from relayflow.control.waits import check_form
from relayflow.definition.input_schema import input_violations
from relayflow.definition.tenant_schema import UnsupportedPattern, check_schema, validator

EVIL = "^(a+)+$"
#: Exponential on a backtracking engine: 2**40 ways to split the run before failing at "!".
ATTACK = "a" * 40 + "!"


@pytest.fixture()
def no_backtracking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python's ``re`` refuses to look at the tenant's pattern (jsonschema calls
    ``re.search`` on the module, so this sees every call it would make)."""
    search = re.search

    def guarded(pattern: Any, *args: Any, **kwargs: Any) -> Any:
        assert pattern != EVIL and EVIL not in str(pattern), "a tenant pattern reached re"
        return search(pattern, *args, **kwargs)

    monkeypatch.setattr(re, "search", guarded)


# --------------------------------------------------------------------------- evaluation


def test_the_input_schema_attack_is_answered_by_re2(no_backtracking):
    # Given an input_schema whose pattern is catastrophic for a backtracking engine
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": EVIL}}}
    # When the attack input and a matching one are checked
    refused = input_violations(schema, {"name": ATTACK})
    accepted = input_violations(schema, {"name": "a" * 40})
    # Then the attack is one pattern violation at its pointer, and the match passes
    assert [(v.pointer, v.rule) for v in refused] == [("/name", "pattern")]
    assert accepted == []


@pytest.mark.parametrize(
    ("schema", "instance", "valid"),
    [
        ({"type": "string", "pattern": EVIL}, ATTACK, False),
        ({"type": "string", "pattern": EVIL}, "aaa", True),
        # patternProperties: the key is matched, then its subschema applies
        ({"patternProperties": {EVIL: {"type": "integer"}}}, {ATTACK: "x", "aa": 1}, True),
        ({"patternProperties": {EVIL: {"type": "integer"}}}, {"aa": "x"}, False),
        # additionalProperties and unevaluatedProperties read patternProperties' keys too
        ({"patternProperties": {EVIL: {}}, "additionalProperties": False}, {ATTACK: 1}, False),
        ({"patternProperties": {EVIL: {}}, "additionalProperties": False}, {"aa": 1}, True),
        ({"patternProperties": {EVIL: {}}, "unevaluatedProperties": False}, {ATTACK: 1}, False),
        ({"patternProperties": {EVIL: {}}, "unevaluatedProperties": False}, {"a": 1}, True),
        # Through a $ref, an applicator, an older draft and a subschema naming its own dialect
        ({"$defs": {"e": {"pattern": EVIL}}, "$ref": "#/$defs/e"}, ATTACK, False),
        ({"anyOf": [{"pattern": EVIL}, {"type": "integer"}]}, ATTACK, False),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "pattern": EVIL},
            ATTACK,
            False,
        ),
        (
            {
                "$schema": "http://json-schema.org/draft-04/schema#",
                "patternProperties": {EVIL: {}},
                "additionalProperties": False,
            },
            {ATTACK: 1},
            False,
        ),
        (
            {
                "properties": {
                    "x": {"$schema": "http://json-schema.org/draft-07/schema#", "pattern": EVIL}
                }
            },
            {"x": ATTACK},
            False,
        ),
    ],
)
def test_every_keyword_that_reads_a_pattern_runs_on_re2(no_backtracking, schema, instance, valid):
    assert validator(schema).is_valid(instance) is valid


def test_patterns_keep_json_schema_semantics():
    # Not anchored unless the pattern says so; unicode text; classes and counted repeats
    schema = {"type": "string", "pattern": "b{2}[0-9]"}
    assert validator(schema).is_valid("ébb7z")
    assert not validator(schema).is_valid("b7")
    assert validator({"pattern": "^é+$"}).is_valid("éé")


def test_the_approval_form_refuses_the_attack_with_its_path(no_backtracking):
    # Given an approval form whose field has the catastrophic pattern
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": EVIL}}}
    # When a guest submits the attack
    with pytest.raises(Unprocessable) as info:
        check_form(schema, {"code": ATTACK})
    # Then it is a 422 naming the field, and a matching answer passes
    assert info.value.status == 422
    assert [p["path"] for p in info.value.details] == ["data['code']"]
    check_form(schema, {"code": "aaaa"})


def test_a_pattern_re2_cannot_compile_fails_every_value_instead_of_running_on_re():
    # Given a schema stored before definitions were checked for RE2 (a backreference)
    schema = {"type": "string", "pattern": r"^(a)\1$"}
    # When a value that re would match is checked
    errors = list(validator(schema).iter_errors("aa"))
    # Then it is refused, saying why
    assert [e.validator for e in errors] == ["pattern"]
    assert "is not supported (RE2" in errors[0].message


# --------------------------------------------------------------------------- definitions


def test_an_input_schema_pattern_re2_cannot_run_is_refused_with_its_path_and_rule():
    schema = {"properties": {"word": {"pattern": r"(\w)\1"}}}
    ((path, rule, message),) = validation_problems(noop_workflow(input_schema=schema))
    assert (path, rule) == ("input_schema", "json-schema")
    assert "/properties/word/pattern" in message and "RE2" in message


def test_a_form_schema_with_lookahead_is_refused_with_its_path_and_rule():
    step = {
        "type": "approval",
        "title": "Go?",
        "form_schema": {"patternProperties": {"^(?=x)": {}}},
        "on_approve": "a",
        "on_reject": "a",
    }
    data = {"id": "wf", "start": "ask", "steps": {"ask": step, "a": {"type": "noop"}}}
    ((path, rule, message),) = validation_problems(data)
    assert (path, rule) == ("steps.ask.form_schema", "json-schema")
    assert "/patternProperties/^(?=x)" in message


def test_an_agent_output_schema_with_a_backreference_is_refused():
    data = copy.deepcopy(AGENT_WORKFLOW)
    data["steps"]["triage"]["output_schema"] = {"type": "string", "pattern": r"(a)\1"}
    assert {(p, r) for p, r, _ in validation_problems(data)} == {
        ("steps.triage.output_schema", "json-schema")
    }


def test_the_catastrophic_pattern_itself_is_a_valid_definition():
    # RE2 runs it in linear time, so there is nothing to refuse
    schema = {"properties": {"name": {"pattern": EVIL}}}
    assert validation_problems(noop_workflow(input_schema=schema)) == []


def test_pattern_like_data_is_not_taken_for_a_pattern():
    check_schema({"const": {"pattern": r"(a)\1"}, "properties": {"pattern": {"type": "string"}}})
    with pytest.raises(UnsupportedPattern) as info:
        check_schema({"prefixItems": [{"pattern": r"(?<=a)b"}]})
    assert info.value.pointer == "/prefixItems/0/pattern"
