"""The CLI's quick answers: ``--version``, and ``--help`` without importing the definition
models, the compiler or boto3 (what made it slow), checked by module, not by the clock."""

from __future__ import annotations

import subprocess
import sys

import pytest

from relayflow import __version__
from relayflow.cli.main import main


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"relayflow {__version__}"


def test_help_imports_nothing_heavy():
    probe = (
        "import sys\n"
        "from relayflow.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ['relayflow.definition.models', 'relayflow.compiler', 'boto3', 'yaml']\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert "usage: relayflow" in done.stdout
    assert done.stderr.strip() == "[]"


def test_a_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["validate"])
    assert exited.value.code == 2
    assert "usage:" in capsys.readouterr().err


EXAMPLE = "workflows/examples/order_triage.yaml"


def run_json(capsys, argv: list[str]) -> tuple[int, object]:
    import json

    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def test_validate_json_lists_each_file_with_its_problems(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: bad\nstart: x\nsteps: {a: {type: noop}}\n")
    code, answer = run_json(capsys, ["validate", EXAMPLE, str(bad), "--json"])
    assert code == 2
    good, broken = answer["files"]
    assert (good["valid"], good["workflow_id"], good["problems"]) == (True, "order-triage", [])
    assert broken["valid"] is False
    assert [(p["path"], p["rule"]) for p in broken["problems"]] == [("start", "unknown-step")]


def test_compile_graph_and_schedule_json(capsys):
    code, compiled = run_json(capsys, ["compile", EXAMPLE, "--json"])
    assert (
        code == 0 and compiled["asl"]["StartAt"] and compiled["engine"] in ("standard", "express")
    )
    code, graph = run_json(capsys, ["graph", EXAMPLE, "--json"])
    assert code == 0 and graph["start"] == "normalise"
    assert {"from": "normalise", "to": "is_large", "kind": "route", "label": None} in graph["edges"]
    assert graph["mermaid"].startswith("flowchart TD")
    code, schedule = run_json(
        capsys,
        ["schedule", "preview", "0 9 * * MON", "--json", "-n", "2", "--start", "2026-01-01"],
    )
    assert schedule["scheduler_expressions"] == ["cron(0 9 ? * MON *)"]
    assert [t["at"] for t in schedule["fire_times"]] == [
        "2026-01-05T09:00:00+00:00",
        "2026-01-12T09:00:00+00:00",
    ]
