"""The JSON intake policy (relayflow.intake) and the places that apply it without a server:
definition files, the CLI's input files, the guest form's fields, webhook payloads."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relayflow.cli.main import main
from relayflow.definition.loader import parse_text
from relayflow.intake import (
    MAX_DEPTH,
    MAX_INTEGER_DIGITS,
    IntakeError,
    check_value,
    check_yaml,
    loads,
)

NOOP = "id: ok\nstart: a\nsteps:\n  a: {type: noop}\n"
#: A few hundred bytes of YAML (the issue's was 652) that expand to 9**9 (387 million) nodes for
#: any pass that follows aliases.
ALIAS_BOMB = NOOP + "bomb:\n" + 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
ALIAS_BOMB += "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
)


def nested_json(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


# ----------------------------------------------------------------------------- the policy


@pytest.mark.parametrize(
    ("text", "path", "rule"),
    [
        ('{"a": NaN}', "a", "non-finite-number"),
        ('{"a": {"b": [1, -Infinity]}}', "a.b[1]", "non-finite-number"),
        ('{"x": 1e999}', "x", "non-finite-number"),
        ('{"x": -1e999}', "x", "non-finite-number"),
        ('{"x": 1e-999}', "", None),  # underflows to 0.0: a number DynamoDB holds
        ('{"x": 1e300}', "x", "number-range"),
        ('{"x": 4.9e-324}', "x", "number-range"),
        ('{"n": ' + "9" * (MAX_INTEGER_DIGITS + 1) + "}", "n", "number-range"),
        ('{"n": ' + "9" * 5000 + "}", "n", "number-range"),  # int() alone raises ValueError
        ('{"s": "\\ud800"}', "s", "lone-surrogate"),
        ('{"\\udfff": 1}', "", "lone-surrogate"),
        ('{"a b": {"' + "k" * 1025 + '": 1}}', '["a b"]', "key-length"),
        ('{"data": {"": 1}}', "data", "key-length"),  # poisoned a stored waitpoint
    ],
)
def test_refusals_name_the_path_and_the_rule(text, path, rule):
    if rule is None:
        loads(text)
        return
    with pytest.raises(IntakeError) as caught:
        loads(text)
    assert (caught.value.path, caught.value.rule) == (path, rule)
    assert caught.value.message.startswith(f"{path}: " if path else "")


def test_what_the_policy_accepts_comes_back_unchanged():
    text = '{"n": [0, -0.0, 1.5, 99999999999999999999999999999999999999], "s": "nul\\u0000é"}'
    assert loads(text) == json.loads(text)


def test_the_depth_limit_is_exact_and_named():
    # Given JSON exactly at the limit, one level past it, and 100,000 levels past it
    loads(nested_json(MAX_DEPTH))
    for depth in (MAX_DEPTH + 1, 100_000):
        with pytest.raises(IntakeError) as caught:
            loads(nested_json(depth))
        assert caught.value.rule == "depth" and caught.value.status == 400
        assert f"limit of {MAX_DEPTH} levels" in caught.value.message


def test_refusals_of_unreadable_text_are_400_and_of_values_422():
    assert IntakeError("depth", "", "x").status == 400
    assert IntakeError("lone-surrogate", "", "x").status == 400
    assert IntakeError("encoding", "", "x").status == 400
    assert IntakeError("non-finite-number", "", "x").status == 422
    assert IntakeError("number-range", "", "x").status == 422
    with pytest.raises(IntakeError, match="byte 1 is invalid") as caught:
        loads(b'"\xff"')
    assert caught.value.rule == "encoding"


def test_every_reader_downstream_handles_the_deepest_accepted_value():
    """The limit was chosen with margin for each later reader: check it against them."""
    from relayflow.dal.codec import deserialize, serialize
    from relayflow.expressions.cel import evaluate

    deepest = json.loads(nested_json(MAX_DEPTH - 1))  # the most a body's field can carry
    # DynamoDB keeps an approval's data at decision.data: 2 more levels, 32 at most
    item = serialize({"decision": {"data": deepest}})
    assert deserialize(item) == {"decision": {"data": deepest}}
    assert MAX_DEPTH + 2 <= 32
    # CEL reads it; json and pydantic write it
    assert evaluate("size(trigger) == 1", {"trigger": deepest}) is True
    assert json.loads(json.dumps(deepest)) == deepest


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.integers() | st.text(),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
        max_leaves=10,
    )
)
def test_loads_either_refuses_or_returns_what_json_reads(value):
    text = json.dumps(value)
    try:
        accepted = loads(text)
    except IntakeError as exc:
        assert exc.rule in {"non-finite-number", "number-range", "depth", "key-length"}
    else:
        assert accepted == json.loads(text)
        check_value(accepted)


# ----------------------------------------------------------------------------- YAML


def test_a_yaml_alias_bomb_is_refused_before_anything_expands_it():
    # Given an alias bomb like the one that hung validate, compile and run
    assert len(ALIAS_BOMB.encode()) < 700
    started = time.process_time()
    document = parse_text(ALIAS_BOMB, "bomb.yaml")
    # Then it is one problem, found on the event stream (CPU time, not a wall-clock budget)
    assert [(p.rule, p.path) for p in document.problems] == [("yaml-alias", "a")]
    assert document.data is None
    assert time.process_time() - started < 5


def test_an_anchor_alone_is_refused_too():
    with pytest.raises(IntakeError) as caught:
        check_yaml("a: &x 1\nb: 2\n")
    assert caught.value.rule == "yaml-alias" and "line 1" in caught.value.message


@pytest.mark.parametrize("style", ["block", "flow"])
def test_yaml_nested_past_the_limit_names_the_path(style):
    if style == "block":
        text = "".join("  " * i + f"k{i}:\n" for i in range(40)) + "  " * 40 + "v: 1\n"
    else:
        text = "top: " + nested_json(300)
    document = parse_text(text, "deep.yaml")
    (problem,) = document.problems
    assert problem.rule == "depth" and f"limit of {MAX_DEPTH} levels" in problem.message
    assert problem.path.startswith("k0.k1.k2" if style == "block" else "top[0][0]")


def test_yaml_nested_past_libyamls_own_limit_is_the_same_refusal():
    # libyaml stops at 1,000 levels before it emits the 25th: no path, the same rule
    (problem,) = parse_text("top: " + nested_json(10_000), "deep.yaml").problems
    assert problem.rule == "depth" and f"limit of {MAX_DEPTH} levels" in problem.message


def test_yaml_non_finite_numbers_are_problems_with_paths():
    document = parse_text(NOOP + "triggers:\n  - {type: cron, cron: '* * * * *', x: .nan}\n", "f")
    assert [(p.path, p.rule) for p in document.problems] == [("triggers[0].x", "non-finite-number")]


# ----------------------------------------------------------------------------- the CLI


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "ok.yaml").write_text(NOOP)
    (tmp_path / "bomb.yaml").write_text(ALIAS_BOMB)
    (tmp_path / "latin1.yaml").write_bytes(NOOP.encode() + b"# caf\xe9\n")
    deep = '{"id": "deep", "start": "a", "steps": {"a": {"type": "transform", "mapping": '
    for name, depth in (("deep.json", 10_000), ("deep.yaml", 10_000), ("300.json", 300)):
        mapping = '{"a": ' * depth + "1" + "}" * depth
        (tmp_path / name).write_text(deep + mapping + "}}}")
    (tmp_path / "deep-input.json").write_text(nested_json(10_000))
    (tmp_path / "nan-input.json").write_text('{"total": NaN}')
    (tmp_path / "inf-input.json").write_text('{"total": [1, -1e999]}')
    (tmp_path / "latin1-input.json").write_bytes(b'{"name": "caf\xe9"}')
    return tmp_path


@pytest.mark.parametrize("command", ["validate", "compile", "graph", "run"])
@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("bomb.yaml", "yaml-alias"),
        ("latin1.yaml", "encoding"),
        ("deep.json", "depth"),
        ("deep.yaml", "depth"),
        ("300.json", "depth"),
    ],
)
def test_every_file_command_exits_2_with_a_short_reason(files, capsys, command, name, rule):
    status = main([command, str(files / name)])
    out, err = capsys.readouterr()
    assert status == 2
    assert "Traceback" not in out + err and "States" not in out + err
    assert f"[{rule}]" in err
    assert len(err.splitlines()) <= 2 and max(len(line) for line in err.splitlines()) < 400


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("deep-input.json", "depth"),
        ("nan-input.json", "non-finite-number"),
        ("inf-input.json", "non-finite-number"),
        ("latin1-input.json", "encoding"),
    ],
)
def test_a_bad_input_file_exits_2_in_one_line(files, capsys, name, rule):
    status = main(["run", str(files / "ok.yaml"), "--input", f"@{files / name}"])
    _, err = capsys.readouterr()
    assert status == 2
    assert err.count("\n") == 1 and f"[{rule}]" in err and err.startswith("relayflow: --input")


def test_compile_to_an_unwritable_output_exits_2_in_one_line(files, capsys):
    status = main(["compile", str(files / "ok.yaml"), "-o", str(files / "no" / "such.json")])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and "No such file or directory" in err and "States" not in err


def test_a_resources_file_with_an_alias_bomb_exits_2(files, capsys):
    (files / "res.yaml").write_text(ALIAS_BOMB.replace(NOOP, "s3_buckets: []\n"))
    status = main(["run", str(files / "ok.yaml"), "--resources", str(files / "res.yaml")])
    _, err = capsys.readouterr()
    assert status == 2 and err.count("\n") == 1 and "aliases" in err


# ----------------------------------------------------------------------------- other bodies


def test_a_webhook_payload_the_policy_refuses_is_a_4xx_and_text_stays_raw():
    from relayflow.control.errors import BadRequest, Unprocessable
    from relayflow.control.webhook_intake import parse_payload

    assert parse_payload(b"order=1042&paid=yes") == {"raw": "order=1042&paid=yes"}
    assert parse_payload(b'{"total": 12.5}') == {"total": 12.5}
    with pytest.raises(Unprocessable) as value:
        parse_payload(b'{"total": NaN}')
    assert value.value.details[0]["path"] == "body.total"
    with pytest.raises(BadRequest, match=f"limit of {MAX_DEPTH} levels"):
        parse_payload(nested_json(300).encode())


@pytest.mark.parametrize(
    ("schema", "raw", "reason"),
    [
        # As the API's intake: 38 digits at most, counted before int() meets the text
        ({"type": "integer"}, "9" * 5000, "an integer of 5000 digits is longer than 38 digits"),
        ({"type": "number"}, "1e300", "outside the range"),
        ({"type": "object"}, '{"a": NaN}', "not a finite number"),
        ({"type": "object"}, '{"a": "\\ud800"}', "lone UTF-16 surrogate"),
        ({"type": "object"}, nested_json(MAX_DEPTH), f"limit of {MAX_DEPTH} levels"),
    ],
)
def test_the_guest_forms_fields_keep_to_the_policy(schema, raw, reason):
    from relayflow.api.approval_page import FormError, form_to_data

    form_schema = {"type": "object", "properties": {"x": {**schema, "title": "X"}}}
    with pytest.raises(FormError) as caught:
        form_to_data(form_schema, {"f.x": [raw]})
    assert any(reason in problem for problem in caught.value.problems), caught.value.problems
