"""The relayflow command: output and exit codes, called in-process through main()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relayflow.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "workflows/examples/order_triage.yaml")
PAYMENT = str(ROOT / "workflows/examples/payment_retry.yaml")


def test_schema_is_the_generated_json_schema(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "Relayflow workflow definition"
    step_types = {
        ref.rsplit("/", 1)[-1]
        for ref in schema["properties"]["steps"]["additionalProperties"]["discriminator"]["mapping"]
    }
    assert step_types == {
        "tool",
        "condition",
        "transform",
        "delay",
        "agent",
        "llm_batch",
        "sub_workflow",
        "parallel",
        "for_each",
        "code",
        "webhook_out",
        "noop",
        "approval",
        "custom",
        "waitpoint",
        "wait_for_event",
    }


def test_validate_reports_every_problem_and_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "id: wf\nstart: a\nsteps:\n  a: {type: noop, on_success: ghost}\n  b: {type: noop}\n"
    )
    assert main(["validate", EXAMPLE, str(bad)]) == 2
    captured = capsys.readouterr()
    assert "✓" in captured.out and "order-triage" in captured.out
    assert (
        f"{bad}: steps.a.on_success: step 'ghost' does not exist; one of: a, b [unknown-step]"
        in captured.err
    )
    assert (
        f"{bad}: steps.b: step 'b' cannot be reached from start 'a' [unreachable]" in captured.err
    )


def test_compile_writes_asl_and_iam(tmp_path, capsys):
    out = tmp_path / "asl.json"
    assert main(["compile", EXAMPLE, "-o", str(out), "--iam"]) == 0
    asl = json.loads(out.read_text())
    assert asl["StartAt"] == "normalise"
    wrote, engine, iam_text = capsys.readouterr().err.split("\n", 2)
    assert wrote.startswith("wrote ")
    # The engine the control plane would pick, and why (docs/engines.md)
    assert engine.startswith("engine: standard (a run may last ")
    iam = json.loads(iam_text)
    assert iam[0]["Action"] == ["lambda:InvokeFunction"]


def test_graph_prints_mermaid(capsys):
    assert main(["graph", EXAMPLE]) == 0
    text = capsys.readouterr().out
    assert text.startswith("flowchart TD")
    assert "price_lines == each item ==> price_line" in text


@pytest.mark.integration
def test_run_prints_a_timeline_and_exits_0(capsys):
    payload = "@" + str(ROOT / "events/examples/order_triage.json")
    assert main(["run", EXAMPLE, "--input", payload]) == 0
    out = capsys.readouterr().out
    assert "SUCCEEDED" in out
    assert "price_line[2]" in out and "transform" in out


@pytest.mark.integration
def test_run_json_is_pure_json_and_exit_code_reflects_failure(capsys):
    # Given a run whose step fails and whose error route records it, the run succeeds
    payload = '{"payment": {"amount_cents": "x", "settles_after_checks": 1}}'
    assert main(["run", PAYMENT, "--input", payload, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    charge = next(s for s in record["steps"] if s["key"] == "charge")
    assert charge["attempts"] == 3 and charge["error"] == "Relayflow.ExpressionError"


@pytest.mark.integration
def test_run_exits_1_when_the_run_fails(tmp_path, capsys):
    failing = tmp_path / "fail.yaml"
    failing.write_text("id: f\nstart: a\nsteps:\n  a: {type: transform, mapping: '{{ 1 / 0 }}'}\n")
    assert main(["run", str(failing), "--json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == "failed" and record["error"] == "Relayflow.ExpressionError"


def test_bad_input_is_a_usage_error(capsys):
    assert main(["run", EXAMPLE, "--input", "{not json"]) == 2
    assert "--input is not valid JSON" in capsys.readouterr().err
    assert main(["run", EXAMPLE, "--input", "@/nonexistent.json"]) == 2


@pytest.mark.integration
def test_the_support_triage_demo_routes_on_the_agents_outcome_and_prints_its_tokens(capsys):
    # Given the demo's agent example, its ticket and its local customer table
    example = str(ROOT / "workflows/examples/support_triage.yaml")
    payload = "@" + str(ROOT / "events/examples/support_triage.json")
    resources = str(ROOT / "workflows/examples/local/support_triage.resources.yaml")
    # When it runs (scripted model, offline)
    assert main(["run", example, "--input", payload, "--resources", resources]) == 0
    out = capsys.readouterr().out
    # Then the agent looked the customer up, picked refund, and the run routed there
    assert "issue_refund" in out and "escalate" not in out.split("output steps:")[0]
    assert (
        "AI step triage: 1008 input + 122 output tokens on scripted:support_triage, "
        "est. $0.000000" in out
    )
    # And the final document keeps only the live output: the refund, noting the agent's answer
    steps = json.loads(out.split("output steps:", 1)[1])
    assert list(steps) == ["issue_refund"]
    assert steps["issue_refund"]["output"]["action"] == "refund"
    # And the agent's own output is in the run's timeline (--json `steps`)
    assert main(["run", example, "--input", payload, "--resources", resources, "--json"]) == 0
    timeline = json.loads(capsys.readouterr().out)["steps"]
    (triage,) = [step["output"] for step in timeline if step["key"] == "triage"]
    assert triage["outcome"] == "refund"
    assert triage["tool_calls"][0]["output"]["item"]["standing"] == "good"
    assert steps["issue_refund"]["output"]["note"] == triage["response"]
