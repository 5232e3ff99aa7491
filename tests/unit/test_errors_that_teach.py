"""Refusals that teach: each typical mistake is named at its path, with what is allowed and,
where one is near, the fix (issue 41's corpus, the part landed so far)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from relayflow.validation import validate_data

BASE: dict[str, Any] = {
    "id": "orders",
    "start": "charge",
    "steps": {
        "charge": {
            "type": "webhook_out",
            "url": "https://pay.example.com/charges",
            "on_success": "check",
        },
        "check": {"type": "condition", "expression": "trigger.total > 100", "on_true": "notify"},
        "notify": {"type": "transform", "mapping": {"ok": True}},
    },
}


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = data
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    if value is _DELETE:
        node.pop(last)
    else:
        node[last] = value


_DELETE = object()

CASES = [
    # (what is changed, the path reported, words the message must hold)
    ({"start": "chrage"}, "start", ["'chrage'", "did you mean 'charge'"]),
    ({"steps.charge.on_success": "chek"}, "steps.charge.on_success", ["did you mean 'check'"]),
    ({"steps.check.on_true": "notfy"}, "steps.check.on_true", ["did you mean 'notify'"]),
    ({"steps.charge.retyr": "none"}, "steps.charge.retyr", ["unknown field", "'retry'"]),
    ({"steps.charge.urll": "https://x.example"}, "steps.charge.urll", ["did you mean 'url'"]),
    ({"steps.charge.method": "PSOT"}, "steps.charge.method", ["'POST'", "'GET'"]),
    ({"steps.check.on_success": "notify"}, "steps.check.on_success", ["on_true", "on_false"]),
    ({"steps.check.expression": "trigger.total = 100"}, "steps.check.expression", ["=="]),
    ({"id": "Orders"}, "id", ["lower-case", "write 'orders'"]),
    ({"id": "my orders"}, "id", ["write 'my-orders'"]),
    (
        {"steps.notify.mapping": {"x": "{{ steps.chrage.output }}"}},
        "steps.notify.mapping",
        ["did you mean 'charge'"],
    ),
    (
        {"triggers": [{"type": "cron", "cron": "0 9 * * *", "timezone": "Europe/Berlinn"}]},
        "triggers[0].timezone",
        ["did you mean 'Europe/Berlin'"],
    ),
    (
        {"triggers": [{"type": "cron", "schedule": "0 9 * * *"}]},
        "triggers[0].schedule",
        ["unknown field 'schedule'", "cron"],
    ),
    (
        {"triggers": [{"type": "cron", "schedule": "0 9 * * *"}]},
        "triggers[0].cron",
        ["missing required field 'cron'"],
    ),
    (
        {"triggers": [{"type": "webhook", "slug": "orders-in", "secret": "whsec_123"}]},
        "triggers[0].secret",
        ["{name: <secret name>}", "not its value"],
    ),
    ({"errors": {"on_failure": "notfy"}}, "errors.on_failure", ["did you mean 'notify'"]),
    ({"steps.notify.type": "transfrom"}, "steps.notify", ["did you mean 'transform'"]),
    ({"steps.notify.type": _DELETE}, "steps.notify", ["missing field 'type'", "transform"]),
    (
        {"triggers": [{"type": "crno", "cron": "0 9 * * *"}]},
        "triggers[0]",
        ["did you mean 'cron'"],
    ),
    (
        {"steps.notify": {"type": "tool", "tool": "aws.dynamodb.put_itme", "args": {}}},
        "steps.notify.tool",
        ["did you mean 'aws.dynamodb.put_item'"],
    ),
    (
        {
            "steps.notify": {
                "type": "tool",
                "tool": "aws.dynamodb.get_item",
                "args": {"tabel": "app-t", "key": {"pk": "x"}},
            }
        },
        "steps.notify.args.tabel",
        ["did you mean 'table'"],
    ),
    (
        {"steps.notify.mapping": {"n": "{{ siz(trigger.items) }}"}},
        "steps.notify.mapping",
        ["did you mean 'size'"],
    ),
    (
        {"steps.notify.mapping": {"n": "{{ trigerr.items }}"}},
        "steps.notify.mapping",
        ["did you mean 'trigger'"],
    ),
    ({"steps.check.expression": "trigerr.total > 1"}, "steps.check.expression", ["'trigger'"]),
    ({"steps.charge.method": "post"}, "steps.charge.method", ["did you mean 'POST'"]),
    (
        {"steps.charge.on_error": {"action": "contineu"}},
        "steps.charge.on_error",
        ["did you mean 'continue'"],
    ),
    ({"engine": "expres"}, "engine", ["did you mean 'express'"]),
    (
        {"steps.charge.retry": {"max_attempts": 3, "backoff": "expontial"}},
        "steps.charge.retry.backoff",
        ["did you mean 'exponential'"],
    ),
    ({"stpes": {}}, "stpes", ["did you mean 'steps'"]),
    (
        {"steps.charge.retry": {"max_attempts": 0}},
        "steps.charge.retry.max_attempts",
        ["greater than or equal to 1"],
    ),
    (
        {"steps.charge.on_succes": "check"},
        "steps.charge.on_succes",
        ["did you mean 'on_success'"],
    ),
    (
        {"triggers": [{"type": "cron", "cron": "@daily"}]},
        "triggers[0].cron",
        ["'0 0 * * *'"],
    ),
    (
        {
            "start": "each",
            "steps.each": {"type": "for_each", "items": "{{ trigger.items }}", "step": "ask"},
            "steps.ask": {"type": "approval", "title": "ok?"},
        },
        "steps.each.step",
        ["sub_workflow", "approval"],
    ),
    (
        {"triggers": [{"type": "cron", "cron": "0 9 * * *", "overlpa": "skip"}]},
        "triggers[0].overlpa",
        ["did you mean 'overlap'"],
    ),
    (
        {"steps.charge.timeout_seconds": "30s"},
        "steps.charge.timeout_seconds",
        ["whole number", "write 30"],
    ),
    ({"id": "orders!"}, "id", ["lower-case letters, digits"]),
    (
        {"steps.check.on_true": "Notify"},
        "steps.check.on_true",
        ["did you mean 'notify'"],
    ),
]


@pytest.mark.parametrize(("changes", "path", "words"), CASES, ids=[c[1] for c in CASES])
def test_a_typical_mistake_is_named_with_the_fix(changes, path, words):
    data = copy.deepcopy(BASE)
    for where, value in changes.items():
        _set(data, where, value)
    _, problems = validate_data(data)
    at_path = [p for p in problems if p.path == path]
    assert at_path, [(p.path, p.message) for p in problems]
    message = " ".join(p.message for p in at_path)
    missing = [w for w in words if w not in message]
    assert not missing, message
    # And no message leaks pydantic's own layer
    leaked = [p.message for p in problems if "Input should be" in p.message]
    leaked += [p.message for p in problems if "Extra inputs" in p.message]
    assert not leaked


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "id: bad\nstart: a\nsteps:\n  a:\n    type: noop\n   on_success: b\n",
            ["line 6", "   on_success: b", "^", "indentation"],
        ),
        ("id: bad\nstart: a\nsteps: [\n", ["invalid YAML", "^"]),
        ("id: bad\nstart: a\nsteps:\n  a: {type: noop\n", ["invalid YAML", "^"]),
    ],
    ids=["indentation", "open-list", "open-mapping"],
)
def test_a_yaml_slip_shows_the_line_and_a_caret(text, words):
    from relayflow.definition.problems import DefinitionError
    from relayflow.validation import load_workflow_text

    with pytest.raises(DefinitionError) as refused:
        load_workflow_text(text, "flow.yaml")
    (problem,) = [p for p in refused.value.problems if p.rule == "syntax"]
    rendered = f"{problem.path}: {problem.message}"
    assert not [w for w in words if w not in rendered], rendered
