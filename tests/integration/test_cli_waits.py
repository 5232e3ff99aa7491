"""``relayflow run`` on a workflow that waits: the note says so as soon as the run waits,
and on a terminal the approval (or waitpoint) is answered at the prompt and the run goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from relayflow.cli.main import main

pytestmark = pytest.mark.integration

APPROVAL = """
id: refund-cli
start: ask
steps:
  ask:
    type: approval
    title: "Refund {{ trigger.order }}"
    prompt: "Pay it back?"
    timeout_seconds: 600
    on_approve: pay
    on_reject: keep
  pay: {type: transform, mapping: {refunded: true}}
  keep: {type: transform, mapping: {refunded: false}}
"""

WAITPOINT = """
id: label-cli
start: label
steps:
  label: {type: waitpoint, timeout_seconds: 600, on_success: done}
  done: {type: transform, mapping: {got: "{{ steps.label.output }}"}}
"""


def on_a_terminal(monkeypatch: pytest.MonkeyPatch, answers: list[str]) -> list[str]:
    asked: list[str] = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return answers.pop(0)

    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", ask)
    return asked


def test_an_approval_is_decided_at_the_prompt(tmp_path: Path, monkeypatch, capsys):
    path = tmp_path / "refund.yaml"
    path.write_text(APPROVAL)
    asked = on_a_terminal(monkeypatch, ["maybe", "reject"])
    code = main(["run", str(path), "--input", '{"order": "A1"}', "--timeout", "120"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert asked == ["    decide (approve/reject): "] * 2  # "maybe" was not an option
    assert "approval 'Refund A1': Pay it back?" in out.err
    assert "keep" in out.out and "pay " not in out.out


def test_a_waitpoint_is_completed_with_json_at_the_prompt(tmp_path, monkeypatch, capsys):
    path = tmp_path / "label.yaml"
    path.write_text(WAITPOINT)
    on_a_terminal(monkeypatch, ["{not json", '{"tracking": "Z9"}'])
    code = main(["run", str(path), "--timeout", "120"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "not JSON" in out.err
    assert '"tracking":"Z9"' in out.out.replace(" ", "")


def test_without_a_terminal_the_wait_and_a_park_are_named_at_once(capsys):
    from relayflow.cli.run_waits import waiting_progress
    from relayflow.validation import load_workflow_text

    workflow = load_workflow_text(APPROVAL, "refund.yaml")
    seen: list[str] = []
    on_event = waiting_progress(workflow, lambda e: seen.append(e["type"]), timeout=300, ask=None)
    for name in ("ask", "ask", "pay.park"):
        on_event({"type": "TaskStateEntered", "stateEnteredEventDetails": {"name": name}})
    err = capsys.readouterr().err
    assert seen == ["TaskStateEntered"] * 3  # the progress output still sees every event
    assert err.count("step 'ask' (approval) waits for a decision") == 1
    assert "relayflow serve" in err and "/console" in err and "--timeout (300 s)" in err
    assert "step 'pay' failed and parked the run" in err
    assert "relayflow runs resume RUN_ID" in err


FAILING = """
id: failing
start: call
steps:
  call: {type: webhook_out, url: "http://127.0.0.1:9/x"}
"""


def test_a_failed_step_prints_one_concise_error_and_verbose_shows_the_rest(tmp_path):
    import subprocess

    from http_api import relayflow_command

    path = tmp_path / "failing.yaml"
    path.write_text(FAILING)

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            relayflow_command("run", str(path), "--timeout", "120", *extra),
            capture_output=True,
            text=True,
            timeout=180,
        )

    quiet = run()
    assert quiet.returncode == 1
    # One line for the failed step on stderr; no JSON log lines, tracebacks or moto dumps
    assert "Traceback" not in quiet.stderr and '{"level"' not in quiet.stderr
    failures = [line for line in quiet.stderr.splitlines() if line.startswith("    ! ")]
    assert failures == [failures[0]] and "Relayflow.SsrfBlocked: blocked:" in failures[0]
    assert "error at step call: Relayflow.SsrfBlocked: blocked:" in quiet.stdout
    assert "errorType" not in quiet.stdout  # the message, not the JSON cause
    verbose = run("--verbose")
    assert '"level":"WARNING"' in verbose.stderr and "Traceback" in verbose.stderr
    assert "cause: " in verbose.stdout
