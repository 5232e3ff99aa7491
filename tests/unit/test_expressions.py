"""CEL expressions: evaluation against the state document, errors, static analysis."""

from __future__ import annotations

import pytest

from relayflow.errors import ExpressionError
from relayflow.expressions import (
    ExpressionSyntaxError,
    check_expression,
    evaluate,
    evaluate_condition,
    expression_paths,
)
from relayflow.expressions import cel as cel_module

DOC = {
    "run": {"id": "r-1", "workflow_id": "orders", "dry_run": False, "depth": 0},
    "trigger": {
        "amount": 150,
        "ratio": 0.25,
        "country": "DE",
        "coupon": None,
        "email": "ann@example.com",
        "tags": ["new", "vip"],
        "order": {"id": "A-1", "lines": [{"sku": "X", "qty": 2}, {"sku": "Y", "qty": 5}]},
    },
    "steps": {"fetch": {"status": "succeeded", "output": {"items": [1, 2, 3]}}},
}


# --------------------------------------------------------------------------- evaluation


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ('trigger.amount > 100 && trigger.country == "DE"', True),
        ("steps.fetch.output.items.size() > 0", True),
        ("size(trigger.tags)", 2),
        ("has(trigger.coupon)", True),
        ("has(trigger.discount)", False),
        ('"vip" in trigger.tags', True),
        ('trigger.country in ["AT", "CH"]', False),
        ('trigger.email.startsWith("ann")', True),
        ('trigger.email.endsWith(".org")', False),
        ('trigger.email.matches("^[a-z]+@")', True),
        ('"amount: " + string(trigger.amount)', "amount: 150"),
        ('int("42") + 1', 43),
        ('trigger.amount > 100 ? "big" : "small"', "big"),
        ("trigger.order.lines.exists(l, l.qty > 4)", True),
        ("trigger.order.lines.map(l, l.sku)", ["X", "Y"]),
        ("trigger.order.lines.filter(l, l.qty > 4).size()", 1),
        ('trigger["country"]', "DE"),
        ("run.dry_run", False),
    ],
)
def test_evaluate_runs_cel_against_the_document(src, expected):
    # Given the state document
    # When the expression is evaluated
    result = evaluate(src, DOC)

    # Then it yields the CEL result as plain Python
    assert result == expected
    assert type(result) is type(expected)


def test_evaluate_returns_plain_json_compatible_python():
    # Given expressions producing every JSON type
    # When they are evaluated
    amount = evaluate("trigger.amount", DOC)
    ratio = evaluate("trigger.ratio", DOC)
    order = evaluate("trigger.order", DOC)
    coupon = evaluate("trigger.coupon", DOC)
    literal = evaluate('{"n": [1, 2.5, "x", true, null]}', DOC)

    # Then the values are builtin types, not celpy wrappers
    assert (type(amount), amount) == (int, 150)
    assert (type(ratio), ratio) == (float, 0.25)
    assert type(order) is dict
    assert order == DOC["trigger"]["order"]
    assert all(type(key) is str for key in order)
    assert coupon is None
    assert literal == {"n": [1, 2.5, "x", True, None]}
    assert [type(v) for v in literal["n"]] == [int, float, str, bool, type(None)]


def test_evaluate_converts_non_json_cel_values():
    # Given CEL values JSON has no type for
    # When they are evaluated
    stamp = evaluate('timestamp("2024-05-01T10:00:00Z")', {})
    int_keys = evaluate("{1: 'a', 2: 'b'}", {})
    uint = evaluate("7u", {})

    # Then they come back in a JSON form
    assert stamp == "2024-05-01T10:00:00Z"
    assert int_keys == {"1": "a", "2": "b"}
    assert (type(uint), uint) == (int, 7)


def test_evaluate_binds_only_the_roots_present():
    # Given a document without "item" (not inside a for_each)
    # When an expression uses "item"
    with pytest.raises(ExpressionError) as caught:
        evaluate("item.sku", DOC)

    # Then it fails with a clear message, without celpy's activation dump
    assert "undeclared reference to 'item'" in caught.value.message
    assert "activation" not in caught.value.message


