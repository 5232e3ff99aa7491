"""Translation of CEL conditions and templates to native ASL, checked against CEL itself.

The reference evaluators below (Choice rules, ``Parameters`` with ``States.Format`` and
``States.Array``) exist only to test the translation; they follow the ASL specification.
"""

from __future__ import annotations

import json
import re

import pytest

from relayflow.errors import ExpressionError
from relayflow.expressions import (
    ExpressionSyntaxError,
    condition_to_choice,
    evaluate_condition,
    expression_jsonpath,
    render,
    template_to_parameters,
)

# --------------------------------------------------------------------------- reference ASL


class PathMissing(Exception):
    """A Choice rule or Parameters path that does not exist: the run fails (States.Runtime)."""


def lookup(doc, path):
    assert path.startswith("$")
    value = doc
    for name, index in re.findall(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]", path[1:]):
        if name:
            if not isinstance(value, dict) or name not in value:
                raise PathMissing(path)
            value = value[name]
        else:
            if not isinstance(value, list) or int(index) >= len(value):
                raise PathMissing(path)
            value = value[int(index)]
    return value


def is_number(value):
    return isinstance(value, int | float) and not isinstance(value, bool)


def glob_matches(pattern, text):
    """ASL StringMatches: ``*`` is a wildcard, a backslash escapes the next character."""
    regex, i = "", 0
    while i < len(pattern):
        if pattern[i] == "\\":
            regex += re.escape(pattern[i + 1])
            i += 2
            continue
        regex += ".*" if pattern[i] == "*" else re.escape(pattern[i])
        i += 1
    return re.fullmatch(regex, text, re.DOTALL) is not None


COMPARE = {
    "Equals": lambda a, b: a == b,
    "LessThan": lambda a, b: a < b,
    "LessThanEquals": lambda a, b: a <= b,
    "GreaterThan": lambda a, b: a > b,
    "GreaterThanEquals": lambda a, b: a >= b,
}


def choice_matches(rule, doc):
    if "And" in rule:
        return all(choice_matches(r, doc) for r in rule["And"])
    if "Or" in rule:
        return any(choice_matches(r, doc) for r in rule["Or"])
    if "Not" in rule:
        return not choice_matches(rule["Not"], doc)
    (operator,) = set(rule) - {"Variable"}
    operand = rule[operator]
    if operator == "IsPresent":
        try:
            lookup(doc, rule["Variable"])
        except PathMissing:
            return not operand
        return operand
    value = lookup(doc, rule["Variable"])
    if operator == "IsNull":
        return (value is None) == operand
    if operator == "BooleanEquals":
        return isinstance(value, bool) and value == operand
    if operator == "StringMatches":
        return isinstance(value, str) and glob_matches(operand, value)
    if operator.startswith("Numeric"):
        return is_number(value) and COMPARE[operator.removeprefix("Numeric")](value, operand)
    if operator.startswith("String"):
        return isinstance(value, str) and COMPARE[operator.removeprefix("String")](value, operand)
    raise AssertionError(f"the reference evaluator does not know {operator}")


def unescape_intrinsic(text):
    return re.sub(r"\\(.)", r"\1", text)


def intrinsic_arguments(text):
    """Split the arguments of an intrinsic call: 'strings', numbers and $.paths."""
    arguments, i = [], 0
    while i < len(text):
        if text[i] in ", ":
            i += 1
        elif text[i] == "'":
            end = i + 1
            while text[end] != "'":
                end += 2 if text[end] == "\\" else 1
            arguments.append(("string", text[i + 1 : end]))
            i = end + 1
        else:
            end = i
            while end < len(text) and text[end] != ",":
                end += 1
            arguments.append(("token", text[i:end].strip()))
            i = end
    return arguments


def format_value(value):
    return value if isinstance(value, str) else json.dumps(value)


