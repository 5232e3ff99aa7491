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