def test_evaluate_sees_item_and_index_inside_an_iteration():
    # Given an iteration document
    doc = {**DOC, "item": {"sku": "X"}, "index": 3}

    # When item and index are used
    # Then they resolve
    assert evaluate('item.sku + "-" + string(index)', doc) == "X-3"


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("size(steps)", 3),
        ("steps.exists(key, key == 'c')", True),
        ("steps[trigger.key].output", "from c"),
        ("has(steps.b) && steps.a.output == 'from a'", True),
        ("has(steps.z)", False),
    ],
)
def test_evaluate_sees_every_step_whichever_way_steps_is_used(src, expected):
    # Given several finished steps
    doc = {
        "trigger": {"key": "c"},
        "steps": {key: {"output": f"from {key}"} for key in ("a", "b", "c")},
    }

    # When expressions reach steps by name, dynamically or as a whole
    # Then each sees the same document
    assert evaluate(src, doc) == expected


def test_evaluate_rejects_document_values_that_are_not_json():
    # Given a document holding a Python object JSON has no form for
    doc = {"trigger": {"when": object()}}

    # When an expression reads it
    with pytest.raises(ExpressionError) as caught:
        evaluate("trigger.when", doc)

    # Then the named error says so
    assert "a value CEL cannot use" in caught.value.message


@pytest.mark.parametrize(
    ("src", "fragment"),
    [
        ("trigger.missing", "no such member in mapping: 'missing'"),
        ("steps.charge.output", "no such member in mapping: 'charge'"),
        ('trigger.amount > "100"', "no matching overload for '>' applied to '(int, string)'"),
        ("trigger.amount / 0", "divide by zero"),
        ("trigger.tags[5]", "list index out of range"),
        ('{"a": 1 / 0}', "divide by zero"),
        ('double("inf")', "JSON cannot hold"),
    ],
)
def test_evaluation_failures_raise_expression_error_naming_the_expression(src, fragment):
    # Given an expression that cannot be evaluated against the document
    # When it is evaluated
    with pytest.raises(ExpressionError) as caught:
        evaluate(src, DOC)

    # Then the named error says which expression failed and why
    error = caught.value
    assert type(error).__name__ == "Relayflow.ExpressionError"
    assert repr(src) in error.message
    assert fragment in error.message
    assert error.details == {"expression": src}


def test_evaluate_reports_a_syntax_error_as_expression_error():
    # Given a malformed expression reaching the run-time path
    # When it is evaluated
    with pytest.raises(ExpressionError) as caught:
        evaluate("trigger.amount >", DOC)

    # Then the step fails with the named error, which still names the problem
    assert "unexpected end of expression" in caught.value.message
    assert isinstance(caught.value.__cause__, ExpressionSyntaxError)


def test_evaluate_condition_returns_a_bool():
    # Given boolean conditions
    # When they are evaluated as conditions
    # Then they give real bools
    assert evaluate_condition("trigger.amount > 100", DOC) is True
    assert evaluate_condition('trigger.country == "FR"', DOC) is False


@pytest.mark.parametrize(
    ("src", "shown"),
    [
        ("trigger.amount", "number 150"),
        ("trigger.country", "string 'DE'"),
        ("trigger.coupon", "null"),
    ],
)
def test_evaluate_condition_rejects_non_bool_results(src, shown):
    # Given an expression that is not a condition
    # When it is evaluated as a condition
    with pytest.raises(ExpressionError) as caught:
        evaluate_condition(src, DOC)

    # Then it fails, showing what it produced
    assert "must evaluate to a bool" in caught.value.message
    assert shown in caught.value.message
    assert repr(src) in caught.value.message


def test_compiled_programs_are_cached():
    # Given an expression evaluated once
    src = "trigger.amount * 2 > 299"
    evaluate(src, DOC)
    hits = cel_module._program.cache_info().hits

    # When it is evaluated again
    assert evaluate(src, DOC) is True

    # Then the compiled program is reused
    assert cel_module._program.cache_info().hits == hits + 1


def test_a_large_definition_parses_each_distinct_expression_once(monkeypatch):
    # Given a chain with more distinct expressions than the run-time tree cache holds, and a
    # parser that counts its parses
    from relayflow.validation import validate_data

    cel_module._facts.cache_clear()
    cel_module._parse.cache_clear()
    environment = cel_module._environment()
    parses: list[str] = []
    real_compile = environment.compile

    def counting_compile(src: str):
        parses.append(src)
        return real_compile(src)

    monkeypatch.setattr(environment, "compile", counting_compile)
    n = 2_200
    steps = {}
    for i in range(n):
        source = "trigger.x" if i == 0 else f"steps.s{i - 1}.output.v"
        step = {"type": "transform", "mapping": {"v": f"{{{{ {source} }}}}"}}
        if i + 1 < n:
            step["on_success"] = f"s{i + 1}"
        steps[f"s{i}"] = step

    # When the definition is validated (checks, liveness, compilation, engine choice)
    workflow, problems = validate_data({"id": "chain", "start": "s0", "steps": steps})

    # Then it is valid, and each distinct expression was parsed exactly once
    assert workflow is not None, problems
    assert len(parses) == len(set(parses)) == n