def apply_parameters(parameters, doc):
    """What Step Functions makes of a ``Parameters`` object (the forms we emit)."""
    result = {}
    for key, value in parameters.items():
        if isinstance(value, dict):
            result[key] = apply_parameters(value, doc)
        elif not key.endswith(".$"):
            result[key] = value
        elif value.startswith("States.Format("):
            (kind, pattern), *args = intrinsic_arguments(value[len("States.Format(") : -1])
            assert kind == "string"
            values = [format_value(lookup(doc, path)) for _, path in args]
            pieces = re.split(r"(?<!\\)\{\}", pattern)
            assert len(pieces) == len(values) + 1
            text = unescape_intrinsic(pieces[0])
            for piece, item in zip(pieces[1:], values, strict=True):
                text += item + unescape_intrinsic(piece)
            result[key[:-2]] = text
        elif value.startswith("States.Array("):
            items = []
            for kind, token in intrinsic_arguments(value[len("States.Array(") : -1]):
                if kind == "string":
                    items.append(unescape_intrinsic(token))
                elif token.startswith("$"):
                    items.append(lookup(doc, token))
                else:
                    items.append(json.loads(token))
            result[key[:-2]] = items
        else:
            result[key[:-2]] = lookup(doc, value)
    return result


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("src", "path"),
    [
        ("trigger.order.id", "$.trigger.order.id"),
        ("trigger", "$.trigger"),
        ("steps.fetch.output", "$.steps.fetch.output"),
        ("trigger.items[0].sku", "$.trigger.items[0].sku"),
        ('trigger["order"].id', "$.trigger.order.id"),
        ("  (trigger.order).id ", "$.trigger.order.id"),
        ("index", "$.index"),
        ("error.Error", "$.error.Error"),
        # A caught error's Cause (and the whole error) holds Lambda's raw report: it is read
        # through a step Lambda, in its public form
        ("error.Cause", None),
        ("error", None),
        ('trigger["first-name"]', None),
        ("trigger.items[-1]", None),
        ("trigger.items[index]", None),
        ("trigger.items[0u]", None),
        ("trigger.amount + 1", None),
        ("size(trigger.items)", None),
        ("unknown.field", None),
        ("'text'", None),
        (".trigger.id", None),
    ],
)
def test_expression_jsonpath_translates_plain_paths_only(src, path):
    # Given an expression
    # When it is translated to a JSONPath
    # Then only plain paths from a root translate
    assert expression_jsonpath(src) == path


def test_expression_jsonpath_rejects_bad_syntax():
    with pytest.raises(ExpressionSyntaxError):
        expression_jsonpath("trigger.")


# --------------------------------------------------------------------------- Choice rules


def var(path, **operator):
    return {"Variable": path, **operator}


AMOUNT, COUNTRY, VIP = "$.trigger.amount", "$.trigger.country", "$.trigger.vip"

