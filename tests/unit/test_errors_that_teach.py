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
