"""The compiler: golden ASL per step type, determinism, native-vs-Lambda choice, IAM."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from relayflow.compiler import CompileOptions, compile_workflow, to_mermaid
from relayflow.validation import load_workflow
from relayflow.validation.validate import validate_data

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.yaml"))


@pytest.mark.parametrize("case", CASES)
def test_compiled_asl_matches_golden_file(case):
    # Given a definition / When compiled
    compiled = compile_workflow(load_workflow(GOLDEN / f"{case}.yaml"))
    got = json.dumps(compiled.asl, indent=2) + "\n"
    expected_path = GOLDEN / f"{case}.asl.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        expected_path.write_text(got)
    # Then the ASL is exactly the reviewed golden file (UPDATE_GOLDEN=1 rewrites it)
    assert got == expected_path.read_text(), f"{case}: ASL differs from {expected_path.name}"


def test_every_available_step_type_has_a_golden_case():
    from relayflow.definition import AVAILABLE_STEP_TYPES

    covered = set()
    for case in CASES:
        covered |= {s.type for s in load_workflow(GOLDEN / f"{case}.yaml").steps.values()}
    assert covered >= AVAILABLE_STEP_TYPES


def test_compilation_is_deterministic():
    workflow = load_workflow(GOLDEN / "parallel.yaml")
    first = json.dumps(compile_workflow(workflow).asl)
    assert all(json.dumps(compile_workflow(workflow).asl) == first for _ in range(3))


def test_native_steps_cost_no_lambda():
    compiled = compile_workflow(load_workflow(GOLDEN / "condition_native.yaml"))
    assert compiled.step_runners == {"check": "native", "no": "native", "yes": "native"}
    assert compiled.functions == []
    assert compiled.iam_actions == sorted(
        [
            "xray:GetSamplingRules",
            "xray:GetSamplingTargets",
            "xray:PutTelemetryRecords",
            "xray:PutTraceSegments",
        ]
    )


def test_expressions_that_do_not_map_to_asl_use_the_step_lambda():
    compiled = compile_workflow(load_workflow(GOLDEN / "transform_lambda.yaml"))
    assert compiled.step_runners == {"total": "transform"}
    (invoke,) = [s for s in compiled.iam_statements if "lambda:InvokeFunction" in s["Action"]]
    assert (
        "arn:aws:lambda:us-east-1:123456789012:function:relayflow-transform" in invoke["Resource"]
    )


def test_function_arns_come_from_options():
    options = CompileOptions(function_arns={"condition": "arn:aws:lambda:eu-west-1:1:function:c"})
    compiled = compile_workflow(load_workflow(GOLDEN / "condition_lambda.yaml"), options)
    task = compiled.asl["States"]["check"]
    assert task["Parameters"]["FunctionName"] == "arn:aws:lambda:eu-west-1:1:function:c"
    assert compiled.iam_statements[0]["Resource"] == [
        "arn:aws:lambda:eu-west-1:1:function:c",
        "arn:aws:lambda:eu-west-1:1:function:c:*",
    ]


def test_a_step_with_a_retry_policy_runs_in_its_lambda_even_when_expressible():
    compiled = compile_workflow(load_workflow(GOLDEN / "retry_policies.yaml"))
    assert compiled.step_runners["exp"] == "transform"
    state = compiled.asl["States"]["exp"]
    assert state["TimeoutSeconds"] == 10
    policy = state["Retry"][-1]
    assert policy == {
        "ErrorEquals": ["States.ALL"],
        "IntervalSeconds": 2,
        "MaxAttempts": 3,
        "BackoffRate": 2.0,
        "MaxDelaySeconds": 20,
        "JitterStrategy": "FULL",
    }
    # errors that cannot succeed on retry are excluded before the catch-all retrier
    assert state["Retry"][-2] == {
        "ErrorEquals": [
            "Relayflow.InvalidArgs",
            "Relayflow.ExpressionError",
            "Relayflow.HttpError",
            "Relayflow.ToolNotFound",
            "Relayflow.SsrfBlocked",
            "Relayflow.CodeError",
            "Relayflow.CodeLimitExceeded",
            "Relayflow.PayloadTooLarge",
        ],
        "MaxAttempts": 0,
    }


def load_workflow_data(data: dict) -> object:
    workflow, problems = validate_data(data)
    assert workflow is not None and not problems, problems
    return workflow


def test_only_a_machine_with_an_ai_step_lists_the_ai_errors_as_not_retryable():
    retried = {"max_attempts": 3, "backoff": "exponential"}
    plain = compile_workflow(
        load_workflow_data(
            {
                "id": "p",
                "start": "t",
                "steps": {"t": {"type": "code", "code": "x", "retry": retried}},
            }
        )
    ).asl
    with_agent = compile_workflow(
        load_workflow_data(
            {
                "id": "a",
                "start": "t",
                "steps": {
                    "t": {"type": "code", "code": "x", "retry": retried, "on_success": "ask"},
                    "ask": {"type": "agent", "model": "scripted:x", "prompt": "hi"},
                },
            }
        )
    ).asl

    def not_retried(asl: dict) -> list[str]:
        return next(r for r in asl["States"]["t"]["Retry"] if r["MaxAttempts"] == 0)["ErrorEquals"]

    # A tool or code step can never raise an agent's errors: its retrier need not list them
    assert "Relayflow.AgentMaxTurns" not in not_retried(plain)
    assert "Relayflow.CodeError" in not_retried(plain)
    # Where an agent runs, its deterministic failures are never retried
    assert "Relayflow.AgentMaxTurns" in not_retried(with_agent)
    assert "Relayflow.BatchFailed" in not_retried(with_agent)


def test_cycles_get_a_step_counter():
    asl = compile_workflow(load_workflow(GOLDEN / "cycle.yaml")).asl
    assert asl["StartAt"] == "_init"
    assert asl["States"]["pause"]["Next"] == "tick.loop"
    guard = asl["States"]["tick.guard"]["Choices"][0]
    assert guard["NumericGreaterThan"] == 25
    # the workflow's error route receives the error, as it would from a Catch
    assert asl["States"]["tick.exceeded"] == {
        "Type": "Pass",
        "Next": "report",
        "Result": {
            "Error": "Relayflow.MaxStepsExceeded",
            "Cause": "the run exceeded max_steps_per_run (25) in the cycle through 'tick'",
        },
        "ResultPath": "$.error",
    }


def test_run_timeout_becomes_state_machine_timeout():
    workflow = load_workflow(GOLDEN / "noop.yaml")
    workflow = workflow.model_copy(update={"run_timeout_seconds": 42})
    assert compile_workflow(workflow).asl["TimeoutSeconds"] == 42


def test_mermaid_graph_shows_steps_and_routes():
    text = to_mermaid(load_workflow(GOLDEN / "retry_policies.yaml"))
    assert text.startswith("flowchart TD\n")
    assert "    exp --> fixed" in text
    assert "    fixed -. on_failure .-> handle" in text


def test_a_flow_controlled_step_waits_on_its_own_retrier_and_runs_in_its_lambda():
    from relayflow.validation import load_workflow_text

    workflow = load_workflow_text(
        """
