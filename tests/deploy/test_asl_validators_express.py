"""Express machines (native recording, relayflow.compiler.recording) pass AWS's ASL language
service and asl-validator, like every other compiled machine (make asl-tools)."""

from __future__ import annotations

from pathlib import Path

from asl_validators import validate_definitions
from test_asl_validators import _failures, asl_tools  # noqa: F401 (a fixture)

from relayflow.compiler import CompileOptions, compile_workflow
from relayflow.validation import load_workflow

ROOT = Path(__file__).resolve().parents[2]
DEFINITIONS = sorted((ROOT / "workflows" / "examples").glob("*.yaml")) + sorted(
    (ROOT / "tests" / "golden").glob("*.yaml")
)


def test_every_machine_compiled_for_an_express_target_has_no_diagnostics(asl_tools):  # noqa: F811
    # Given every example and golden definition compiled as the control plane would deploy
    # a new workflow (Express where chosen, with its recording states)
    machines = {}
    for path in DEFINITIONS:
        compiled = compile_workflow(load_workflow(path), CompileOptions(express=True))
        if compiled.engine is not None and compiled.engine.engine == "express":
            machines[path.name] = compiled.asl
    assert len(machines) >= 5
    # When both validators read them / Then neither says anything
    reports = validate_definitions(machines)
    assert all(r.ok for r in reports.values()), _failures(reports)
