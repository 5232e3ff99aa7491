"""Run code steps from a parent process of a chosen uid: root, or uid 65534 standing in for
Lambda's non-root user.

The parent imports relayflow from a world-readable copy of ``shared/relayflow`` in a temporary
directory, not from the checkout: a checkout inside a private (mode 0700) directory cannot
be read by uid 65534. The copy also holds a fake Lambda layer (``layer/boto3``) that
uid 65534 can read, for the import tests.

On pytest's ``pythonpath`` (pyproject.toml), so any test imports it by name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
#: Parametrize a test over the parent's uid.
PARENT_UIDS = [pytest.param(0, id="root"), pytest.param(NOBODY, id="uid-65534")]

#: The parent: one code step, its outcome (or named error) as JSON on stdout.
PARENT = """
import json, sys
from relayflow.errors import RelayflowError
from relayflow.sandbox import Limits, run_code

request = json.loads(sys.stdin.read())
try:
    outcome = run_code(request["source"], steps={}, trigger={}, input=request["input"], run={},
                       limits=Limits(**request["limits"]))
    result = {"value": outcome.value, "stdout": outcome.stdout}
except RelayflowError as exc:
    result = {"error": type(exc).__name__, "message": exc.message, **exc.details}
print(json.dumps(result))
"""

LIMITS = {"cpu_seconds": 2, "memory_mb": 128, "wall_seconds": 10, "output_bytes": 100_000}


@dataclass(frozen=True)
class ReadableCopy:
    """Where the world-readable copy lives."""

    #: On the parent's PYTHONPATH: holds ``relayflow``.
    shared: Path
    #: A fake layer directory holding a ``boto3`` package.
    layer: Path
    #: A directory every uid may write to.
    scratch: Path


def make_readable_copy() -> Iterator[ReadableCopy]:
    """The copy, removed afterwards (use as a generator fixture)."""
    base = Path(tempfile.mkdtemp(prefix="relayflow-sandbox-tests-"))
    try:
        shared = base / "shared"
        shutil.copytree(
            ROOT / "shared" / "relayflow",
            shared / "relayflow",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        layer = base / "layer"
        (layer / "boto3").mkdir(parents=True)
        (layer / "boto3" / "__init__.py").write_text("WHERE = 'the layer'\n")
        scratch = base / "scratch"
        scratch.mkdir()
        for path in [base, *base.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        scratch.chmod(0o777)
        yield ReadableCopy(shared=shared, layer=layer, scratch=scratch)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def python_for(uid: int) -> str:
    """An interpreter (3.11+) that ``uid`` can run; skips the test when there is none."""
    if os.geteuid() != 0:
        pytest.skip("needs root to start parents as root and as uid 65534")
    candidates = [sys.executable] if uid == 0 else []
    candidates += [sys.executable, sys._base_executable, shutil.which("python3")]
    candidates.append("/usr/bin/python3")
    for candidate in candidates:
        if not candidate:
            continue
        try:
            probe = subprocess.run(
                [candidate, "-c", "import sys; assert sys.version_info >= (3, 11)"],
                **_as_user(uid),
                cwd="/",
                env={},
                capture_output=True,
            )
        except OSError:
            continue
        if probe.returncode == 0:
            return candidate
    pytest.skip(f"no Python 3.11+ that uid {uid} can run")


def _as_user(uid: int) -> dict[str, Any]:
    return {"user": uid, "group": uid, "extra_groups": []} if uid else {}


def start_parent(
    uid: int,
    copy: ReadableCopy,
    source: str,
    *,
    input: Any = None,
    limits: dict[str, Any] | None = None,
    pass_fds: tuple[int, ...] = (),
) -> subprocess.Popen[str]:
    """Start a parent as ``uid`` that runs ``source`` as a code step. Its environment holds
    ``AWS_SECRET_ACCESS_KEY=parent-secret``, as a Lambda's does; it inherits ``pass_fds``."""
    process = subprocess.Popen(
        [python_for(uid), "-c", PARENT],
        **_as_user(uid),
        cwd="/",
        env={"PYTHONPATH": str(copy.shared), "AWS_SECRET_ACCESS_KEY": "parent-secret"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        pass_fds=pass_fds,
    )
    request = {"source": source, "input": input, "limits": {**LIMITS, **(limits or {})}}
    assert process.stdin is not None
    process.stdin.write(json.dumps(request))
    process.stdin.close()
    # communicate() would flush the closed stream.
    process.stdin = None
    return process


def run_as(uid: int, copy: ReadableCopy, source: str, **options: Any) -> dict[str, Any]:
    """Run ``source`` as a code step from a parent of ``uid`` (``options``: those of
    :func:`start_parent`); the parent must finish the step (exit 0). Its outcome:
    ``{"value", "stdout"}`` or ``{"error": <name>, "message", …details}``."""
    process = start_parent(uid, copy, source, **options)
    try:
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, (
        f"the parent did not finish the step: {process.returncode} {stderr}"
    )
    return json.loads(stdout)
