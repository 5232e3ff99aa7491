"""checkov over the template as `sam deploy` sends it: every finding fixed or justified.

The SAM CLI's own translator turns template.yaml into plain CloudFormation offline
(``sam_translate.py``); the pinned checkov (``make checkov``, its own tool venv) scans it. Every
failed check must be listed, for its resource, in ``checkov_suppressions.yaml`` with a reason,
and every resource listed there must still have the finding (no stale justifications).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from sam_template import ROOT

CHECKOV = ROOT / ".venv" / "tools" / "checkov" / "bin" / "checkov"
SAM_PYTHON = ROOT / ".venv" / "tools" / "sam" / "bin" / "python"
SUPPRESSIONS = Path(__file__).with_name("checkov_suppressions.yaml")


def _env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "SAM_CLI_TELEMETRY": "0",
        # No call home: checkov's bridgecrew platform, version check and downloads are off.
        "BC_SKIP_MAPPING": "TRUE",
        "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false",
        "SKIP_CHECKOV_VERSION_CHECK": "true",
        "CKV_SKIP_DOWNLOAD": "true",
    }


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    for tool, make in ((SAM_PYTHON, "sam-cli"), (CHECKOV, "checkov")):
        if not tool.exists():
            pytest.fail(f"{tool.name} is missing: run `make {make}` (make test does)")
    work = tmp_path_factory.mktemp("checkov")
    translated = work / "template.json"
    done = subprocess.run(
        [str(SAM_PYTHON), str(ROOT / "tests" / "deploy" / "sam_translate.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(work),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    translated.write_text(done.stdout)
    done = subprocess.run(
        [
            str(CHECKOV),
            "--file",
            str(translated),
            "--framework",
            "cloudformation",
            "--output",
            "json",
            "--quiet",
            "--compact",
            "--skip-download",
        ],
        capture_output=True,
        text=True,
        cwd=work,
        env=_env(work),
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    report = json.loads(done.stdout) if done.stdout.strip() else {}
    if isinstance(report, list):
        report = report[0]
    return list((report.get("results") or {}).get("failed_checks") or [])


def _key(check: dict[str, Any]) -> tuple[str, str]:
    return check["check_id"], check["resource"].split(".", 1)[-1]


def test_every_checkov_finding_is_fixed_or_justified(findings):
    listed = yaml.safe_load(SUPPRESSIONS.read_text())["suppressions"]
    justified = {(entry["check"], resource) for entry in listed for resource in entry["resources"]}
    # Each suppression says why
    assert all(str(entry.get("reason", "")).strip() for entry in listed)
    # Every finding is justified
    unjustified = sorted(
        f"{check['check_id']} {check['resource']}: {check['check_name']}"
        for check in findings
        if _key(check) not in justified
    )
    assert not unjustified, "\n".join(unjustified)
    # And no justification outlived its finding
    stale = justified - {_key(check) for check in findings}
    assert not stale, sorted(stale)
