"""Cold-start budget: import time of every built handler against ``import boto3``, and the
built layer's size.

What is measured is the artifact ``sam build`` makes (``--build-dir``, or a fresh ``sam build``
into a temporary directory): each function's folder as /var/task and the built layer's
``relayflow`` package as /opt/python, in python3.12 (``make lambda-python``: the layer's pinned
requirements and the runtime's boto3; the layer's compiled wheels are arm64 and cannot load
here), never the source tree. Each figure is the best of N fresh interpreters, timing only the
import itself (``time.perf_counter`` around it, interpreter start-up excluded), so the handler
figures and the ``import boto3`` baseline are measured the same way in the same interpreter.
The budget (``/work/shared/notes/cold-start.md``): a step function's handler imports within
1.5x ``import boto3``; heavy libraries (boto3, httpx, celpy, the X-Ray SDK) load on first use.

Run: ``make cold-start`` or ``.venv/bin/python bench/cold_start.py [--runs 7] [--build-dir
.aws-sam/build]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAMBDA_PYTHON = ROOT / ".venv" / "tools" / "lambda-py312" / "bin" / "python"
BUDGET = 1.5
#: Lambda's limits for a function and all its layers.
UNZIPPED_LIMIT_MB = 250
ZIPPED_UPLOAD_LIMIT_MB = 50

_TIME_HANDLER = """
import importlib.util, sys, time
path = sys.argv[1]
started = time.perf_counter()
spec = importlib.util.spec_from_file_location("app", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
assert callable(module.handler)
print(time.perf_counter() - started)
"""

_TIME_MODULE = """
import importlib, sys, time
started = time.perf_counter()
importlib.import_module(sys.argv[1])
print(time.perf_counter() - started)
"""


def _env() -> dict[str, str]:
    """What a deployed function sees (minus the values only AWS has)."""
    env = dict(os.environ)
    env.update(
        POWERTOOLS_SERVICE_NAME="relayflow",
        POWERTOOLS_METRICS_NAMESPACE="Relayflow",
        RELAYFLOW_STAGE="bench",
        PYTHONDONTWRITEBYTECODE="0",
    )
    return env


def best_of(python: str, code: str, arg: str, runs: int, path: list[Path] | None = None) -> float:
    """The fastest of ``runs`` fresh interpreters running ``code`` (which prints seconds), with
    ``path`` (the task root and /opt/python) as PYTHONPATH and nothing else added (-P)."""
    times = []
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in path or [])
    for _ in range(runs):
        out = subprocess.run(
            [python, "-P", "-c", code, arg],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=(path or [ROOT])[0],
        )
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return min(times)


def tree_bytes(path: Path) -> int:
    return sum(
        f.stat().st_size for f in path.rglob("*") if f.is_file() and "__pycache__" not in f.parts
    )


def sam_build(target: Path) -> Path:
    """``sam build`` into ``target`` (the SAM CLI and python3.12 as tests/deploy finds them)."""
    sys.path.insert(0, str(ROOT / "tests" / "deploy"))
    from sam_template import python312, sam_build_command, sam_cli, sam_env

    sam, python = sam_cli(), python312()
    if sam is None or python is None:
        raise SystemExit("sam build needs the SAM CLI (make sam-cli) and python3.12")
    subprocess.run(
        sam_build_command(sam, target / "build", target / "cache"),
        check=True,
        capture_output=True,
        cwd=ROOT,
        env=sam_env(str(Path(python).parent)),
    )
    return target / "build"


def built_functions(build: Path) -> list[Path]:
    return sorted(p.parent for p in build.glob("*/app.py"))


def layer_size(build: Path) -> tuple[int, int]:
    """(unzipped, zipped) bytes of the built layer (``RelayflowLayer``: python/…)."""
    root = build / "RelayflowLayer"
    with tempfile.TemporaryDirectory() as tmp:
        archive = shutil.make_archive(str(Path(tmp) / "layer"), "zip", root)
        return tree_bytes(root), Path(archive).stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh interpreters per figure")
    parser.add_argument("--python", default=str(LAMBDA_PYTHON), help="interpreter to measure")
    parser.add_argument("--build-dir", type=Path, help="sam build's output (default: build now)")
    args = parser.parse_args(argv)
    if not Path(args.python).exists():
        raise SystemExit(f"{args.python} is missing: run `make lambda-python`")

    with tempfile.TemporaryDirectory() as tmp:
        build = args.build_dir or sam_build(Path(tmp))
        opt = Path(tmp) / "opt-python"  # /opt/python: the built layer's relayflow only
        opt.mkdir()
        (opt / "relayflow").symlink_to(
            (build / "RelayflowLayer" / "python" / "relayflow").resolve()
        )
        return report(args.python, build, opt, args.runs)


def report(python: str, build: Path, opt: Path, runs: int) -> int:
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"Import time of the built handlers, best of {runs} fresh processes (Python {version})")
    boto3 = best_of(python, _TIME_MODULE, "boto3", runs, [opt])
    print(f"  {'import boto3':<26} {boto3 * 1000:7.1f} ms   1.00x")
    over = []
    for task_root in built_functions(build):
        seconds = best_of(python, _TIME_HANDLER, str(task_root / "app.py"), runs, [task_root, opt])
        ratio = seconds / boto3
        flag = "" if ratio <= BUDGET else f"   over the {BUDGET}x budget"
        if ratio > BUDGET:
            over.append(task_root.name)
        print(f"  {task_root.name:<26} {seconds * 1000:7.1f} ms   {ratio:4.2f}x{flag}")
    verdict = "all within" if not over else "over: " + ", ".join(over)
    print(f"Budget: {BUDGET}x import boto3 -> {verdict}")
    unzipped, zipped = layer_size(build)
    mib = 1024 * 1024
    print(
        f"Built layer (manylinux aarch64, cp312): {unzipped / mib:.1f} MiB unzipped "
        f"(limit {UNZIPPED_LIMIT_MB} MB with the function), {zipped / mib:.1f} MiB zipped "
        f"(direct upload limit {ZIPPED_UPLOAD_LIMIT_MB} MB); relayflow itself "
        f"{tree_bytes(build / 'RelayflowLayer' / 'python' / 'relayflow') / mib:.2f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
