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
    from relayflow.runner import RunWaiting
    from relayflow.validation import load_workflow_text

    workflow = load_workflow_text(APPROVAL, "refund.yaml")
    seen: list[str] = []
    # A wait is named once, and stops the run: nothing here answers it, and its
    # timeout_seconds (600 s) would not end it within --timeout (300 s)
    on_event = waiting_progress(workflow, lambda e: seen.append(e["type"]), timeout=300, ask=None)
    with pytest.raises(RunWaiting) as ask:
        on_event({"type": "TaskStateEntered", "stateEnteredEventDetails": {"name": "ask"}})
    on_event({"type": "TaskStateEntered", "stateEnteredEventDetails": {"name": "ask"}})
    with pytest.raises(RunWaiting) as park:
        on_event({"type": "TaskStateEntered", "stateEnteredEventDetails": {"name": "pay.park"}})
    assert seen == ["TaskStateEntered"] * 3  # the progress output still sees every event
    assert ask.value.waiting["message"].startswith("step 'ask' (approval) waits for a decision")
    assert "relayflow serve" in ask.value.waiting["hint"]
    assert "/console" in ask.value.waiting["hint"]
    assert park.value.waiting["message"].startswith("step 'pay' failed and parked the run")
    assert "relayflow runs resume RUN_ID" in park.value.waiting["hint"]
    assert capsys.readouterr().err == ""  # the command prints the stop, not the note


EVENT = """
id: paid-cli
start: hear
steps:
  hear: {type: wait_for_event, event: order.paid, source: shop, on_success: done}
  done: {type: transform, mapping: {ok: true}}
"""


def test_a_run_waiting_for_an_event_stops_at_once_with_exit_4_and_the_command(tmp_path, capsys):
    path = tmp_path / "paid.yaml"
    path.write_text(EVENT)
    # --timeout far beyond what the test allows: the run stops at the wait, not at --timeout
    code = main(["run", str(path), "--timeout", "3600"])
    out = capsys.readouterr()
    assert code == 4, out.err
    assert "step 'hear' (wait_for_event) waits for a matching event" in out.err
    assert "stopped at once instead of waiting for --timeout" in out.err
    assert 'POST /events {"source": "shop", "detail_type": "order.paid"' in out.err
    assert "approvals" not in out.err and "waitpoints" not in out.err
    assert "hear  wait_for_event  waitpoint  waiting" in out.out


def test_json_on_a_terminal_asks_nothing_and_prints_the_waiting_run(tmp_path, monkeypatch, capsys):
    import json

    path = tmp_path / "refund.yaml"
    path.write_text(APPROVAL)
    asked = on_a_terminal(monkeypatch, [])
    # (its timeout_seconds, 600 s, would not end the wait within --timeout)
    code = main(["run", str(path), "--input", '{"order": "A1"}', "--json", "--timeout", "300"])
    out = capsys.readouterr()
    assert code == 4, out.err
    assert asked == []  # --json prints no prompt, on a terminal too
    run = json.loads(out.out)
    assert run["status"] == "waiting" and run["error"] is None
    assert run["waiting"]["step"] == "ask" and run["waiting"]["type"] == "approval"
    assert (
        "relayflow approvals respond APPROVAL_ID --option approve|reject"
        in (run["waiting"]["hint"])
    )
    assert [(s["key"], s["status"]) for s in run["steps"]] == [("ask", "waiting")]


CAUGHT_TIMEOUT = """
id: late-cli
start: hear
steps:
  hear: {type: wait_for_event, event: order.paid, timeout_seconds: 1, on_timeout: late}
  late: {type: transform, mapping: {late: true}}
"""


def test_a_caught_wait_for_event_timeout_says_what_timed_out(tmp_path, capsys):
    path = tmp_path / "late.yaml"
    path.write_text(CAUGHT_TIMEOUT)
    # Its own 1 s timeout ends the wait before --timeout: the run goes on to on_timeout
    code = main(["run", str(path), "--timeout", "120"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "its timeout ends the wait within 1 s" in out.err
    assert "States.Timeout: wait_for_event 'hear' timed out after 1 s" in out.out
    assert "None" not in out.out


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