CONDITIONS = [
    ("trigger.amount > 100", var(AMOUNT, NumericGreaterThan=100)),
    ("trigger.amount >= 100", var(AMOUNT, NumericGreaterThanEquals=100)),
    ("trigger.amount < 100", var(AMOUNT, NumericLessThan=100)),
    ("trigger.amount <= 100", var(AMOUNT, NumericLessThanEquals=100)),
    ("trigger.amount == 100", var(AMOUNT, NumericEquals=100)),
    ("trigger.amount != 100", {"Not": var(AMOUNT, NumericEquals=100)}),
    ("100 < trigger.amount", var(AMOUNT, NumericGreaterThan=100)),
    ("-3 >= trigger.amount", var(AMOUNT, NumericLessThanEquals=-3)),
    ("trigger.amount > - 3", var(AMOUNT, NumericGreaterThan=-3)),
    ("trigger.score >= 2.5", var("$.trigger.score", NumericGreaterThanEquals=2.5)),
    ('trigger.country == "DE"', var(COUNTRY, StringEquals="DE")),
    ("trigger.country == 'DE'", var(COUNTRY, StringEquals="DE")),
    ('trigger.country != "DE"', {"Not": var(COUNTRY, StringEquals="DE")}),
    ('"DE" == trigger.country', var(COUNTRY, StringEquals="DE")),
    ('trigger.status < "open"', var("$.trigger.status", StringLessThan="open")),
    ('trigger.status >= "m"', var("$.trigger.status", StringGreaterThanEquals="m")),
    ('"m" > trigger.status', var("$.trigger.status", StringLessThan="m")),
    ("trigger.vip == true", var(VIP, BooleanEquals=True)),
    ("trigger.vip == false", var(VIP, BooleanEquals=False)),
    ("trigger.vip != true", {"Not": var(VIP, BooleanEquals=True)}),
    ("trigger.vip", var(VIP, BooleanEquals=True)),
    ("!trigger.vip", {"Not": var(VIP, BooleanEquals=True)}),
    ("!!trigger.vip", var(VIP, BooleanEquals=True)),
    ("trigger.coupon == null", var("$.trigger.coupon", IsNull=True)),
    ("null == trigger.coupon", var("$.trigger.coupon", IsNull=True)),
    ("has(trigger.coupon)", var("$.trigger.coupon", IsPresent=True)),
    ("!has(trigger.coupon)", {"Not": var("$.trigger.coupon", IsPresent=True)}),
    (
        'trigger.country in ["DE", "AT", "CH"]',
        {
            "Or": [
                var(COUNTRY, StringEquals="DE"),
                var(COUNTRY, StringEquals="AT"),
                var(COUNTRY, StringEquals="CH"),
            ]
        },
    ),
    (
        "trigger.amount in [50, 150]",
        {"Or": [var(AMOUNT, NumericEquals=50), var(AMOUNT, NumericEquals=150)]},
    ),
    ('trigger.status in ["open"]', var("$.trigger.status", StringEquals="open")),
    ('trigger.name.startsWith("a*b\\\\")', var("$.trigger.name", StringMatches="a\\*b\\\\*")),
    ('trigger.name.endsWith("Bob")', var("$.trigger.name", StringMatches="*Bob")),
    ('trigger.name.contains("*")', var("$.trigger.name", StringMatches="*\\**")),
    (
        'trigger.amount > 100 && trigger.country == "DE"',
        {"And": [var(AMOUNT, NumericGreaterThan=100), var(COUNTRY, StringEquals="DE")]},
    ),
    (
        'trigger.amount > 100 && (trigger.country == "DE" && trigger.vip)',
        {
            "And": [
                var(AMOUNT, NumericGreaterThan=100),
                var(COUNTRY, StringEquals="DE"),
                var(VIP, BooleanEquals=True),
            ]
        },
    ),
    (
        "trigger.amount < 0 || trigger.amount > 100 || trigger.vip",
        {
            "Or": [
                var(AMOUNT, NumericLessThan=0),
                var(AMOUNT, NumericGreaterThan=100),
                var(VIP, BooleanEquals=True),
            ]
        },
    ),
    (
        '(trigger.amount > 100 || trigger.vip) && !(trigger.country == "DE")',
        {
            "And": [
                {"Or": [var(AMOUNT, NumericGreaterThan=100), var(VIP, BooleanEquals=True)]},
                {"Not": var(COUNTRY, StringEquals="DE")},
            ]
        },
    ),
    ("!(trigger.amount != 100)", var(AMOUNT, NumericEquals=100)),
    ("((trigger.amount > 100))", var(AMOUNT, NumericGreaterThan=100)),
    ("steps.fetch.output.count > 0", var("$.steps.fetch.output.count", NumericGreaterThan=0)),
    ('trigger.items[0] == "a"', var("$.trigger.items[0]", StringEquals="a")),
    ('trigger["status"] == "open"', var("$.trigger.status", StringEquals="open")),
    ("index == 0", var("$.index", NumericEquals=0)),
    ('item.sku == "A-1"', var("$.item.sku", StringEquals="A-1")),
    # Not expressible natively: the compiler uses the condition Lambda.
    ("trigger.amount + 1 > 100", None),
    ("size(trigger.items) > 0", None),
    ("trigger.items.size() > 0", None),
    ("trigger.amount > 100 ? true : false", None),
    ("trigger.amount > trigger.score", None),
    ('trigger.country in ["DE", 1]', None),
    ("trigger.amount in [1, 2.5]", None),
    ("trigger.amount in []", None),
    ("trigger.coupon in [null]", None),
    ('"DE" in trigger.items', None),
    ("trigger.coupon != null", None),
    ("trigger.amount < null", None),
    ("trigger.vip < true", None),
    ("trigger.amount > 100u", None),
    ('trigger.name.matches("^A")', None),
    ("trigger.name.startsWith(trigger.status)", None),
    ('trigger["first-name"] == "x"', None),
    ("trigger.items[-1] == 1", None),
    ('unknown.field == "x"', None),
    ("true", None),
    ("1 == 1", None),
    ("trigger.amount > 100 && size(trigger.items) > 0", None),
    ("has(trigger)", None),
]

NATIVE = [(src, rule) for src, rule in CONDITIONS if rule is not None]


@pytest.mark.parametrize(("src", "rule"), CONDITIONS)
def test_condition_to_choice_translates_the_native_subset(src, rule):
    # Given a CEL condition
    # When it is translated
    # Then it is the expected Choice rule, or None when ASL cannot express it
    assert condition_to_choice(src) == rule


def test_choice_rules_have_a_deterministic_key_order():
    # Given the same condition translated twice
    first = condition_to_choice('trigger.amount > 1 && !(trigger.country == "DE")')
    second = condition_to_choice('trigger.amount > 1 && !(trigger.country == "DE")')

    # Then the JSON text is identical, Variable first
    assert json.dumps(first) == json.dumps(second)
    assert list(first["And"][0]) == ["Variable", "NumericGreaterThan"]


