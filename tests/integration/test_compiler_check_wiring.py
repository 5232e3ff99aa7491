"""A compiled machine that fails relayflow.compiler.check is a compiler bug: ``relayflow
compile``, ``run`` and ``deploy`` and ``PUT /workflows`` report it with its rule and state and
never write, run or deploy the machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

import relayflow.compiler
import relayflow.runner
from relayflow.cli.main import main
from relayflow.cli.output import EXIT_COMPILER_BUG

ROOT = Path(__file__).resolve().parents[2]
TRIAGE = str(ROOT / "workflows/examples/order_triage.yaml")


@pytest.fixture
def broken_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiler, plus a bug: an extra state that nothing transitions to."""
    real = relayflow.compiler.compile_workflow

    def compile_with_a_bug(*args: Any, **kwargs: Any) -> Any:
        compiled = real(*args, **kwargs)
        compiled.asl["States"]["orphan"] = {"Type": "Pass", "End": True}
        return compiled

    monkeypatch.setattr(relayflow.compiler, "compile_workflow", compile_with_a_bug)
    monkeypatch.setattr(relayflow.runner, "compile_workflow", compile_with_a_bug)


def test_compile_reports_the_bug_with_rule_and_state_and_writes_nothing(
    broken_compiler, tmp_path, capsys
):
    out = tmp_path / "asl.json"
    # When the buggy machine is compiled
    assert main(["compile", TRIAGE, "-o", str(out)]) == EXIT_COMPILER_BUG
    # Then the error names the rule and the state, and no file is written
    err = capsys.readouterr().err
    assert "internal error" in err and "Relayflow bug" in err
    assert "[reachable] state 'orphan'" in err
    assert not out.exists()


def test_compile_of_a_sound_machine_is_unchanged(tmp_path):
    assert main(["compile", TRIAGE, "-o", str(tmp_path / "asl.json")]) == 0


@pytest.mark.integration
def test_run_refuses_the_machine_before_the_local_runtime_sees_it(broken_compiler, capsys):
    from relayflow.local import LocalRuntime

    assert main(["run", TRIAGE, "--json"]) == EXIT_COMPILER_BUG
    assert "[reachable] state 'orphan'" in capsys.readouterr().err
    assert LocalRuntime.current() is None  # no runtime was left open


@pytest.mark.integration
def test_put_workflow_answers_500_compiler_bug_and_deploys_nothing(broken_compiler, server):
    headers = {"Authorization": f"Bearer {server.bootstrap_key}"}
    definition = Path(TRIAGE).read_text()
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
        # When the definition is PUT
        response = http.put(
            "/workflows/order-triage",
            content=definition.encode(),
            headers={"Content-Type": "application/yaml"},
        )
        # Then the API answers 500 compiler_bug with every violation, and stores nothing
        assert response.status_code == 500
        body = response.json()
        assert body["code"] == "compiler_bug"
        assert {"rule": "reachable", "state": "orphan"}.items() <= body["details"][0].items()
        assert http.get("/workflows/order-triage").status_code == 404


@pytest.mark.integration
def test_deploy_exits_3_on_a_compiler_bug(broken_compiler, server, monkeypatch, capsys):
    monkeypatch.delenv("RELAYFLOW_API_URL", raising=False)
    monkeypatch.delenv("RELAYFLOW_API_KEY", raising=False)
    argv = ["deploy", TRIAGE, "--api", server.url, "--api-key", server.bootstrap_key]
    assert main(argv) == EXIT_COMPILER_BUG
    err = capsys.readouterr().err
    assert "500 compiler_bug" in err and "orphan" in err
