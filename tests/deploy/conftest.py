"""One ``sam build`` per test session, shared by every test of the built artifact."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sam_template import ROOT, python312, sam_build_command, sam_cli, sam_env


@pytest.fixture(scope="session")
def sam_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory ``sam build`` wrote (one folder per function, ``RelayflowLayer/python``
    for the layer), built without cache into a temporary directory, never the repository."""
    sam = sam_cli()
    if sam is None:
        pytest.fail("the SAM CLI is missing: run `make sam-cli` (make test does)")
    python = python312()
    if python is None:
        pytest.skip("no python3.12 found (PATH or ~/.pyenv/versions/3.12.*): sam build needs it")
    work = tmp_path_factory.mktemp("sam-build")
    build_dir, cache_dir = work / "build", work / "cache"
    done = subprocess.run(
        sam_build_command(sam, build_dir, cache_dir),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=sam_env(str(Path(python).parent)),
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return build_dir
