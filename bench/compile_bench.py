"""Validate + compile time for generated workflows of 10, 100 and 1,000 steps.

Prints milliseconds (best of N) and the growth ratio between sizes. Linear growth would be
10× per 10× steps; the goal is 1,000 steps in under 1 s. Run: ``make bench`` or
``.venv/bin/python bench/compile_bench.py``.
"""

from __future__ import annotations

import time
from typing import Any

from relayflow.compiler import compile_workflow
from relayflow.validation import validate_data


def generated(n: int) -> dict[str, Any]:
    """A realistic mix: transforms (native and Lambda), conditions, delays, a for_each and a
    parallel every 10 steps, and a loop back every 50 steps."""
    steps: dict[str, Any] = {}
    keys = [f"s{i}" for i in range(n)]
    i = 0
    while i < n:
        key, nxt = keys[i], (keys[i + 1] if i + 1 < n else None)
        kind = i % 10
        if kind == 0:
            steps[key] = {"type": "transform", "mapping": {"v": f"{{{{ trigger.x }}}}-{i}"}}
        elif kind == 1:
            steps[key] = {"type": "condition", "expression": f"trigger.n > {i}", "on_true": nxt}
            if nxt is None:
                steps[key]["on_true"] = None
                steps[key]["on_false"] = keys[0]
            else:
                steps[key]["on_false"] = nxt
        elif kind == 2:
            steps[key] = {"type": "transform", "mapping": {"sum": "{{ trigger.n + 1 }}"}}
        elif kind == 3:
            steps[key] = {"type": "delay", "seconds": 1}
        elif kind == 4 and i + 1 < n:
            steps[key] = {"type": "for_each", "items": "{{ trigger.items }}", "step": f"{key}_item"}
            steps[f"{key}_item"] = {"type": "transform", "mapping": {"i": "{{ item }}"}}
        elif kind == 5 and i + 1 < n:
            steps[key] = {"type": "parallel", "branches": [f"{key}_a", f"{key}_b"]}
            steps[f"{key}_a"] = {"type": "noop"}
            steps[f"{key}_b"] = {"type": "transform", "mapping": {"b": "{{ trigger.x }}"}}
        elif i % 50 == 49:
            steps[key] = {
                "type": "condition",
                "expression": f"trigger.n < {i}",
                "on_true": keys[i - 40],
                "on_false": nxt,
            }
        else:
            steps[key] = {"type": "noop"}
        if nxt and steps[key]["type"] != "condition":
            steps[key]["on_success"] = nxt
        i += 1
    steps = {k: {kk: vv for kk, vv in v.items() if vv is not None} for k, v in steps.items()}
    return {"id": f"bench-{n}", "start": keys[0], "steps": steps}


def best_ms(data: dict[str, Any], repeat: int) -> tuple[float, float, int]:
    """(first run, best run, state count). Expression parses are cached, so the first run
    of each size is the cold figure a fresh process (a Lambda cold start) sees."""
    best = float("inf")
    first = None
    states = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        workflow, problems = validate_data(data)
        assert workflow is not None, problems[:3]
        compiled = compile_workflow(workflow)
        elapsed = (time.perf_counter() - t0) * 1000
        first = elapsed if first is None else first
        best = min(best, elapsed)
        states = len(compiled.asl["States"])
    return first or best, best, states


def main() -> None:
    print("validate + compile: cold = first run (expression caches empty), warm = best of 5")
    header = f"{'steps':>6} {'states':>7} {'cold ms':>9} {'growth':>7} {'warm ms':>9} {'growth':>7}"
    print(header)
    previous = None
    previous_warm = None
    for n in (10, 100, 1000):
        data = generated(n)
        total_steps = len(data["steps"])
        cold, warm, states = best_ms(data, repeat=5)
        growth = f"{cold / previous:.1f}x" if previous else "-"
        growth_warm = f"{warm / previous_warm:.1f}x" if previous_warm else "-"
        print(
            f"{total_steps:>6} {states:>7} {cold:>9.2f} {growth:>7} {warm:>9.2f} {growth_warm:>7}"
        )
        previous, previous_warm = cold, warm
    print("goal: 1,000 steps under 1,000 ms, growth close to 10x per 10x steps")


if __name__ == "__main__":
    main()
