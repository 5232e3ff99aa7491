"""Per-step cost of the code sandbox, and the code function's cold start.

Three figures, each from fresh processes on this machine:

- **per step**: ``run_code("return 1")`` end to end (start the child, jail it, run, reap),
  median and p90 of N runs in one warm parent, as a Lambda's warm invocations see it: wall
  time, and the child's CPU time (from ``wait4``), which a loaded machine inflates far less;
- **jail**: what the child spends on its jail alone (parent-death signal, seccomp filter,
  import guard, audit hook), timed inside fresh ``python -I -S -B`` interpreters after the
  runner's own imports, median of N, wall and CPU time; the issue caps it at 20 ms a step;
- **cold start**: importing ``functions/code/app.py`` (best of N fresh interpreters, as
  ``bench/cold_start.py`` measures every handler).

Run: ``.venv/bin/python bench/sandbox_bench.py [--runs 50]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))
sys.path.insert(0, str(ROOT / "bench"))

from cold_start import _TIME_HANDLER, best_of  # noqa: E402

from relayflow.sandbox import Limits, run_code  # noqa: E402

LIMITS = Limits(cpu_seconds=5, memory_mb=256, wall_seconds=10, output_bytes=100_000)

#: Imports what runner.py imports before its jail, then times loading the jail as runner.py
#: does and setting it up, in a fresh interpreter: the jail's marginal cost per step.
_TIME_JAIL = """
import _ast, builtins, io, json, os, resource, signal, sys, time
started, cpu = time.perf_counter(), time.process_time()
module = type(sys)("relayflow_jail")
with open(sys.argv[1], "rb") as source:
    exec(compile(source.read(), sys.argv[1], "exec", dont_inherit=True), module.__dict__)
module.enter(os.getppid())
module.lock(module.Refusals(), lambda number: None)
print(time.perf_counter() - started, time.process_time() - cpu)
"""


def per_step(runs: int) -> tuple[list[float], list[float]]:
    """Milliseconds of ``run_code("return 1")`` (wall) and of the child's CPU, one figure
    per run (after one warm-up)."""
    run_code("return 1", steps={}, trigger={}, input=None, run={}, limits=LIMITS)
    wall, cpu = [], []
    for _ in range(runs):
        started = time.perf_counter()
        outcome = run_code("return 1", steps={}, trigger={}, input=None, run={}, limits=LIMITS)
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append(outcome.cpu_ms)
    return wall, cpu


def jail_cost(runs: int) -> tuple[list[float], list[float]] | None:
    """Milliseconds (wall, CPU) of the jail's set-up in fresh children, or None before the
    jail existed."""
    jail = ROOT / "shared" / "relayflow" / "sandbox" / "jail.py"
    if not jail.exists():
        return None
    wall, cpu = [], []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-B", "-c", _TIME_JAIL, str(jail)],
            capture_output=True,
            text=True,
            check=True,
            env={},
        )
        seconds, cpu_seconds = map(float, done.stdout.split())
        wall.append(seconds * 1000)
        cpu.append(cpu_seconds * 1000)
    return wall, cpu


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def _figures(wall: list[float], cpu: list[float]) -> str:
    return (
        f"wall median {statistics.median(wall):6.1f} ms, p90 {p90(wall):6.1f} ms; "
        f"CPU median {statistics.median(cpu):5.1f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="runs per figure")
    args = parser.parse_args(argv)
    print(f"Code sandbox, {args.runs} runs (Python {sys.version.split()[0]}, {sys.platform})")
    print(f"  load average: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    wall, cpu = per_step(args.runs)
    print(f"  per step, run_code('return 1'): {_figures(wall, cpu)}")
    jail = jail_cost(args.runs)
    if jail is None:
        print("  jail set-up in the child:        (no jail in this checkout)")
    else:
        print(f"  jail set-up in the child:        {_figures(*jail)} (budget 20 ms)")
    app = str(ROOT / "functions" / "code" / "app.py")
    cold = best_of(sys.executable, _TIME_HANDLER.format(shared=str(ROOT / "shared")), app, 7)
    print(f"  cold start, import functions/code/app.py: best of 7 {cold * 1000:6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