def test_condition_to_choice_rejects_bad_syntax():
    with pytest.raises(ExpressionSyntaxError):
        condition_to_choice("trigger.amount >")


ABSENT = object()
FIELDS = {
    "amount": [150, 50, 100, 100.5, -3, 0, 101, 99],
    "score": [2.5, 0.5, 3.0, 2.4999],
    "country": ["DE", "FR", "de", None, "AT", "CH"],
    "status": ["open", "closed", "pending", "m", "a"],
    "vip": [True, False, False],
    "coupon": ["X", ABSENT, None],
    "name": ["Ann", "a*b\\c", "xa*b\\", "Bob", "", "a*", "a*b\\", "*", "aXb\\z"],
    "items": [["a"], ["b", "a"], ["a", "b"]],
}


def documents():
    """Documents mixing the field values (list lengths differ, so combinations vary)."""
    for i in range(24):
        trigger = {
            name: values[i % len(values)]
            for name, values in FIELDS.items()
            if values[i % len(values)] is not ABSENT
        }
        yield {
            "run": {"id": f"r-{i}"},
            "trigger": trigger,
            "steps": {"fetch": {"output": {"count": [3, 0, 7, -1][i % 4]}}},
            "item": {"sku": ["A-1", "B-2"][i % 2]},
            "index": i % 3,
        }


def cel_outcome(src, doc):
    try:
        return evaluate_condition(src, doc)
    except ExpressionError:
        return "error"


def choice_outcome(rule, doc):
    try:
        return choice_matches(rule, doc)
    except PathMissing:
        return "error"


@pytest.mark.parametrize("src", [src for src, _ in NATIVE])
def test_choice_rule_agrees_with_cel(src):
    # Given a natively translated condition and documents with varied values
    rule = condition_to_choice(src)
    outcomes = set()
    for doc in documents():
        # When CEL and the Choice rule are both evaluated
        expected = cel_outcome(src, doc)
        actual = choice_outcome(rule, doc)

        # Then, wherever CEL gives a result, the Choice rule gives the same one
        if expected != "error":
            assert actual == expected, f"{src!r} on {doc['trigger']}"
            outcomes.add(expected)
    # And the documents exercised both branches
    assert outcomes == {True, False}, f"{src!r} was not exercised both ways"


@pytest.mark.parametrize(
    ("src", "trigger"),
    [
        ("trigger.amount > 100", {"amount": "150"}),
        ("trigger.amount == 100", {"amount": None}),
        ('trigger.country == "DE"', {"country": 49}),
        ('trigger.name.startsWith("A")', {"name": 7}),
        ("trigger.vip", {"vip": "yes"}),
    ],
)
def test_type_mismatch_is_an_error_in_cel_but_false_natively(src, trigger):
    # Given a document whose value does not have the type the literal implies
    doc = {"trigger": trigger}

    # When the condition runs in CEL and as a native Choice rule
    # Then CEL fails while the Choice rule is simply false (documented difference)
    assert cel_outcome(src, doc) == "error"
    assert choice_outcome(condition_to_choice(src), doc) is False


def test_int_against_double_literal_fails_in_celpy_but_compares_natively():
    # Given an integer value compared with a double literal
    doc = {"trigger": {"amount": 150}}
    src = "trigger.amount > 100.5"

    # When evaluated both ways
    # Then celpy has no int/double overload while ASL compares the numbers
    assert cel_outcome(src, doc) == "error"
    assert choice_outcome(condition_to_choice(src), doc) is True


def test_missing_path_fails_in_both():
    # Given a document without the compared field
    doc = {"trigger": {}}
    rule = condition_to_choice("trigger.amount > 100")

    # When evaluated both ways
    # Then both fail the run
    assert cel_outcome("trigger.amount > 100", doc) == "error"
    assert choice_outcome(rule, doc) == "error"


# --------------------------------------------------------------------------- Parameters

PARAMETER_DOC = {
    "trigger": {
        "order": {"id": "A-1", "total": 99.5, "paid": True},
        "name": "Zoë",
        "count": 3,
        "note": None,
        "items": ["x", "y"],
    },
    "steps": {"fetch": {"output": {"code": 200}}},
    "index": 2,
}

