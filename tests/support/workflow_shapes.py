"""Workflow shapes that more than one test module (or a test and a bench) build: the same
definition asserted on in several places, or asserted on in a test and measured in ``bench/``."""

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


#: A cycle a → b → a whose header ``a`` fails (a string times two) into ``b``, in the cycle,
#: under a step limit of 3.
LOOPING_ROUTE: dict[str, Any] = {
    "id": "loop-route",
    "start": "a",
    "max_steps_per_run": 3,
    "steps": {
        "a": {
            "type": "transform",
            "mapping": "{{ trigger.count * 2 }}",
            "on_success": "b",
            "on_failure": "b",
        },
        "b": {"type": "condition", "expression": "trigger.flag", "on_true": "a"},
    },
}


#: A child that fails natively (no Lambda): two items for a for_each that allows one.
FAILING_CHILD = """
id: failing-child
start: each
steps:
  each: {type: for_each, items: "{{ trigger.items }}", step: one, max_items: 1}
  one: {type: noop}
"""


def refund_approval(workflow_id: str, **ask: Any) -> dict[str, Any]:
    """``ask``, an approval with the fields ``ask`` (title, prompt, timeout, form…), goes on to
    ``pay`` (``{"refunded": true}``) when approved and ``keep`` (``{"refunded": false}``) when
    rejected."""
    return {
        "id": workflow_id,
        "start": "ask",
        "steps": {
            "ask": {"type": "approval", **ask, "on_approve": "pay", "on_reject": "keep"},
            "pay": {"type": "transform", "mapping": {"refunded": True}},
            "keep": {"type": "transform", "mapping": {"refunded": False}},
        },
    }


def charging(
    url: str, receipt: dict[str, Any], on_error: Any = None, **charge: Any
) -> dict[str, Any]:
    """``charging``: ``charge`` (a webhook_out to ``<url>/charge`` with the fields ``charge``)
    handles its failure by ``on_error`` (parking the run unless told), then ``receipt``
    outputs the mapping ``receipt``."""
    return {
        "id": "charging",
        "start": "charge",
        "steps": {
            "charge": {
                "type": "webhook_out",
                "url": f"{url}/charge",
                **charge,
                "on_error": {"action": "park"} if on_error is None else on_error,
                "on_success": "receipt",
            },
            "receipt": {"type": "transform", "mapping": receipt},
        },
    }


def kind_dispatch(
    workflow_id: str = "dispatch", *, missing: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``route`` runs the sub-workflow ``<trigger.kind>-handler`` with ``{"kind": …}``; with
    ``missing``, a failure of ``route`` goes on to the step ``missing`` (that definition)."""
    route: dict[str, Any] = {
        "type": "sub_workflow",
        "workflow_id": "{{ trigger.kind }}-handler",
        "input": {"kind": "{{ trigger.kind }}"},
    }
    steps: dict[str, Any] = {"route": route}
    if missing is not None:
        route["on_failure"] = "missing"
        steps["missing"] = missing
    return {"id": workflow_id, "start": "route", "steps": steps}


def soft_failure(done: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """``soft``: ``boom`` (a code step) raises, and its ``on_error: continue`` fallback outputs
    ``{"price": 0}`` before ``done`` (that step); ``extra`` top-level fields follow ``start``."""
    return {
        "id": "soft",
        "start": "boom",
        **extra,
        "steps": {
            "boom": {
                "type": "code",
                "code": "raise ValueError('no stock')",
                "timeout_seconds": 10,
                "retry": "none",
                "on_error": {"action": "continue", "output": {"price": 0}},
                "on_success": "done",
            },
            "done": done,
        },
    }


def two_transforms(workflow_id: str) -> dict[str, Any]:
    """``one`` (``{"n": 1}``) → ``two`` (``{"n": 2}``): two transforms."""
    return {
        "id": workflow_id,
        "start": "one",
        "steps": {
            "one": {"type": "transform", "mapping": {"n": 1}, "on_success": "two"},
            "two": {"type": "transform", "mapping": {"n": 2}},
        },
    }
