"""The layer's requirements install for the Lambda platform and live with its boto3.

The python3.12 arm64 runtime is Amazon Linux 2023 (glibc 2.34): manylinux wheels up to
2_34 run there, and `sam build` accepts the same set. manylinux2014 alone is not enough:
google-re2 (cel-python's dependency) publishes aarch64 wheels for manylinux_2_28 only.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import requires
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from sam_template import ROOT

REQUIREMENTS = ROOT / "shared" / "requirements.txt"
LAMBDA_PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64", "manylinux_2_34_aarch64")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """name → version of every wheel the layer installs, downloaded for the Lambda platform."""
    target = tmp_path_factory.mktemp("layer-wheels")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            *(arg for platform in LAMBDA_PLATFORMS for arg in ("--platform", platform)),
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            "-r",
            str(REQUIREMENTS),
            "-d",
            str(target),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = {}
    for wheel in Path(target).glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(wheel.name)
        found[str(name)] = str(version)
    return found


def test_every_layer_dependency_ships_a_wheel_for_python312_on_aarch64(wheels):
    # pip download --only-binary succeeded for the Lambda platform (the fixture asserts it)
    pinned = {
        canonicalize_name(Requirement(line).name)
        for line in REQUIREMENTS.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert pinned <= set(wheels)


def test_the_layer_does_not_shadow_the_runtime_botocore_with_incompatible_versions(wheels):
    # Layers come first on the Lambda sys.path: a package the layer ships replaces the one the
    # runtime's boto3/botocore was installed with, so it must satisfy botocore's requirements.
    conflicts = []
    for spec in requires("botocore") or []:
        requirement = Requirement(spec)
        if requirement.marker and not requirement.marker.evaluate({"python_version": "3.12"}):
            continue
        name = canonicalize_name(requirement.name)
        if name in wheels and wheels[name] not in requirement.specifier:
            conflicts.append(f"{name}=={wheels[name]} (botocore needs {requirement.specifier})")
    assert not conflicts, (
        "the layer would ship "
        + ", ".join(conflicts)
        + " over the runtime's; pin a compatible version in shared/requirements.txt"
    )


def test_requirements_txt_and_pyproject_pin_the_same_versions():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = {
        canonicalize_name(Requirement(d).name): str(Requirement(d).specifier)
        for d in pyproject["project"]["dependencies"]
    }
    for line in REQUIREMENTS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        if name in declared:
            assert declared[name] == str(requirement.specifier), name
