"""Validation of the run admission settings and ``cancel_on`` (docs/flow-control.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from relayflow.control.admission import Rules, render_key
from relayflow.control.errors import Unprocessable
from relayflow.definition.admission import parse_duration
from relayflow.validation import validate_data

BASE: dict[str, Any] = {"id": "wf", "start": "a", "steps": {"a": {"type": "noop"}}}


def problems(**fields: Any) -> set[str]:
    data = {**copy.deepcopy(BASE), **fields}
    workflow, found = validate_data(data, "wf.yaml")
    assert workflow is None
    return {f"{p.path}: {p.message}" for p in found}


def test_every_rule_is_accepted_with_durations_as_text_or_seconds():
    data = {
        **BASE,
        "concurrency": {"limit": 3, "key": "{{ trigger.account }}"},
        "debounce": {"key": "{{ trigger.order }}", "period": "30s", "max_wait": "5m"},
        "cancel_on": [{"event": "order.cancelled", "match": "event.detail.id == trigger.id"}],
    }
    workflow, found = validate_data(data, "wf.yaml")
    assert found == [] and workflow is not None
    assert (workflow.debounce.period, workflow.debounce.max_wait) == (30, 300)
    rules = Rules.of(workflow.model_dump(mode="json"))
    assert rules.concurrency == {"limit": 3, "key": "{{ trigger.account }}"}
    assert rules.singleton is None and rules.batch is None


@pytest.mark.parametrize(
    ("fields", "path", "words"),
    [
        ({"debounce": {"period": "30 minutes"}}, "debounce.period", "not a duration"),
        ({"debounce": {"period": 60, "max_wait": 30}}, "debounce", "at least the period"),
        ({"singleton": {"mode": "queue"}}, "singleton.mode", "skip"),
        ({"concurrency": {"limit": 0}}, "concurrency.limit", "greater than or equal to 1"),
        ({"batch": {"max_size": 1}}, "batch.max_size", "greater than or equal to 2"),
        ({"singleton": {"key": "{{ trigger.x"}}, "singleton.key", "invalid template"),
        ({"cancel_on": [{"event": "x", "match": "a =="}]}, "cancel_on[0]", "not valid CEL"),
        (
            {"singleton": {}, "concurrency": {"limit": 2}},
            "",
            "singleton and concurrency exclude each other",
        ),
        ({"debounce": {"period": 5}, "batch": {}}, "", "debounce and batch exclude each other"),
    ],
)
def test_a_bad_setting_is_refused_naming_its_path(fields, path, words):
    found = problems(**fields)
    assert any(p.startswith(f"{path}:" if path else "") and words in p for p in found), found


def test_durations():
    assert [parse_duration(v) for v in (45, "45", "45s", "2m", "1h", "1d")] == [
        45,
        45,
        45,
        120,
        3600,
        86_400,
    ]
    with pytest.raises(ValueError, match="number of seconds"):
        parse_duration(True)


def test_keys_render_from_the_trigger_and_a_bad_one_names_the_rule():
    assert render_key("{{ trigger.order }}", {"order": "o-1"}, "debounce") == "o-1"
    assert render_key("{{ trigger.n }}", {"n": 7}, "debounce") == "7"
    assert render_key("static", {}, "batch") == "static"
    with pytest.raises(Unprocessable, match=r"singleton\.key"):
        render_key("{{ trigger.missing.deeper }}", {}, "singleton")
