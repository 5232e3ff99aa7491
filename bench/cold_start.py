"""Cold-start budget: how long each built handler takes to import, against ``import boto3``.

What is measured is what ships: ``sam build``'s artifact (each function's folder as
/var/task, the built layer's ``python/`` folder as /opt/python), run by python3.12 (``make
lambda-python``: the runtime's boto3 comes from there, as Lambda's runtime brings it). The
layer is built for this machine's architecture (``PLATFORM=<uname -m>``, so its compiled
wheels load here; Lambda's is arm64, the Python files and bytecode are the same), and it is
read as Lambda mounts /opt: nothing is written (``PYTHONDONTWRITEBYTECODE``), so the layer's
own ``.pyc`` are all there is.

Each round starts one fresh interpreter per target, ``import boto3`` and every handler
interleaved in one shuffled order, so a change in the machine's load shifts the baseline and
the handlers alike. Each interpreter times only the import (CPU: ``time.process_time``;
wall: ``time.perf_counter``; interpreter start-up excluded). The table gives the best and the
median of the rounds; ratios are CPU time over ``import boto3``'s CPU time in the same run,
which is what the budget is stated in (``/work/shared/notes/cold-start.md``: each handler
within 1.5x ``import boto3``).

``--compare-source`` also measures the same layer with its bytecode removed (the layer as it
shipped before the build compiled it: every cold start compiles from source).

Run: ``make cold-start`` or ``.venv/bin/python bench/cold_start.py [--rounds 7]
[--build-dir DIR] [--compare-source]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAMBDA_PYTHON = ROOT / ".venv" / "tools" / "lambda-py312" / "bin" / "python"
BUDGET = 1.5
BASELINE = "import boto3"
#: Lambda's limits for a function and all its layers.
UNZIPPED_LIMIT_MB = 250
ZIPPED_UPLOAD_LIMIT_MB = 50

# One fresh interpreter: import the target, print CPU and wall seconds as JSON.
_TIME_IMPORT = """
import importlib, importlib.util, json, sys, time
target = sys.argv[1]
cpu, wall = time.process_time(), time.perf_counter()
if target.endswith(".py"):
    spec = importlib.util.spec_from_file_location("app", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.handler)
else:
    importlib.import_module(target)
print(json.dumps([time.process_time() - cpu, time.perf_counter() - wall]))
"""


@dataclass
class Samples:
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)

    def best(self) -> float:
        return min(self.cpu)

    def median(self) -> float:
        return statistics.median(self.cpu)


def _env(path: list[Path]) -> dict[str, str]:
    """What a deployed function sees (minus the values only AWS has)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(
        POWERTOOLS_SERVICE_NAME="relayflow",
        POWERTOOLS_METRICS_NAMESPACE="Relayflow",
        POWERTOOLS_LOG_LEVEL="WARNING",
        RELAYFLOW_STAGE="bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_REGION="us-east-1",
        # /opt is read-only on Lambda: nothing the import compiles is kept
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=os.pathsep.join(str(p) for p in path),
    )
    return env


def _once(python: str, target: str, path: list[Path]) -> tuple[float, float]:
    done = subprocess.run(
        [python, "-P", "-c", _TIME_IMPORT, target],
        capture_output=True,
        text=True,
        env=_env(path),
        cwd=path[0],
        timeout=300,
    )
    if done.returncode != 0:
        raise SystemExit(f"{target} failed to import:\n{done.stderr[-2000:]}")
    cpu, wall = json.loads(done.stdout.strip().splitlines()[-1])
    return cpu, wall


def measure(python: str, build: Path, opt: Path, rounds: int, seed: int) -> dict[str, Samples]:
    """``rounds`` rounds; in each, one fresh interpreter per target in a shuffled order."""
    targets: dict[str, tuple[str, list[Path]]] = {BASELINE: ("boto3", [opt])}
    for task_root in built_functions(build):
        targets[task_root.name] = (str(task_root / "app.py"), [task_root, opt])
    samples = {name: Samples() for name in targets}
    order = list(targets)
    shuffle = random.Random(seed)
    for _ in range(rounds):
        shuffle.shuffle(order)
        for name in order:
            target, path = targets[name]
            cpu, wall = _once(python, target, path)
            samples[name].cpu.append(cpu)
            samples[name].wall.append(wall)
    return samples