id: flow
start: shape
steps:
  shape:
    type: transform
    mapping: "{{ trigger.x }}"
    concurrency: {limit: 1}
    retry: {max_attempts: 2, backoff: fixed, base_seconds: 1}
"""
    )
    compiled = compile_workflow(workflow)
    # a plain path would be a native Pass; the concurrency limit needs the Lambda to hold it
    assert compiled.step_runners == {"shape": "transform"}
    retry = compiled.asl["States"]["shape"]["Retry"]
    throttled = [r for r in retry if r["ErrorEquals"] == ["Relayflow.Throttled"]]
    assert throttled and throttled[0]["MaxAttempts"] == 25
    # the step's own policy stays as declared, after the throttle retrier
    assert retry[-1]["MaxAttempts"] == 1 and retry.index(throttled[0]) < len(retry) - 1


def test_flow_control_keys_are_checked_templates():
    from relayflow.validation import validate_data

    _, problems = validate_data(
        {
            "id": "wf",
            "start": "a",
            "steps": {
                "a": {
                    "type": "transform",
                    "mapping": 1,
                    "concurrency": {"limit": 1, "key": "{{ order.customer }}"},
                }
            },
        }
    )
    assert [(p.path, p.rule) for p in problems] == [("steps.a.concurrency.key", "unknown-variable")]


def test_a_wait_for_event_without_timeout_has_no_timeout_route():
    from relayflow.compiler.check import assert_valid_machine
    from relayflow.validation import validate_data

    # Given a wait with no timeout_seconds (it waits until an event matches)
    workflow, problems = validate_data(
        {"id": "w", "start": "s0", "steps": {"s0": {"type": "wait_for_event", "event": "e"}}}
    )
    assert workflow is not None, problems
    asl = compile_workflow(workflow).asl
    # Then no States.Timeout catcher and no unreachable Fail state are compiled
    assert "s0.timeout" not in asl["States"]
    catches = asl["States"]["s0"].get("Catch", [])
    assert all("States.Timeout" not in c["ErrorEquals"] for c in catches)
    assert_valid_machine(asl)
