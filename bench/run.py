"""Run every bench of ``make bench``, one process each, and report which passed.

Each bench runs as ``python bench/<script> [args]`` with the step functions' logs quieted
(``POWERTOOLS_LOG_LEVEL=WARNING``). Its standard output (its tables) is shown as it comes and
kept in ``.bench/<name>.out``; its standard error (logs, warnings, a traceback) goes only to
``.bench/<name>.log``. A bench that fails (a non-zero exit, or longer than its time limit)
does not stop the others: the summary at the end names it and its log, and the driver then
exits 1. A bench's time limit only ends one that hangs; nothing about how long it took is
judged. Figures are for this machine: each bench's header says which are CPU time, which wall
time and which ratios.

Run: ``make bench``, ``.venv/bin/python bench/run.py`` or ``.venv/bin/python bench/run.py
compile_bench cost_bench`` (only those).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / ".bench"
#: Logs of the step functions and the local runtime: warnings and errors only.
QUIET_ENV = {
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "PYTHONUNBUFFERED": "1",
}


@dataclass(frozen=True)
class Bench:
    script: str
    args: tuple[str, ...] = ()
    #: Seconds after which the bench counts as hung (on a loaded 2-core machine the slowest
    #: bench takes several minutes; the limit is far above that).
    limit_seconds: float = 3600.0

    @property
    def name(self) -> str:
        return Path(self.script).stem


#: What ``make bench`` runs, in this order. Add a bench here (one line).
BENCHES: list[Bench] = [
    Bench("compile_bench.py"),
    Bench("runtime_bench.py"),
    Bench("cost_bench.py"),
    Bench("serve_bench.py"),
    Bench("chain_bench.py"),
    Bench("scaling_bench.py"),
    Bench("cold_start.py"),
]


@dataclass
class Outcome:
    bench: Bench
    returncode: int | None
    wall_seconds: float
    timed_out: bool = False
    last_error: str = field(default="")

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def run_one(bench: Bench, out_dir: Path | None = None) -> Outcome:
    """Run ``bench`` in its own process: stdout shown and kept, stderr kept in its log (in
    ``out_dir``, ``.bench/`` by default)."""
    out_dir = out_dir or OUT_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path, out_path = out_dir / f"{bench.name}.log", out_dir / f"{bench.name}.out"
    command = [sys.executable, str(ROOT / "bench" / bench.script), *bench.args]
    print(f"\n=== {bench.name} ({' '.join([bench.script, *bench.args])})", flush=True)
    started = time.monotonic()
    with log_path.open("w") as log, out_path.open("w") as out:
        # Its own session, so that a hung bench is ended with the processes it started.
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**os.environ, **QUIET_ENV},
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,
        )
        copier = threading.Thread(target=_show_and_keep, args=(process.stdout, out))
        copier.start()
        timed_out = False
        try:
            returncode = process.wait(timeout=bench.limit_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(process.pid, signal.SIGKILL)
            returncode = process.wait()
        copier.join()
    outcome = Outcome(bench, returncode, time.monotonic() - started, timed_out)
    if not outcome.ok:
        outcome.last_error = _last_line(log_path)
    return outcome


def _show_and_keep(stream: IO[str], out: IO[str]) -> None:
    for line in stream:
        print(line, end="", flush=True)
        out.write(line)


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip()[:200] if lines else ""


def summary(outcomes: list[Outcome], out_dir: Path | None = None) -> str:
    """One line per bench: ok or FAILED (with why and where its log is), and its wall time."""
    out_dir = out_dir or OUT_DIR
    lines = [f"\nbench summary (logs and outputs in {_shown(out_dir)}/):"]
    for outcome in outcomes:
        if outcome.ok:
            state = "ok"
        elif outcome.timed_out:
            state = f"FAILED: still running after {outcome.bench.limit_seconds:.0f} s"
        else:
            state = f"FAILED: exit {outcome.returncode}"
        line = f"  {outcome.bench.name:<16} {state:<10} {outcome.wall_seconds:>7.1f} s wall"
        if not outcome.ok:
            log = _shown(out_dir / f"{outcome.bench.name}.log")
            line += f"  {log}: {outcome.last_error}"
        lines.append(line)
    failed = [o.bench.name for o in outcomes if not o.ok]
    lines.append(f"{len(outcomes) - len(failed)} of {len(outcomes)} benches ran to their end")
    return "\n".join(lines)


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def selected(names: list[str]) -> list[Bench]:
    """The benches named (``cost_bench`` or ``cost_bench.py``), or all of them."""
    if not names:
        return list(BENCHES)
    by_name = {bench.name: bench for bench in BENCHES}
    unknown = [n for n in names if Path(n).stem not in by_name]
    if unknown:
        raise SystemExit(f"no such bench: {', '.join(unknown)} (known: {', '.join(by_name)})")
    return [by_name[Path(n).stem] for n in names]


def main(argv: list[str], out_dir: Path | None = None) -> int:
    """Run the benches named in ``argv`` (all when none); 1 when any failed, else 0."""
    outcomes = [run_one(bench, out_dir) for bench in selected(argv)]
    print(summary(outcomes, out_dir), flush=True)
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
