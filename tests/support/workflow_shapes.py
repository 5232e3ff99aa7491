"""Workflow shapes that tests and benches both build: the same definition asserted on in a
test and measured in ``bench/``."""

from __future__ import annotations

from typing import Any


def nested_parallels(depth: int) -> dict[str, Any]:
    """``p0`` runs ``p1`` beside a leaf, ``p1`` runs ``p2`` beside a leaf, …, ``depth`` deep;
    the innermost branch reads an output written before the outermost parallel."""
    steps: dict[str, Any] = {
        "seed": {"type": "transform", "mapping": {"v": "{{ trigger.x }}"}, "on_success": "p0"}
    }
    for d in range(depth):
        inner = f"p{d + 1}" if d + 1 < depth else "deepest"
        steps[f"p{d}"] = {"type": "parallel", "branches": [inner, f"leaf{d}"]}
        steps[f"leaf{d}"] = {"type": "transform", "mapping": {"v": "{{ trigger.x }}"}}
    steps["deepest"] = {"type": "transform", "mapping": {"v": "{{ steps.seed.output.v }}"}}
    steps["p0"]["on_success"] = "after"
    steps["after"] = {"type": "transform", "mapping": {"v": "{{ steps.leaf0.output.v }}"}}
    return steps


def priced(**extra: Any) -> dict[str, Any]:
    """``priced``: ``double`` (transform) → ``each`` (for_each of ``trigger.items``, at most 5,
    running ``price`` per item) → ``done``; ``extra`` top-level fields (``engine=…``) come
    right after the id. Compiles to double (Lambda) → each.size → each.check → each (Map:
    price, a Lambda) → done, whose transitions and invocations cost tests count by hand."""
    return {
        "id": "priced",
        **extra,
        "start": "double",
        "steps": {
            "double": {
                "type": "transform",
                "mapping": {"n": "{{ trigger.n * 2 }}"},
                "on_success": "each",
            },
            "each": {
                "type": "for_each",
                "items": "{{ trigger.items }}",
                "step": "price",
                "max_items": 5,
                "on_success": "done",
            },
            "price": {"type": "transform", "mapping": {"p": "{{ item * 3 }}"}},
            "done": {"type": "noop"},
        },
    }


def routing_retry_loop(workflow_id: str, kind: str) -> str:
    """YAML of ``count`` → ``check`` → back to ``count`` (or on to ``done``), where ``check``
    is a routing step of ``kind`` (``condition`` on ``trigger.n > 0``, or ``custom`` asking
    ``https://decider.example.com/route``) with a linear retry: a retry on a cycle."""
    routing = {
        "condition": """    type: condition
    expression: "trigger.n > 0"
    retry: {max_attempts: 2, backoff: linear, base_seconds: 1}
    on_true: count
    on_false: done
""",
        "custom": """    type: custom
    url: https://decider.example.com/route
    retry: {max_attempts: 2, backoff: linear, base_seconds: 1}
    branches: {again: count}
    on_success: done
""",
    }[kind]
    return f"""
id: {workflow_id}
start: count
steps:
  count: {{type: noop, on_success: check}}
  check:
{routing}  done: {{type: noop}}
"""


def long_waitpoint(workflow_id: str) -> dict[str, Any]:
    """A workflow that waits at one waitpoint (``wait``) for ten minutes."""
    return {
        "id": workflow_id,
        "start": "wait",
        "steps": {"wait": {"type": "waitpoint", "timeout_seconds": 600}},
    }


def webhook_echo(workflow_id: str, slug: str) -> dict[str, Any]:
    """A workflow whose one step (``echo``) outputs ``{"got": <trigger>}``, started by the
    webhook ``slug``."""
    return {
        "id": workflow_id,
        "start": "echo",
        "steps": {"echo": {"type": "transform", "mapping": {"got": "{{ trigger }}"}}},
        "triggers": [{"type": "webhook", "slug": slug}],
    }


#: ``one`` → ``two`` → ``three`` transforms: step-through pauses before each (at callback
#: gates, which only Standard machines have: engines.md).
THREE_STEPS: dict[str, Any] = {
    "id": "three",
    "engine": "standard",
    "start": "one",
    "steps": {
        "one": {"type": "transform", "mapping": {"n": 1}, "on_success": "two"},
        "two": {"type": "transform", "mapping": {"n": 2}, "on_success": "three"},
        "three": {"type": "transform", "mapping": {"n": 3}},
    },
}
