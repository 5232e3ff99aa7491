"""Templates: typed placeholders, interpolation, recursion, escaping and errors."""

from __future__ import annotations

import pytest

from relayflow.errors import ExpressionError
from relayflow.expressions import (
    ExpressionSyntaxError,
    TemplateSyntaxError,
    check_template,
    render,
    template_expressions,
)

DOC = {
    "run": {"id": "r-1"},
    "trigger": {
        "id": "A-1",
        "amount": 150,
        "ratio": 2.5,
        "vip": True,
        "note": None,
        "name": "Zoë",
        "customer": {"id": 7, "tags": ["a", "b"]},
        "items": [1, 2, 3],
    },
    "steps": {"fetch": {"output": {"count": 3}}},
    "item": {"sku": "X-9"},
    "index": 4,
}


# --------------------------------------------------------------------------- typed values


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ trigger.amount }}", 150),
        ("{{trigger.amount}}", 150),
        ("  {{ trigger.amount }}\n", 150),
        ("{{ trigger.ratio }}", 2.5),
        ("{{ trigger.vip }}", True),
        ("{{ trigger.amount > 200 }}", False),
        ("{{ trigger.customer }}", {"id": 7, "tags": ["a", "b"]}),
        ("{{ trigger.items }}", [1, 2, 3]),
        ("{{ trigger.note }}", None),
        ("{{ trigger.id }}", "A-1"),
        ('{{ {"total": trigger.amount * 2} }}', {"total": 300}),
    ],
)
def test_a_lone_placeholder_keeps_the_json_type(template, expected):
    # Given a string that is exactly one placeholder
    # When it is rendered
    result = render(template, DOC)

    # Then the value keeps its type instead of becoming text
    assert result == expected
    assert type(result) is type(expected)


# --------------------------------------------------------------------------- interpolation


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Order {{ trigger.id }}", "Order A-1"),
        ("{{ trigger.id }}/{{ index }}", "A-1/4"),
        ("amount={{ trigger.amount }} ratio={{ trigger.ratio }}", "amount=150 ratio=2.5"),
        ("vip: {{ trigger.vip }}", "vip: true"),
        ("note: {{ trigger.note }}", "note: null"),
        ("customer: {{ trigger.customer }}", 'customer: {"id":7,"tags":["a","b"]}'),
        ("items={{ trigger.items }}", "items=[1,2,3]"),
        ("Hello {{ trigger.name }}!", "Hello Zoë!"),
        ("no placeholders", "no placeholders"),
        ("", ""),
        ("{{ 1 }} {{ 2 }}", "1 2"),
    ],
)
def test_placeholders_inside_text_render_as_text(template, expected):
    # Given text with placeholders
    # When it is rendered
    # Then strings appear as-is and other values in compact JSON form
    assert render(template, DOC) == expected


def test_templates_apply_recursively_through_dicts_and_lists():
    # Given a nested templated value with literals of every type
    value = {
        "order": {"id": "{{ trigger.id }}", "count": "{{ steps.fetch.output.count }}"},
        "lines": ["{{ item.sku }}", "#{{ index }}", 5, None, True],
        "{{ trigger.id }}": "keys are not templated",
        "fixed": 1.5,
    }

    # When it is rendered
    result = render(value, DOC)

    # Then every string is rendered, literals and keys are kept
    assert result == {
        "order": {"id": "A-1", "count": 3},
        "lines": ["X-9", "#4", 5, None, True],
        "{{ trigger.id }}": "keys are not templated",
        "fixed": 1.5,
    }
    assert value["order"]["id"] == "{{ trigger.id }}"


def test_render_leaves_non_string_scalars_untouched():
    # Given scalar values
    # When rendered
    # Then they come back unchanged
    assert [render(v, DOC) for v in (1, 2.5, True, None)] == [1, 2.5, True, None]