def test_a_syntax_error_is_reported_alike_every_time_it_is_asked():
    for _ in range(2):
        with pytest.raises(ExpressionSyntaxError) as caught:
            check_expression("trigger.amount >")
        assert (caught.value.message, caught.value.column) == ("unexpected end of expression", 17)


# --------------------------------------------------------------------------- syntax


@pytest.mark.parametrize(
    ("src", "message", "column"),
    [
        ("trigger.amount >", "unexpected end of expression", 17),
        ("", "unexpected end of expression", 1),
        ("a ++ b", "unexpected '+'", 4),
        (
            "trigger.amount == = 3",
            "unexpected character '=': compare with == (CEL has no assignment)",
            19,
        ),
        ("trigger.amount ! 3", "unexpected '!'", 16),
        ("(trigger.a", "unexpected end of expression", 11),
        ("'unterminated", "unterminated or malformed string literal", 1),
        ("trigger.a &&\n  trigger.b +", "unexpected end of expression", 27),
        ("trigger.a &&\n  $", "unexpected character '$'", 16),
    ],
)
def test_check_expression_reports_syntax_errors_with_column(src, message, column):
    # Given a malformed expression
    # When it is checked
    with pytest.raises(ExpressionSyntaxError) as caught:
        check_expression(src)

    # Then the error carries the expression, a short message and a 1-based column
    error = caught.value
    assert (error.expression, error.message, error.column) == (src, message, column)
    assert isinstance(error, ValueError)
    assert f"at column {column}" in str(error)


@pytest.mark.parametrize("src", [None, 42, {"a": 1}])
def test_check_expression_rejects_non_strings(src):
    # Given a definition value that is not text
    # When it is checked as an expression
    with pytest.raises(ExpressionSyntaxError) as caught:
        check_expression(src)

    # Then it is a syntax error saying what it got
    assert "expected a string" in caught.value.message


def test_check_expression_accepts_valid_cel_without_evaluating():
    # Given expressions that parse but would fail against any document
    # When they are checked
    # Then nothing is raised
    check_expression("steps.nope.output.x / 0 > 1")
    check_expression('has(trigger.coupon) ? trigger.coupon : "none"')


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("src", "paths"),
    [
        ("steps.fetch.output.items.size() > 0", [("steps", "fetch", "output", "items")]),
        ("has(trigger.coupon)", [("trigger", "coupon")]),
        ("trigger.amount > 100 && trigger.amount < 200", [("trigger", "amount")]),
        ('steps["fetch"].output', [("steps", "fetch", "output")]),
        ('steps["charge-card"].output.id', [("steps", "charge-card", "output", "id")]),
        ("trigger.items[0].price", [("trigger", "items")]),
        (
            "steps.lookup.output[trigger.key]",
            [("steps", "lookup", "output"), ("trigger", "key")],
        ),
        (
            "size(steps.a.output) + size(steps.b.output)",
            [("steps", "a", "output"), ("steps", "b", "output")],
        ),
        ("index > 0 && item.sku != run.id", [("index",), ("item", "sku"), ("run", "id")]),
        (
            "trigger.lines.exists(l, l.qty > steps.limits.output.max)",
            [("trigger", "lines"), ("steps", "limits", "output", "max")],
        ),
        ("trigger.lines.map(trigger, trigger.qty)", [("trigger", "lines")]),
        ("error.Cause.contains('timeout')", [("error", "Cause")]),
        ("order.total > 1 && trigger.a", [("order", "total"), ("trigger", "a")]),
        ("type(trigger.a) == string && google.protobuf.Int32Value == int", [("trigger", "a")]),
        ('1 + 2 == 3 && "x".size() == 1', []),
        ("(steps.fetch).output", [("steps", "fetch", "output")]),
    ],
)
def test_expression_paths_lists_static_member_paths_from_variables(src, paths):
    # Given an expression
    # When its paths are extracted
    # Then every variable path (unknown ones too) is listed once, in order, stopping at
    # dynamic parts
    assert expression_paths(src) == paths


def test_expression_paths_rejects_bad_syntax():
    # Given a malformed expression
    # When its paths are extracted
    # Then the syntax error surfaces
    with pytest.raises(ExpressionSyntaxError):
        expression_paths("steps.fetch.")
