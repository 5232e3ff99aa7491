"""Validation rules of the approval and waitpoint steps: each refused definition names the
path and rule; the valid shapes pass."""

from __future__ import annotations

from typing import Any

import pytest

from relayflow.validation import validate_data


def approval(**fields: Any) -> dict[str, Any]:
    step = {"type": "approval", "title": "Go?", **fields}
    return {
        "id": "wf",
        "start": "ask",
        "steps": {
            "ask": step,
            "yes": {"type": "noop"},
            "no": {"type": "noop"},
            "late": {"type": "noop"},
        },
    }


def problems(data: dict[str, Any]) -> set[tuple[str, str]]:
    _, found = validate_data(data)
    return {(p.path, p.rule) for p in found}


ROUTES = {"on_approve": "yes", "on_reject": "no", "on_failure": "late"}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"options": ["a", "b", "a"], **ROUTES}, ("steps.ask.options", "unique")),
        (
            {"options": ["a", "b"], "branches": {"a": "yes", "c": "no"}, "on_failure": "late"},
            ("steps.ask.branches.c", "approval-branch"),
        ),
        (
            {"timeout_seconds": 5, "timeout_action": "route", **ROUTES},
            ("steps.ask.on_timeout", "timeout"),
        ),
        (
            {"timeout_seconds": 5, "on_timeout": "late", "on_approve": "yes", "on_reject": "no"},
            ("steps.ask.on_timeout", "timeout"),
        ),
        (
            {
                "timeout_seconds": 5,
                "timeout_action": "approve",
                "on_reject": "no",
                "on_failure": "late",
                "branches": {"reject": "yes"},
            },
            ("steps.ask.timeout_action", "timeout"),
        ),
        ({"timeout_action": "reject", **ROUTES}, ("steps.ask.timeout_action", "timeout")),
        ({"form_schema": {"type": "nonsense"}, **ROUTES}, ("steps.ask.form_schema", "json-schema")),
        ({"retry": {"max_attempts": 2}, **ROUTES}, ("steps.ask.retry", "not-applicable")),
    ],
)
def test_a_broken_approval_is_refused_with_its_path_and_rule(fields, expected):
    assert expected in problems(approval(**fields))


@pytest.mark.parametrize(
    "fields",
    [
        ROUTES,
        {
            "timeout_seconds": 5,
            "timeout_action": "approve",
            "on_failure": "late",
            "branches": {"approve": "yes", "reject": "no"},
        },
        {
            "timeout_seconds": 5,
            "timeout_action": "route",
            "on_timeout": "late",
            "on_approve": "yes",
            "on_reject": "no",
        },
    ],
)
def test_valid_approvals_pass(fields):
    assert problems(approval(**fields)) == set()


def test_a_waitpoint_on_timeout_needs_a_timeout():
    data = {
        "id": "wf",
        "start": "wait",
        "steps": {"wait": {"type": "waitpoint", "on_timeout": "late"}, "late": {"type": "noop"}},
    }
    assert ("steps.wait.on_timeout", "timeout") in problems(data)
    data["steps"]["wait"]["timeout_seconds"] = 10
    assert problems(data) == set()
