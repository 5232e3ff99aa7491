"""on_error and the run outcome without AWS: the verdict rule, the definition rules, the
compiled states' routing, reserved resume keys, and the timeline's fallback status."""

from __future__ import annotations

from typing import Any

import pytest

from relayflow.compiler import compile_workflow
from relayflow.control.outcome import compensation_status, fallbacks_used, outcome_of
from relayflow.control.resume import ResumeRequest, reserved_keys
from relayflow.control.timeline import fold_steps
from relayflow.local.history import StateRun
from relayflow.validation import validate_data

# --------------------------------------------------------------------------- outcome


@pytest.mark.parametrize(
    ("status", "fallbacks", "compensation", "expected"),
    [
        ("succeeded", False, None, "succeeded"),
        ("succeeded", True, None, "succeeded_with_fallbacks"),
        ("failed", False, None, "failed"),
        ("failed", True, None, "failed"),
        ("failed", False, "compensated", "compensated"),
        ("failed", False, "partially_compensated", "partially_compensated"),
        ("timed_out", False, None, "timed_out"),
        ("timed_out", False, "compensated", "compensated"),
        ("aborted", False, None, "cancelled"),
    ],
)
def test_the_outcome_of_each_end(status, fallbacks, compensation, expected):
    assert outcome_of(status, fallbacks_used=fallbacks, compensation=compensation) == expected


@pytest.mark.parametrize("status", ["running", "parked", "queued"])
def test_a_run_that_has_not_ended_has_no_outcome(status):
    with pytest.raises(ValueError, match="has not ended"):
        outcome_of(status, fallbacks_used=False)


def test_an_unknown_compensation_status_is_refused():
    with pytest.raises(ValueError, match="compensation must be one of"):
        outcome_of("failed", fallbacks_used=False, compensation="done")


def test_the_markers_are_read_from_the_final_document():
    assert fallbacks_used({"run_flags": {"fallbacks": True}}) is True
    assert fallbacks_used({"run_flags": {}}) is False
    assert fallbacks_used(None) is False
    assert compensation_status({"compensation": {"status": "partially_compensated"}}) == (
        "partially_compensated"
    )
    assert compensation_status({"compensation": {"status": "running"}}) is None


# --------------------------------------------------------------------------- definition rules


def definition(**charge: Any) -> dict[str, Any]:
    return {
        "id": "w",
        "start": "charge",
        "steps": {
            "charge": {"type": "webhook_out", "url": "https://x.example.com", **charge},
            "after": {"type": "noop"},
        },
    }


def problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    _, found = validate_data(data)
    return [(p.path, p.rule) for p in found]


def test_park_defaults_to_seven_days_and_reads_durations():
    workflow, found = validate_data(definition(on_error={"action": "park"}, on_success="after"))
    assert found == [] and workflow is not None
    assert workflow.steps["charge"].on_error.park_timeout == 7 * 86_400
    workflow, _ = validate_data(
        definition(on_error={"action": "park", "park_timeout": "2h"}, on_success="after")
    )
    assert workflow.steps["charge"].on_error.park_timeout == 7200


def test_continue_beside_on_failure_is_a_named_conflict():
    data = definition(on_error={"action": "continue", "output": 1}, on_failure="after")
    assert problems(data) == [("steps.charge.on_error", "on-error-conflict")]


def test_park_beside_on_failure_is_allowed():
    assert problems(definition(on_error={"action": "park"}, on_failure="after")) == []


def test_on_error_is_refused_where_it_cannot_apply():
    data = definition(on_error={"action": "park"}, on_success="after")
    data["steps"]["after"] = {"type": "noop", "on_error": {"action": "park"}}
    assert problems(data) == [("steps.after.on_error", "on-error-type")]
    inside = {
        "id": "w",
        "start": "fan",
        "steps": {
            "fan": {"type": "parallel", "branches": ["call"]},
            "call": {
                "type": "webhook_out",
                "url": "https://x.example.com",
                "on_error": {"action": "continue"},
            },
        },
    }
    assert problems(inside) == [("steps.call.on_error", "on-error-scope")]


def test_a_fallback_template_is_checked_and_may_read_error():
    good = definition(
        on_error={"action": "continue", "output": "{{ error.Cause }}"}, on_success="after"
    )
    assert problems(good) == []
    bad = definition(
        on_error={"action": "continue", "output": "{{ steps.nope.output }}"}, on_success="after"
    )
    assert problems(bad) == [("steps.charge.on_error.output", "unknown-step-reference")]


