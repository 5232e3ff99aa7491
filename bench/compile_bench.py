"""Validate + compile time for generated workflows of 10, 100 and 1,000 steps.

Prints milliseconds (the first run and the best of N), as wall time and as CPU time of the
process, and the growth ratio of the CPU time between sizes. Linear growth would be
10× per 10× steps; the goal is 1,000 steps in under 1 s. Run: ``make bench`` or
``.venv/bin/python bench/compile_bench.py``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Timing:
    """Milliseconds of one size: the first run's and the best run's, as wall and CPU time."""

    cold_wall: float
    cold_cpu: float
    warm_wall: float
    warm_cpu: float
    states: int


def best_ms(data: dict[str, Any], repeat: int) -> Timing:
    """The first run and the best of ``repeat``. Expression parses are cached, so the first
    run of each size is the cold figure a fresh process (a Lambda cold start) sees."""
    walls: list[float] = []
    cpus: list[float] = []
    states = 0
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        workflow, problems = validate_data(data)
        assert workflow is not None, problems[:3]
        compiled = compile_workflow(workflow)
        walls.append((time.perf_counter() - wall) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
        states = len(compiled.asl["States"])
    return Timing(walls[0], cpus[0], min(walls), min(cpus), states)


def _growth(now: float, before: float | None) -> str:
    return f"{now / before:.1f}x" if before else "-"


def main() -> None:
    print("validate + compile: cold = first run (expression caches empty), warm = best of 5")
    print(
        "figures: wall ms = wall time, cpu ms = CPU time of the process; growth = ratio of CPU "
        "time to the size before (CPU is the steadier figure on a shared machine)"
    )
    header = (
        f"{'steps':>6} {'states':>7} {'cold wall ms':>13} {'cold cpu ms':>12} {'growth':>7} "
        f"{'warm wall ms':>13} {'warm cpu ms':>12} {'growth':>7}"
    )
    print(header)
    previous: Timing | None = None
    for n in (10, 100, 1000):
        data = generated(n)
        t = best_ms(data, repeat=5)
        cold_growth = _growth(t.cold_cpu, previous.cold_cpu if previous else None)
        warm_growth = _growth(t.warm_cpu, previous.warm_cpu if previous else None)
        print(
            f"{len(data['steps']):>6} {t.states:>7} {t.cold_wall:>13.2f} {t.cold_cpu:>12.2f} "
            f"{cold_growth:>7} {t.warm_wall:>13.2f} {t.warm_cpu:>12.2f} {warm_growth:>7}"
        )
        previous = t
    print("goal: 1,000 steps under 1,000 ms, growth close to 10x per 10x steps")


if __name__ == "__main__":
    main()