# --------------------------------------------------------------------------- escaping


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("\\{{ trigger.id }}", "{{ trigger.id }}"),
        ("use \\{{ name }} to insert {{ trigger.id }}", "use {{ name }} to insert A-1"),
        ("\\\\{{ trigger.id }}", "\\A-1"),
        ("\\\\\\{{ x }}", "\\{{ x }}"),
        ("C:\\temp\\{ x }", "C:\\temp\\{ x }"),
        ('{{ "{{" }}', "{{"),
        ('{{ "}}" }}', "}}"),
        ('{"a": {"b": 1}}', '{"a": {"b": 1}}'),
        ("a }} b", "a }} b"),
        ('{{ {"k": {"z": 1}} }}', {"k": {"z": 1}}),
        ("{{ trigger.amount }}}", "150}"),
    ],
)
def test_literal_braces_can_be_written(template, expected):
    # Given a template using escapes, string literals or stray closing braces
    # When it is rendered
    # Then the braces come out literally
    assert render(template, DOC) == expected


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("template", "message", "column"),
    [
        ("Hello {{ trigger.id", "'{{' is never closed by '}}'", 7),
        ("a {{ }} b", "empty placeholder", 3),
        ("{{}}", "empty placeholder", 1),
        ("ok {{ trigger.id }} then {{ oops", "'{{' is never closed by '}}'", 26),
    ],
)
def test_check_template_reports_malformed_placeholders(template, message, column):
    # Given a malformed template
    # When it is checked
    with pytest.raises(TemplateSyntaxError) as caught:
        check_template(template)

    # Then the error locates the offending "{{"
    error = caught.value
    assert (error.template, error.message, error.column) == (template, message, column)
    assert isinstance(error, ValueError)


def test_check_template_locates_errors_inside_nested_values():
    # Given a nested value with one malformed template deep inside
    value = {"body": {"items": ["fine {{ trigger.id }}", "bad {{ trigger.id"]}}

    # When it is checked
    with pytest.raises(TemplateSyntaxError) as caught:
        check_template(value)

    # Then the error gives the path to the string
    assert caught.value.path == "body.items[1]"
    assert "body.items[1]" in str(caught.value)


def test_check_template_reports_bad_cel_as_expression_syntax_error():
    # Given a placeholder holding invalid CEL
    value = {"headers": {"X-Total": "total: {{ trigger.amount + }}"}}

    # When it is checked
    with pytest.raises(ExpressionSyntaxError) as caught:
        check_template(value)

    # Then the error names the expression, its column, the template and where it is
    error = caught.value
    assert error.expression == "trigger.amount +"
    assert error.message == "unexpected end of expression"
    assert error.column == 17
    assert error.template == "total: {{ trigger.amount + }}"
    assert error.path == "headers.X-Total"


def test_check_template_accepts_valid_values():
    # Given valid templates and plain values
    # When checked
    # Then nothing is raised
    check_template({"a": ["{{ trigger.id }}", 1, None], "b": "x \\{{ y", "c": 2.5})


def test_template_expressions_lists_every_placeholder_in_order():
    # Given a nested templated value
    value = {"a": "{{ trigger.id }}-{{index}}", "b": [{"c": "{{ steps.fetch.output }}"}, 3]}

    # When its expressions are listed
    # Then all placeholders appear in document order, stripped, escapes excluded
    assert template_expressions(value) == ["trigger.id", "index", "steps.fetch.output"]
    assert template_expressions("\\{{ not.one }}") == []


def test_render_failure_names_the_expression_and_location():
    # Given a template reading a missing key
    value = {"payload": {"email": "to: {{ trigger.email }}"}}

    # When it is rendered
    with pytest.raises(ExpressionError) as caught:
        render(value, DOC)

    # Then the named error gives the expression and where the template is
    error = caught.value
    assert type(error).__name__ == "Relayflow.ExpressionError"
    assert "'trigger.email'" in error.message
    assert "no such member in mapping: 'email'" in error.message
    assert "payload.email" in error.message
    assert error.details == {"expression": "trigger.email", "path": "payload.email"}


def test_render_type_error_is_an_expression_error():
    # Given a placeholder whose operands do not fit
    # When it is rendered
    with pytest.raises(ExpressionError) as caught:
        render("{{ trigger.id + 1 }}", DOC)

    # Then it fails with the named error
    assert "no matching overload" in caught.value.message


def test_render_of_a_malformed_template_is_an_expression_error():
    # Given a malformed template reaching the run-time path
    # When it is rendered
    with pytest.raises(ExpressionError) as caught:
        render({"a": "{{ trigger.id"}, DOC)

    # Then the step fails with the named error
    assert "never closed" in caught.value.message
