"""Local-runtime wall time per step.

Workloads (each run several times in one runtime; median reported):
- 20-step linear workflow, all native (Pass states);
- 20-step linear workflow, all in the transform Lambda;
- for_each over 100 items with the per-item transform in the Lambda (MaxConcurrency 0 and 10).

Every figure is wall time (``time.perf_counter``): the runs wait on the local Lambda endpoint's
threads, so CPU time of this process would miss part of the work. ``ms/step`` is a ratio
(wall ms over steps). Figures are for this machine only; compare the ratios within one run.
Run: ``make bench`` or ``.venv/bin/python bench/runtime_bench.py``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from relayflow.local import LocalRuntime
from relayflow.runner import run_workflow
from relayflow.validation import validate_data

REPEAT = 5


def linear(n: int, *, native: bool) -> dict[str, Any]:
    mapping = "{{ trigger.x }}" if native else "{{ trigger.x + 1 }}"
    steps = {
        f"s{i}": {"type": "transform", "mapping": {"v": mapping}}
        | ({"on_success": f"s{i + 1}"} if i + 1 < n else {})
        for i in range(n)
    }
    return {"id": f"linear-{n}", "start": "s0", "steps": steps}


def for_each(concurrency: int) -> dict[str, Any]:
    return {
        "id": "fanout",
        "start": "loop",
        "steps": {
            "loop": {
                "type": "for_each",
                "items": "{{ trigger.items }}",
                "step": "item",
                "max_concurrency": concurrency,
            },
            "item": {"type": "transform", "mapping": {"double": "{{ item * 2 }}"}},
        },
    }


def measure(rt: LocalRuntime, data: dict[str, Any], trigger: Any) -> tuple[float, int]:
    workflow, problems = validate_data(data)
    assert workflow is not None, problems
    times = []
    invocations = 0
    for _ in range(REPEAT):
        started = time.perf_counter()
        result = run_workflow(workflow, trigger, runtime=rt)
        times.append((time.perf_counter() - started) * 1000)
        assert result.succeeded, (result.error, result.cause)
        invocations = result.lambda_invocations
    return statistics.median(times), invocations


def main() -> None:
    with LocalRuntime(time_scale=0.001) as rt:
        rows = [
            ("20 steps linear, native", linear(20, native=True), {"x": 1}, 20),
            ("20 steps linear, Lambda", linear(20, native=False), {"x": 1}, 20),
            ("for_each 100 items, no limit", for_each(0), {"items": list(range(100))}, 100),
            ("for_each 100 items, 10 at once", for_each(10), {"items": list(range(100))}, 100),
        ]
        measure(rt, linear(3, native=False), {"x": 1})  # warm up imports and the endpoint
        print(f"local runtime, median of {REPEAT} runs")
        print("figures: run = wall ms; ms/step = wall ms per step (ratio); invocations = count")
        print(f"{'workload':<32} {'run wall ms':>12} {'ms/step':>8} {'invocations':>12}")
        for label, data, trigger, steps in rows:
            ms, calls = measure(rt, data, trigger)
            print(f"{label:<32} {ms:>12.1f} {ms / steps:>8.2f} {calls:>12}")


if __name__ == "__main__":
    main()