# --------------------------------------------------------------------------- compiled routing


def test_park_routes_retry_to_the_step_skip_to_its_success_and_fail_to_on_failure():
    data = definition(on_error={"action": "park"}, on_success="after", on_failure="undo")
    data["steps"]["undo"] = {"type": "noop"}
    workflow, _ = validate_data(data)
    states = compile_workflow(workflow).asl["States"]
    assert states["charge"]["Catch"][-1]["Next"] == "charge.park"
    decide = {c["StringEquals"]: c["Next"] for c in states["charge.park.decide"]["Choices"]}
    assert decide == {"retry": "charge", "skip": "charge.park.skip"}
    assert states["charge.park.skip"]["Next"] == "after"
    assert states["charge.park.timeout"]["Result"]["Error"] == "Relayflow.ParkTimeout"
    assert states["charge.park.timeout"]["Next"] == "charge.park.failed"
    assert states["charge.park.failed"]["Next"] == "undo"
    assert states["charge.park"]["TimeoutSeconds"] == 7 * 86_400


def test_park_without_a_failure_route_fails_the_run_with_the_error():
    workflow, _ = validate_data(definition(on_error={"action": "park"}, on_success="after"))
    compiled = compile_workflow(workflow)
    states = compiled.asl["States"]
    assert states["charge.park.failed"]["Next"] == "charge.failed"
    assert states["charge.failed"] == {
        "Type": "Fail",
        "ErrorPath": "$.error.Error",
        "CausePath": "$.error.Cause",
    }
    # The state machine may invoke the waitpoint function that serves the park
    invoked = {r for s in compiled.iam_statements for r in s["Resource"]}
    assert any(r.endswith(":function:relayflow-waitpoint") for r in invoked)


def test_the_workflow_handler_takes_a_failed_park():
    data = definition(on_error={"action": "park"}, on_success="after")
    data["errors"] = {"on_failure": "alert"}
    data["steps"]["alert"] = {"type": "noop"}
    workflow, _ = validate_data(data)
    states = compile_workflow(workflow).asl["States"]
    assert states["charge.park.failed"]["Next"] == "alert"


# --------------------------------------------------------------------------- resume, timeline


def test_reserved_context_keys_are_every_engine_owned_key():
    context = {"run": 1, "steps": 1, "error": 1, "trigger": 1, "retry_charge": 1, "note": 1}
    assert reserved_keys(context) == ["error", "retry_charge", "run", "steps", "trigger"]
    assert reserved_keys(None) == []


def test_a_resume_request_names_one_of_three_actions():
    with pytest.raises(ValueError):
        ResumeRequest.model_validate({"action": "ignore"})
    with pytest.raises(ValueError):
        ResumeRequest.model_validate({"action": "retry", "extra": 1})


def state(name: str, status: str, output: Any = None, **extra: Any) -> StateRun:
    return StateRun(name=name, type="Task", status=status, output=output, **extra)


def test_the_timeline_reads_fallback_and_parked():
    record = {"steps": {"charge": {"output": {"id": None}, "status": "fallback"}}}
    steps = fold_steps(
        {"charge": "webhook_out"},
        {"charge": "webhook_out"},
        [state("charge", "caught"), state("charge.fallback", "succeeded", record)],
    )
    assert [(s.key, s.status, s.output) for s in steps] == [("charge", "fallback", {"id": None})]
    waiting = fold_steps(
        {"charge": "webhook_out"},
        {"charge": "webhook_out"},
        [state("charge", "caught"), state("charge.park", "running")],
    )
    assert [s.status for s in waiting] == ["parked"]


def test_relayflow_run_reports_the_outcome_from_the_final_document():
    from relayflow.runner import RunResult

    def result(status: str, output: Any) -> RunResult:
        return RunResult("r", "w", status, output, None, None)

    assert result("succeeded", {"run_flags": {"fallbacks": True}}).outcome == (
        "succeeded_with_fallbacks"
    )
    assert result("succeeded", {"steps": {}}).to_dict()["outcome"] == "succeeded"
    assert result("aborted", None).outcome == "cancelled"
    assert result("running", None).outcome is None
