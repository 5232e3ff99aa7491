"""Cold-start budget: import time of every handler against ``import boto3``, and layer size.

Each figure is the best of N fresh interpreters, timing only the import itself
(``time.perf_counter`` around it, interpreter start-up excluded), so the handler figures and
the ``import boto3`` baseline are measured the same way in the same run. The budget
(``/work/shared/notes/cold-start.md``): a step function's handler imports within 1.5x
``import boto3``; heavy libraries (boto3, httpx, celpy, the X-Ray SDK) load on first use.

The layer size is what ``sam build`` ships: ``shared/requirements.txt`` installed for Lambda
(manylinux aarch64 up to glibc 2.34, CPython 3.12, wheels only) plus the relayflow package.

Run: ``make cold-start`` or ``.venv/bin/python bench/cold_start.py [--runs 7] [--no-layer]``.
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
BUDGET = 1.5
#: Lambda's limits for a function and all its layers.
UNZIPPED_LIMIT_MB = 250
ZIPPED_UPLOAD_LIMIT_MB = 50
#: Wheel platforms the python3.12 arm64 runtime (Amazon Linux 2023, glibc 2.34) runs, as
#: ``sam build`` accepts them. manylinux2014 alone is not enough: google-re2 (cel-python's
#: dependency) publishes aarch64 wheels for manylinux_2_28 only.
LAMBDA_PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64", "manylinux_2_34_aarch64")

_TIME_HANDLER = """
import importlib.util, sys, time
path = sys.argv[1]
sys.path.insert(0, {shared!r})
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


def best_of(python: str, code: str, arg: str, runs: int) -> float:
    """The fastest of ``runs`` fresh interpreters running ``code`` (which prints seconds)."""
    times = []
    for _ in range(runs):
        out = subprocess.run(
            [python, "-c", code, arg],
            capture_output=True,
            text=True,
            check=True,
            env=_env(),
            cwd=ROOT,
        )
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return min(times)


def handlers() -> list[Path]:
    return sorted(p for p in (ROOT / "functions").glob("*/app.py"))


def tree_bytes(path: Path) -> int:
    return sum(
        f.stat().st_size for f in path.rglob("*") if f.is_file() and "__pycache__" not in f.parts
    )


def layer_size() -> tuple[int, int]:
    """(unzipped, zipped) bytes of the layer as ``sam build`` lays it out (python/…)."""
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "python"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--target",
                str(target),
                *(arg for platform in LAMBDA_PLATFORMS for arg in ("--platform", platform)),
                "--python-version",
                "3.12",
                "--implementation",
                "cp",
                "--only-binary=:all:",
                "-r",
                str(ROOT / "shared" / "requirements.txt"),
            ],
            check=True,
        )
        shutil.copytree(
            ROOT / "shared" / "relayflow",
            target / "relayflow",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        unzipped = tree_bytes(target)
        archive = shutil.make_archive(str(Path(tmp) / "layer"), "zip", tmp, "python")
        return unzipped, Path(archive).stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh interpreters per figure")
    parser.add_argument("--python", default=sys.executable, help="interpreter to measure")
    parser.add_argument("--no-layer", action="store_true", help="skip the layer size (no pip)")
    args = parser.parse_args(argv)

    shared = str(ROOT / "shared")
    version = subprocess.run(
        [args.python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"Import time, best of {args.runs} fresh processes (Python {version})")
    boto3 = best_of(args.python, _TIME_MODULE, "boto3", args.runs)
    print(f"  {'import boto3':<22} {boto3 * 1000:7.1f} ms   1.00x")
    over = []
    for app in handlers():
        kind = app.parent.name
        seconds = best_of(args.python, _TIME_HANDLER.format(shared=shared), str(app), args.runs)
        ratio = seconds / boto3
        flag = "" if ratio <= BUDGET else f"   over the {BUDGET}x budget"
        if ratio > BUDGET:
            over.append(kind)
        print(f"  {'functions/' + kind:<22} {seconds * 1000:7.1f} ms   {ratio:4.2f}x{flag}")
    verdict = "all within" if not over else "over: " + ", ".join(over)
    print(f"Budget: {BUDGET}x import boto3 -> {verdict}")

    if not args.no_layer:
        unzipped, zipped = layer_size()
        mb = 1024 * 1024
        print(
            f"Layer (manylinux aarch64, cp312): {unzipped / mb:.1f} MB unzipped "
            f"(limit {UNZIPPED_LIMIT_MB} MB with the function), {zipped / mb:.1f} MB zipped "
            f"(direct upload limit {ZIPPED_UPLOAD_LIMIT_MB} MB); relayflow itself "
            f"{tree_bytes(ROOT / 'shared' / 'relayflow') / mb:.2f} MB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
