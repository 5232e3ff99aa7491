"""The ASL shapes Relayflow's compiler emits run end to end on the local runtime."""

from __future__ import annotations

import pytest
from local_asl import machine, pass_state
from relayflow_testing import record_scaled_sleeps

from relayflow.document import StepRef, StepTask, execution_input, task_parameters
from relayflow.errors import TransientError
from relayflow.naming import function_arn, function_name

pytestmark = pytest.mark.integration


def step_task(kind: str, key: str, config: dict, next_state: str, **extra) -> dict:
    """A Task the way the compiler writes one: state name = step key."""
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": task_parameters(
            function_arn(kind), StepRef(key=key, type=kind, config=config)
        ),
        "ResultSelector": {
            "output.$": "$.Payload.output",
            "branch.$": "$.Payload.branch",
            "status": "succeeded",
        },
        "ResultPath": f"$.steps.{key}",
        "TimeoutSeconds": 30,
        "Next": next_state,
        **extra,
    }


def condition_handler(event, context):
    task = StepTask.model_validate(event)
    if task.doc["trigger"].get("flaky") and task.context.attempt == 0:
        raise TransientError("first attempt fails")
    total = task.doc["trigger"]["amount"] * task.step.config["factor"]
    return {
        "output": {"total": total, "attempt": task.context.attempt, "state": task.context.state},
        "branch": "big" if total > 100 else "small",
    }


def test_a_compiled_shaped_workflow_runs_end_to_end(rt, monkeypatch):
    # Given a workflow shaped like compiled Relayflow ASL, served by relayflow-condition
    rt.register_handler(function_name("condition"), condition_handler)
    retry = [
        {
            "ErrorEquals": ["Relayflow.Transient"],
            "IntervalSeconds": 2,
            "BackoffRate": 2,
            "MaxAttempts": 3,
        }
    ]
    catch = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "failed"}]
    asl = machine(
        {
            "score": step_task(
                "condition", "score", {"factor": 3}, "route", Retry=retry, Catch=catch
            ),
            "route": {
                "Type": "Choice",
                "Choices": [
                    {
                        "And": [
                            {"Variable": "$.steps.score.branch", "StringEquals": "big"},
                            {"Not": {"Variable": "$.trigger.vip", "BooleanEquals": True}},
                            {
                                "Or": [
                                    {
                                        "Variable": "$.steps.score.output.total",
                                        "NumericGreaterThanPath": "$.trigger.amount",
                                    },
                                    {"Variable": "$.trigger.note", "IsNull": True},
                                ]
                            },
                        ],
                        "Next": "fan_out",
                    }
                ],
                "Default": "small",
            },
            "small": {"Type": "Succeed"},
            "fan_out": {
                "Type": "Parallel",
                "Branches": [
                    machine(
                        {
                            "fan_out.a": pass_state(
                                Parameters={"a.$": "States.MathAdd($.steps.score.output.total, 1)"}
                            )
                        }
                    ),
                    machine(
                        {
                            "fan_out.b": pass_state(
                                Parameters={"b.$": "States.StringToJson($.trigger.json)"}
                            )
                        }
                    ),
                ],
                "ResultSelector": {
                    "output.$": "States.JsonMerge($[0], $[1], false)",
                    "status": "succeeded",
                },
                "ResultPath": "$.steps.fan_out",
                "Next": "each",
            },
            "each": {
                "Type": "Map",
                "ItemsPath": "$.trigger.lines",
                "MaxConcurrency": 2,
                "ItemSelector": {
                    "item.$": "$$.Map.Item.Value",
                    "index.$": "$$.Map.Item.Index",
                    "doc.$": "$",
                },
                "ItemProcessor": {
                    "StartAt": "each.body",
                    "States": {
                        "each.body": pass_state(
                            Parameters={
                                "label.$": "States.Format('{}#{} of {}', "
                                "$.item.sku, $.index, $.doc.run.workflow_id)"
                            }
                        )
                    },
                },
                "ResultSelector": {"output.$": "$", "status": "succeeded"},
                "ResultPath": "$.steps.each",
                "Next": "pause",
            },
            "pause": {"Type": "Wait", "SecondsPath": "$.trigger.pause", "Next": "summary"},
            "summary": pass_state(
                "done",
                Parameters={
                    "execution.$": "$$.Execution.Id",
                    "name.$": "$$.Execution.Name",
                    "started.$": "$$.Execution.StartTime",
                    "state.$": "$$.State.Name",
                    "labels.$": "$.steps.each.output[*].label",
                    "firstLabel.$": "$.steps.each.output[0].label",
                    "pair.$": "States.Array($.steps.fan_out.output.a, $.steps.fan_out.output.b.k)",
                },
                ResultPath="$.steps.summary",
            ),
            "done": {"Type": "Succeed"},
            "failed": {"Type": "Fail", "Error": "Relayflow.StepFailed", "Cause": "a step failed"},
        },
        TimeoutSeconds=60,
    )
    doc = execution_input(
        "orders",
        {
            "amount": 50,
            "flaky": True,
            "vip": False,
            "note": None,
            "json": '{"k": "v"}',
            "pause": 30,
            "lines": [{"sku": "A"}, {"sku": "B"}, {"sku": "C"}],
        },
        run_id="run-1",
    )

    # When it runs
    sleeps = record_scaled_sleeps(monkeypatch)
    record = rt.run("relayflow-shape", asl, doc, execution_name="run-1")

    # Then every construct produced what AWS would
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    steps = record.output["steps"]
    assert steps["score"] == {
        "output": {"total": 150, "attempt": 1, "state": "score"},
        "branch": "big",
        "status": "succeeded",
    }
    assert steps["fan_out"] == {"output": {"a": 151, "b": {"k": "v"}}, "status": "succeeded"}
    assert [o["label"] for o in steps["each"]["output"]] == [
        "A#0 of orders",
        "B#1 of orders",
        "C#2 of orders",
    ]
    summary = steps["summary"]
    assert summary["execution"].endswith(":execution:relayflow-shape:run-1")
    assert (summary["name"], summary["state"]) == ("run-1", "summary")
    assert summary["labels"] == ["A#0 of orders", "B#1 of orders", "C#2 of orders"]
    assert summary["firstLabel"] == "A#0 of orders"
    assert summary["pair"] == [151, "v"]
    assert record.state("score").attempts == 2
    assert [r.name for r in record.states if "." not in r.name] == [
        "score",
        "route",
        "fan_out",
        "each",
        "pause",
        "summary",
        "done",
    ]
    # And the 30 s pause slept 0.3 s at the scale 0.01, and took at least that
    assert (30, pytest.approx(0.3)) in sleeps
    assert record.state("pause").duration_ms >= 250
