"""`sam validate --lint` and `sam build`, run for real (no Docker needed for either).

The SAM CLI comes from `make sam-cli` (its own tool venv: it pins boto3 below relayflow's
range). `sam build` needs the functions' runtime, python3.12; the session builds once into a
temporary directory, never into the repository (conftest.py's ``sam_build``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sam_template import ROOT, function_resources, load_template, sam_cli, sam_env


def _sam() -> str:
    sam = sam_cli()
    if sam is None:
        pytest.fail("the SAM CLI is missing: run `make sam-cli` (make test does)")
    return sam


def test_sam_validate_lint_passes():
    # When the template is validated and linted (cfn-lint) as `sam validate --lint` does
    done = subprocess.run(
        [_sam(), "validate", "--lint", "--template-file", str(ROOT / "template.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=sam_env(),
        timeout=300,
    )
    # Then it passes with no finding
    assert done.returncode == 0, done.stdout + done.stderr
    assert "is a valid SAM Template" in done.stdout + done.stderr


def test_sam_build_builds_every_function_and_an_arm64_python312_layer(sam_build: Path):
    # When the application is built (the session's build: conftest.py)
    build_dir = sam_build
    # Then every function's handler and the layer are in the build
    for kind, logical_id in function_resources(load_template()).items():
        assert (build_dir / logical_id / "app.py").is_file(), kind
    layer = build_dir / "RelayflowLayer" / "python"
    assert (layer / "relayflow" / "observability.py").is_file()
    # And the layer holds only what Lambda imports: no local runtime, no CLI, no test folders
    assert not (layer / "relayflow" / "local").exists()
    assert not (layer / "relayflow" / "cli").exists()
    assert not [p for p in layer.rglob("tests") if p.is_dir()]
    assert not (layer / "moto").exists()
    # And the compiled dependencies are the Lambda platform's (CPython 3.12 on aarch64)
    native = sorted(p.name for p in layer.rglob("*.so"))
    assert any(n.startswith("_pydantic_core.cpython-312-aarch64") for n in native), native
    assert all("x86_64" not in n for n in native), native
    # And nothing was written into the repository
    assert not (ROOT / ".aws-sam" / "deps").exists()