PARAMETERS = [
    ({"id": "{{ trigger.order.id }}"}, {"id.$": "$.trigger.order.id"}),
    ({"order": " {{trigger.order}} "}, {"order.$": "$.trigger.order"}),
    ({"first": "{{ trigger.items[0] }}"}, {"first.$": "$.trigger.items[0]"}),
    (
        {"a": 1, "b": "text", "c": {"d": [1, "y", None]}, "e": None, "f": True, "g": 2.5},
        {"a": 1, "b": "text", "c": {"d": [1, "y", None]}, "e": None, "f": True, "g": 2.5},
    ),
    ({"literal": "\\{{ not a placeholder }}"}, {"literal": "{{ not a placeholder }}"}),
    ({"list": ["a", {"b": "\\{{ x }}"}]}, {"list": ["a", {"b": "{{ x }}"}]}),
    (
        {"msg": "Order {{ trigger.order.id }} for {{ trigger.name }}"},
        {"msg.$": "States.Format('Order {} for {}', $.trigger.order.id, $.trigger.name)"},
    ),
    (
        {"msg": "{json} \\ {{ trigger.count }}"},
        {"msg.$": "States.Format('\\{json\\} \\\\ {}', $.trigger.count)"},
    ),
    (
        {"msg": "{{ trigger.count }}{{ index }}"},
        {"msg.$": "States.Format('{}{}', $.trigger.count, $.index)"},
    ),
    (
        {"flags": "paid={{ trigger.order.paid }} total={{ trigger.order.total }}"},
        {
            "flags.$": (
                "States.Format('paid={} total={}', $.trigger.order.paid, $.trigger.order.total)"
            )
        },
    ),
    (
        {"note": "note: {{ trigger.note }}"},
        {"note.$": "States.Format('note: {}', $.trigger.note)"},
    ),
    (
        {"ids": ["{{ trigger.order.id }}", "{{ steps.fetch.output.code }}", 3, -1, "a b"]},
        {"ids.$": ("States.Array($.trigger.order.id, $.steps.fetch.output.code, 3, -1, 'a b')")},
    ),
    (
        {"outer": {"inner": "{{ trigger.count }}", "fixed": "x"}},
        {"outer": {"inner.$": "$.trigger.count", "fixed": "x"}},
    ),
]

NOT_NATIVE = [
    "{{ trigger.order.id }}",
    ["{{ trigger.order.id }}"],
    None,
    {"a": "{{ trigger.count + 1 }}"},
    {"a": "n={{ size(trigger.items) }}"},
    {"a": "it's {{ trigger.name }}"},
    {"a.$": "$.trigger.name"},
    {"a": {"b.$": "$.trigger.name"}},
    {"a": [{"b.$": "x"}]},
    {"a": ["x {{ trigger.name }}"]},
    {"a": ["{{ trigger.name }}", True]},
    {"a": ["{{ trigger.name }}", None]},
    {"a": ["{{ trigger.name }}", {"b": 1}]},
    {"a": ["{{ trigger.name }}", "it's"]},
    {"a": ["{{ trigger.name }}", 1.5]},
    {"a": ["{{ trigger.name }}", "a{b}"]},
    {"a": ["{{ trigger.name }}", "back\\slash"]},
    {"a": '{{ trigger["first-name"] }}'},
    {"a": "{{ unknown.path }}"},
]


@pytest.mark.parametrize(("template", "parameters"), PARAMETERS)
def test_template_to_parameters_translates_paths_format_and_array(template, parameters):
    # Given a templated mapping expressible natively
    # When it is translated
    # Then it is the expected Parameters object
    assert template_to_parameters(template) == parameters


@pytest.mark.parametrize("template", NOT_NATIVE)
def test_template_to_parameters_returns_none_when_not_expressible(template):
    # Given a templated value ASL cannot produce
    # When it is translated
    # Then there is no native form
    assert template_to_parameters(template) is None


@pytest.mark.parametrize(("template", "parameters"), PARAMETERS)
def test_parameters_produce_what_render_produces(template, parameters):
    # Given a translated template
    # When Step Functions would apply the Parameters (reference evaluator)
    # Then the result equals Relayflow's own rendering
    assert apply_parameters(parameters, PARAMETER_DOC) == render(template, PARAMETER_DOC)


def test_parameters_escaping_round_trips_awkward_literals():
    # Given literal text full of characters States.Format reserves
    template = {"t": "\\\\{a} {} \\{{x}} {{ trigger.name }} }}{ \\\\"}

    # When it is translated and applied
    parameters = template_to_parameters(template)

    # Then the text survives exactly
    assert parameters is not None
    assert apply_parameters(parameters, PARAMETER_DOC) == render(template, PARAMETER_DOC)
    assert render(template, PARAMETER_DOC) == {"t": "\\\\{a} {} {{x}} Zoë }}{ \\\\"}
