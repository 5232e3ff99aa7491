"""What ``relayflow run`` says at a wait, per kind of wait, and when it stops the run instead
of sleeping until ``--timeout`` (relayflow.cli.run_waits); and errors read as messages in
``relayflow runs get`` and the timeline: no JSON envelope, no ``States.Timeout: None``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from relayflow.cli.run_waits import waiting_progress
from relayflow.cli.runs import _run_with_timeline
from relayflow.control.timeline import history_steps
from relayflow.runner import RunWaiting
from relayflow.validation import load_workflow_text

WAITS = """
id: waits
start: ask
steps:
  ask: {type: approval, title: "Refund?", options: [approve, reject, escalate], on_approve: label}
  label: {type: waitpoint, on_success: hear}
  hear:
    type: wait_for_event
    event: order.paid
    source: shop
    match: "event.detail.id == 1"
    on_success: call
  call: {type: webhook_out, url: "https://example.com/x", on_error: {action: park}}
"""


def entered(name: str) -> dict[str, Any]:
    return {"type": "TaskStateEntered", "stateEnteredEventDetails": {"name": name}}


def stopped_at(name: str, definition: str = WAITS, timeout: float = 300) -> dict[str, Any]:
    """The wait ``relayflow run`` stops at when the state ``name`` is entered off a terminal."""
    workflow = load_workflow_text(definition, "waits.yaml")
    on_event = waiting_progress(workflow, lambda e: None, timeout=timeout, ask=None)
    with pytest.raises(RunWaiting) as raised:
        on_event(entered(name))
    return raised.value.waiting


def test_an_approval_names_its_own_command_and_options_only():
    waiting = stopped_at("ask")
    assert waiting["step"] == "ask" and waiting["type"] == "approval"
    assert waiting["message"].startswith("step 'ask' (approval) waits for a decision")
    hint = waiting["hint"]
    assert "relayflow serve" in hint and "relayflow runs start waits" in hint
    assert "relayflow approvals respond APPROVAL_ID --option approve|reject|escalate" in hint
    assert "waitpoints" not in hint and "/events" not in hint


def test_a_waitpoint_names_how_to_complete_it():
    hint = stopped_at("label")["hint"]
    assert "relayflow waitpoints complete WAITPOINT_ID --data JSON" in hint
    assert "relayflow waitpoints list --run RUN_ID" in hint
    assert "approvals" not in hint and "/events" not in hint


def test_a_wait_for_event_names_the_event_to_publish_not_approvals_or_waitpoints():
    waiting = stopped_at("hear")
    assert waiting["waits_for"] == "a matching event"
    hint = waiting["hint"]
    assert 'POST /events {"source": "shop", "detail_type": "order.paid"' in hint
    assert "event.detail.id == 1" in hint
    assert "approvals" not in hint and "waitpoints" not in hint


def test_a_park_names_the_resume():
    waiting = stopped_at("call.park")
    assert waiting["type"] == "park"
    assert waiting["message"].startswith("step 'call' failed and parked the run")
    assert "relayflow runs resume RUN_ID --action retry|skip|fail" in waiting["hint"]


def test_a_wait_whose_own_timeout_ends_it_first_is_noted_and_the_run_goes_on(capsys):
    workflow = load_workflow_text(
        "id: w\nstart: hear\nsteps:\n"
        "  hear: {type: wait_for_event, event: e, timeout_seconds: 5, on_timeout: late}\n"
        "  late: {type: transform, mapping: {a: 1}}\n",
        "w.yaml",
    )
    on_event = waiting_progress(workflow, lambda e: None, timeout=300, ask=None)
    on_event(entered("hear"))  # no RunWaiting: its 5 s timeout comes before --timeout
    err = capsys.readouterr().err
    assert "step 'hear' (wait_for_event) waits for a matching event" in err
    assert "its timeout ends the wait within 5 s" in err and "POST /events" in err
    # and with less --timeout left than the step's timeout, the run stops
    on_event = waiting_progress(workflow, lambda e: None, timeout=3, ask=None)
    with pytest.raises(RunWaiting):
        on_event(entered("hear"))


def test_quiet_prints_no_note(capsys):
    workflow = load_workflow_text(WAITS, "waits.yaml")
    on_event = waiting_progress(workflow, lambda e: None, timeout=300, ask=None, quiet=True)
    with pytest.raises(RunWaiting):
        on_event(entered("hear"))
    assert capsys.readouterr().err == ""


def test_runs_get_prints_the_message_of_a_failed_step_not_its_json_cause():
    cause = json.dumps({"errorType": "SsrfBlocked", "errorMessage": "blocked: 127.0.0.1"})
    run = {
        "run_id": "r1",
        "workflow_id": "w",
        "version": 1,
        "status": "failed",
        "error": "Relayflow.SsrfBlocked",
        "cause": cause,
        "failing_step": "call",
        "steps": [
            {
                "key": "call",
                "type": "webhook_out",
                "status": "failed",
                "attempts": 1,
                "error": "Relayflow.SsrfBlocked",
                "cause": cause,
            },
            {
                "key": "hear",
                "type": "wait_for_event",
                "status": "caught",
                "attempts": 1,
                "error": "States.Timeout",
                "cause": None,
            },
        ],
    }
    text = _run_with_timeline(run)
    assert "failed at step call: blocked: 127.0.0.1" in text
    assert "Relayflow.SsrfBlocked: blocked: 127.0.0.1" in text
    assert "errorType" not in text and "None" not in text


def test_a_caught_wait_for_event_timeout_says_what_timed_out():
    def event(n: int, kind: str, **details: Any) -> dict[str, Any]:
        key = kind[0].lower() + kind[1:] + "EventDetails"
        if kind.endswith("StateEntered"):
            key = "stateEnteredEventDetails"
        elif kind.endswith("StateExited"):
            key = "stateExitedEventDetails"
        return {"id": n, "previousEventId": n - 1, "type": kind, key: details}

    events = [
        {"id": 1, "type": "ExecutionStarted", "executionStartedEventDetails": {"input": "{}"}},
        event(2, "TaskStateEntered", name="hear", input="{}"),
        event(3, "TaskScheduled", resource="invoke.waitForTaskToken", timeoutInSeconds=5),
        event(4, "TaskTimedOut", error="States.Timeout"),
        event(5, "TaskStateExited", name="hear", output="{}"),
        {"id": 6, "previousEventId": 5, "type": "ExecutionSucceeded"},
    ]
    [step] = history_steps({"hear": "wait_for_event"}, {"hear": "waitpoint"}, events)
    assert step.status == "caught" and step.error == "States.Timeout"
    assert step.cause == "wait_for_event 'hear' timed out after 5 s without a matching event"