def table(title: str, samples: dict[str, Samples]) -> list[str]:
    """The report's lines; the handlers over budget by best CPU ratio are marked."""
    base = samples[BASELINE]
    lines = [
        title,
        f"  {'target':<20} {'CPU best':>9} {'CPU median':>11} {'wall best':>10}"
        f" {'ratio best':>11} {'ratio median':>13}",
    ]
    over = []
    for name, s in samples.items():
        ratio, ratio_median = s.best() / base.best(), s.median() / base.median()
        flag = ""
        if name != BASELINE and ratio > BUDGET:
            flag = f"  over {BUDGET}x"
            over.append(name)
        lines.append(
            f"  {name:<20} {s.best() * 1000:7.1f}ms {s.median() * 1000:9.1f}ms"
            f" {min(s.wall) * 1000:8.1f}ms {ratio:10.2f}x {ratio_median:12.2f}x{flag}"
        )
    verdict = "every handler within" if not over else "over: " + ", ".join(over)
    lines.append(f"  budget {BUDGET}x {BASELINE} (CPU, best of rounds) -> {verdict}")
    return lines


def tree_bytes(path: Path, suffix: str | None = None) -> int:
    return sum(
        f.stat().st_size
        for f in path.rglob("*")
        if f.is_file() and (suffix is None or f.suffix == suffix)
    )


def sam_build(target: Path) -> Path:
    """``sam build`` into ``target``, the layer's wheels for this machine (``PLATFORM``)."""
    sys.path.insert(0, str(ROOT / "tests" / "deploy"))
    from sam_template import python312, sam_build_command, sam_cli, sam_env

    sam, python = sam_cli(), python312()
    if sam is None or python is None:
        raise SystemExit("sam build needs the SAM CLI (make sam-cli) and python3.12")
    env = sam_env(str(Path(python).parent)) | {"PLATFORM": platform.machine()}
    done = subprocess.run(
        sam_build_command(sam, target / "build", target / "cache"),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"sam build failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return target / "build"


def built_functions(build: Path) -> list[Path]:
    return sorted(p.parent for p in build.glob("*/app.py"))


def layer_size(build: Path) -> tuple[int, int]:
    """(unzipped, zipped) bytes of the built layer (``RelayflowLayer``: python/…)."""
    root = build / "RelayflowLayer"
    with tempfile.TemporaryDirectory() as tmp:
        archive = shutil.make_archive(str(Path(tmp) / "layer"), "zip", root)
        return tree_bytes(root), Path(archive).stat().st_size


def without_bytecode(layer: Path, into: Path) -> Path:
    """A copy of the built layer with every ``__pycache__`` removed."""
    shutil.copytree(layer, into, ignore=shutil.ignore_patterns("__pycache__"), symlinks=True)
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--python", default=str(LAMBDA_PYTHON), help="interpreter to measure")
    parser.add_argument("--build-dir", type=Path, help="sam build's output (default: build now)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the per-round order")
    parser.add_argument(
        "--compare-source", action="store_true", help="also time the layer without bytecode"
    )
    args = parser.parse_args(argv)
    if not Path(args.python).exists():
        raise SystemExit(f"{args.python} is missing: run `make lambda-python`")

    with tempfile.TemporaryDirectory() as tmp:
        build = args.build_dir or sam_build(Path(tmp))
        layer = build / "RelayflowLayer" / "python"
        version = subprocess.run(
            [args.python, "-c", "import sys; print(sys.version.split()[0])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        heading = (
            f"Import time of the built handlers, {args.rounds} interleaved rounds of fresh "
            f"processes (Python {version}, {platform.machine()} layer, read-only)"
        )
        samples = measure(args.python, build, layer, args.rounds, args.seed)
        lines = table(f"{heading}\nThe layer as it ships (bytecode):", samples)
        if args.compare_source:
            bare = without_bytecode(layer, Path(tmp) / "opt-source" / "python")
            source = measure(args.python, build, bare, args.rounds, args.seed)
            lines += table("The same layer without its bytecode (compiled at each start):", source)
        print("\n".join(lines))
        unzipped, zipped = layer_size(build)
        mib = 1024 * 1024
        print(
            f"Built layer ({platform.machine()}, cp312): {unzipped / mib:.1f} MiB unzipped "
            f"(limit {UNZIPPED_LIMIT_MB} MB with the function), {zipped / mib:.1f} MiB zipped "
            f"(direct upload limit {ZIPPED_UPLOAD_LIMIT_MB} MB); bytecode "
            f"{tree_bytes(layer, '.pyc') / mib:.1f} MiB; relayflow itself "
            f"{tree_bytes(layer / 'relayflow') / mib:.2f} MiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
