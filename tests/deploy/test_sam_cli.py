"""`sam validate --lint` and `sam build`, run for real (no Docker needed for either).

The SAM CLI comes from `make sam-cli` (its own tool venv: it pins boto3 below relayflow's
range). `sam build` needs the functions' runtime, python3.12; it builds into a temporary
directory, never into the repository, and takes 10-60 s (one test, so it runs once).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from sam_template import ROOT, function_resources, load_template, python312, sam_cli


def _sam() -> str:
    sam = sam_cli()
    if sam is None:
        pytest.fail("the SAM CLI is missing: run `make sam-cli` (make test does)")
    return sam


def _env(extra_path: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["SAM_CLI_TELEMETRY"] = "0"
    if extra_path:
        env["PATH"] = f"{extra_path}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_sam_validate_lint_passes():
    # When the template is validated and linted (cfn-lint) as `sam validate --lint` does
    done = subprocess.run(
        [_sam(), "validate", "--lint", "--template-file", str(ROOT / "template.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=300,
    )
    # Then it passes with no finding
    assert done.returncode == 0, done.stdout + done.stderr
    assert "is a valid SAM Template" in done.stdout + done.stderr


def test_sam_build_builds_every_function_and_an_arm64_python312_layer(tmp_path: Path):
    python = python312()
    if python is None:
        pytest.skip("no python3.12 found (PATH or ~/.pyenv/versions/3.12.*): sam build needs it")
    build_dir, cache_dir = tmp_path / "build", tmp_path / "cache"
    # When the application is built (no cache: the cache would land in the repository)
    done = subprocess.run(
        [
            _sam(),
            "build",
            "--no-cached",
            "--build-dir",
            str(build_dir),
            "--cache-dir",
            str(cache_dir),
            "--template-file",
            str(ROOT / "template.yaml"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(str(Path(python).parent)),
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    # Then every function's handler and the layer are in the build
    for kind, logical_id in function_resources(load_template()).items():
        assert (build_dir / logical_id / "app.py").is_file(), kind
    layer = build_dir / "RelayflowLayer" / "python"
    assert (layer / "relayflow" / "observability.py").is_file()
    # And the layer holds only what Lambda imports: no local runtime, no CLI, no test folders
    assert not (layer / "relayflow" / "local").exists()
    assert not list((layer / "relayflow").glob("cli*.py"))
    assert not [p for p in layer.rglob("tests") if p.is_dir()]
    assert not (layer / "moto").exists()
    # And the compiled dependencies are the Lambda platform's (CPython 3.12 on aarch64)
    native = sorted(p.name for p in layer.rglob("*.so"))
    assert any(n.startswith("_pydantic_core.cpython-312-aarch64") for n in native), native
    assert all("x86_64" not in n for n in native), native
    # And nothing was written into the repository
    assert not (ROOT / ".aws-sam" / "deps").exists()
