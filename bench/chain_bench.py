"""Long linear chains on the local runtime: run time and peak memory grow linearly.

Each step reads the previous step's output, so one output is live at a time and the state
document stays the same size however long the chain is (``docs/data-model.md``, "What the
state document keeps"). Before output liveness a chain cost the square of its length:
1,000 steps took 12 s and 640 MB, and 2,700 steps outgrew the 256 KB payload limit.

Each size runs in its own process so that its peak resident memory is its own. Run time is
reported as wall-clock and as CPU time of the process (all threads): on a shared machine the
CPU time is the steadier figure. ``--lambda`` runs every step in the transform Lambda instead
of a native Pass.

Run: ``make bench`` or ``.venv/bin/python bench/chain_bench.py [--lambda] [SIZES…]``.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from typing import Any

SIZES = (250, 1000, 4000)


def chain(n: int, *, in_lambda: bool) -> dict[str, Any]:
    """``n`` transform steps, each reading the previous one's output."""
    steps: dict[str, Any] = {}
    for i in range(n):
        source = "trigger.x" if i == 0 else f"steps.s{i - 1}.output.v"
        # ``+ 0`` is not a plain path, so the transform runs in its Lambda.
        value = f"{{{{ {source} + 0 }}}}" if in_lambda else f"{{{{ {source} }}}}"
        step: dict[str, Any] = {"type": "transform", "mapping": {"v": value}}
        if i + 1 < n:
            step["on_success"] = f"s{i + 1}"
        steps[f"s{i}"] = step
    return {"id": f"chain-{n}", "start": "s0", "steps": steps}


def measure_one(n: int, in_lambda: bool) -> dict[str, Any]:
    """Run one chain in this process and report its figures."""
    from relayflow.local import LocalRuntime
    from relayflow.payloads import json_size
    from relayflow.runner import run_workflow
    from relayflow.validation import validate_data

    workflow, problems = validate_data(chain(n, in_lambda=in_lambda))
    assert workflow is not None, problems
    with LocalRuntime(time_scale=0.001) as rt:
        run_workflow(validate_data(chain(3, in_lambda=in_lambda))[0], {"x": 1}, runtime=rt)
        wall, cpu = time.perf_counter(), time.process_time()
        result = run_workflow(workflow, {"x": 1}, runtime=rt, timeout=3600)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert result.succeeded, (result.error, result.cause)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "steps": n,
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_mb": peak_mb,
        "final_doc_bytes": json_size(result.output),
        "timeline_steps": len(result.steps),
    }


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        print(json.dumps(measure_one(int(argv[1]), argv[2] == "lambda")))
        return
    in_lambda = "--lambda" in argv
    sizes = [int(a) for a in argv if a.isdigit()] or list(SIZES)
    kind = "lambda" if in_lambda else "native"
    print(f"linear chains on the local runtime ({kind} steps), one process per size")
    print("figures: wall s = wall time, cpu s = CPU time of the process (all threads); ms/step =")
    print("CPU ms per step; peak MB = resident memory; doc B = final document bytes")
    print(f"{'steps':>6} {'wall s':>8} {'cpu s':>8} {'ms/step':>8} {'peak MB':>8} {'doc B':>6}")
    rows = {}
    for n in sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(n), kind],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        row = json.loads(out.strip().splitlines()[-1])
        rows[n] = row
        print(
            f"{n:>6} {row['wall_s']:>8.1f} {row['cpu_s']:>8.1f} "
            f"{row['cpu_s'] / n * 1000:>8.2f} {row['peak_mb']:>8.0f} {row['final_doc_bytes']:>6}",
            flush=True,
        )
    if 1000 in rows and 4000 in rows:
        wall = rows[4000]["wall_s"] / rows[1000]["wall_s"]
        cpu = rows[4000]["cpu_s"] / rows[1000]["cpu_s"]
        print(f"ratio t4000/t1000: {cpu:.2f} (cpu), {wall:.2f} (wall); linear is 4, the goal <= 5")


if __name__ == "__main__":
    main(sys.argv[1:])
