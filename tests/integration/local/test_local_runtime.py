"""LocalRuntime: running ASL, execution records, errors, retries and invocations."""

from __future__ import annotations

import json

import pytest
from local_asl import machine, pass_state, task

from relayflow.local import ExecutionWaitTimeout

pytestmark = pytest.mark.integration


def test_run_returns_output_states_and_timings(rt):
    # Given a two-state machine: a Lambda Task, then a Pass that reshapes its output
    asl = machine(
        {
            "Call": task("echo", next_state="Shape"),
            "Shape": pass_state(Parameters={"echoed.$": "$.value", "run.$": "$$.Execution.Name"}),
        }
    )

    # When it runs with a named execution
    record = rt.run("run-basic", asl, {"value": 42}, execution_name="exec-1")

    # Then the record carries status, input, output and one run per state
    assert record.status == "SUCCEEDED"
    assert record.succeeded
    assert record.input == {"value": 42}
    assert record.output == {"echoed": 42, "run": "exec-1"}
    assert [(s.name, s.type, s.status) for s in record.states] == [
        ("Call", "Task", "succeeded"),
        ("Shape", "Pass", "succeeded"),
    ]
    call = record.state("Call")
    assert call.attempts == 1
    assert call.output == {"value": 42}
    assert call.duration_ms is not None and call.duration_ms >= 0
    assert record.started_at <= call.started_at <= call.ended_at <= record.stopped_at
    # and the raw history is JSON-serialisable
    json.dumps(record.events)
    assert record.event_types()[0] == "ExecutionStarted"
    assert record.event_types()[-1] == "ExecutionSucceeded"


def test_transient_error_is_retried_then_succeeds(rt):
    # Given a Task that fails twice with Relayflow.Transient, retried on that error name
    asl = machine(
        {
            "Charge": task(
                "flaky",
                payload={
                    "key": "retry-then-succeed",
                    "failures": 2,
                    "attempt.$": "$$.State.RetryCount",
                },
                Retry=[
                    {
                        "ErrorEquals": ["Relayflow.Transient"],
                        "IntervalSeconds": 1,
                        "MaxAttempts": 3,
                    }
                ],
            )
        }
    )

    # When it runs
    record = rt.run("retry-transient", asl, {})

    # Then the third attempt succeeds and the state shows 3 attempts
    assert record.status == "SUCCEEDED"
    assert record.output == {"key": "retry-then-succeed", "attempt": 3}
    assert record.state("Charge").attempts == 3
    assert record.state("Charge").status == "succeeded"
    # and the endpoint served three invocations, two of them failed with the named error
    calls = rt.invocations_of("flaky")
    assert [c.error_type for c in calls] == ["Relayflow.Transient", "Relayflow.Transient", None]
    # and each attempt saw its retry count in $$.State.RetryCount
    assert [c.payload["attempt"] for c in calls] == [0, 1, 2]


def test_named_error_is_caught_with_error_and_cause(rt):
    # Given a Task raising Relayflow.InvalidArgs with a Catch on that name
    asl = machine(
        {
            "Validate": task(
                "fail-invalid",
                next_state="Done",
                Catch=[
                    {
                        "ErrorEquals": ["Relayflow.Transient"],
                        "ResultPath": "$.wrong",
                        "Next": "Done",
                    },
                    {
                        "ErrorEquals": ["Relayflow.InvalidArgs"],
                        "ResultPath": "$.error",
                        "Next": "Handle",
                    },
                ],
            ),
            "Handle": pass_state(),
            "Done": pass_state(),
        }
    )

    # When it runs
    record = rt.run("catch-named", asl, {"amount": -1})

    # Then the second catcher takes over with {Error, Cause} as AWS Lambda reports them
    assert record.status == "SUCCEEDED"
    error = record.output["error"]
    assert error["Error"] == "Relayflow.InvalidArgs"
    cause = json.loads(error["Cause"])
    assert cause["errorType"] == "Relayflow.InvalidArgs"
    assert cause["errorMessage"] == "amount must be positive"
    assert isinstance(cause["stackTrace"], list)
    assert "wrong" not in record.output
    validate = record.state("Validate")
    assert validate.status == "caught"
    assert validate.error == "Relayflow.InvalidArgs"
    assert [s.name for s in record.states] == ["Validate", "Handle"]


def test_retry_exhausted_then_uncaught_fails_the_execution(rt):
    # Given a Task that always fails transiently, retried twice, with no Catch
    asl = machine(
        {
            "Call": task(
                "fail-transient",
                payload={"key": "k1"},
                Retry=[{"ErrorEquals": ["States.TaskFailed"], "MaxAttempts": 2}],
            )
        }
    )

    # When it runs
    record = rt.run("retry-exhausted", asl, {})

    # Then the execution fails with the handler's error name and the Lambda body as cause
    assert record.status == "FAILED"
    assert record.error == "Relayflow.Transient"
    assert json.loads(record.cause)["errorMessage"] == "upstream unavailable for k1"
    assert record.output is None
    call = record.state("Call")
    assert (call.status, call.attempts, call.error) == ("failed", 3, "Relayflow.Transient")
    assert len(rt.invocations_of("fail-transient")) == 3


def test_invocations_record_function_payload_and_timing(rt):
    # Given a Task invoking a function through its full ARN with an alias
    arn = "arn:aws:lambda:us-east-1:123456789012:function:echo:live"
    asl = machine({"Call": task(arn, payload={"n.$": "$.n", "attempt.$": "$$.State.RetryCount"})})

    # When it runs
    rt.run("invocation-record", asl, {"n": 7})

    # Then the endpoint recorded one invocation with the decoded name and payload
    (call,) = rt.invocations
    assert call.function_name == "echo"
    assert call.qualifier == "live"
    assert call.kind is None
    assert call.payload == {"n": 7, "attempt": 0}
    assert call.result == {"n": 7, "attempt": 0}
    assert call.error_type is None
    assert call.duration_ms >= 0
    assert call.started_at <= call.ended_at
    assert call.thread


def test_on_event_sees_every_history_event_in_order(rt):
    # Given a machine with a scaled Wait between two Pass states
    asl = machine(
        {
            "A": pass_state("W"),
            "W": {"Type": "Wait", "Seconds": 20, "Next": "B"},
            "B": pass_state(),
        }
    )
    seen = []

    # When it runs with an on_event callback
    record = rt.run("on-event", asl, {}, on_event=seen.append)

    # Then the callback received exactly the history, in order
    assert [e["id"] for e in seen] == [e["id"] for e in record.events]
    assert seen[-1]["type"] == "ExecutionSucceeded"


def test_wait_gives_up_with_the_running_record(rt):
    # Given an execution blocked in a long scaled Wait (1000 s -> 10 s)
    asl = machine({"W": {"Type": "Wait", "Seconds": 1000, "End": True}})
    arn = rt.start_execution(rt.create_state_machine("wait-timeout", asl), {})

    # When waiting for less time than it needs
    with pytest.raises(ExecutionWaitTimeout) as raised:
        rt.wait(arn, timeout=0.2)

    # Then the error carries the running record; stopping it aborts the execution
    assert raised.value.record.status == "RUNNING"
    assert raised.value.record.states[-1].status == "running"
    rt.stop_execution(arn, error="Test.Stop", cause="done waiting")
    record = rt.wait(arn, timeout=30)
    assert record.status == "ABORTED"
    assert (record.error, record.cause) == ("Test.Stop", "done waiting")
    assert record.states[-1].status == "aborted"


def test_map_iterations_are_reported_with_their_index(rt):
    # Given an inline Map over three items calling a Lambda per item
    asl = machine(
        {
            "Each": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "ItemSelector": {"value.$": "$$.Map.Item.Value", "index.$": "$$.Map.Item.Index"},
                "MaxConcurrency": 2,
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "Work",
                    "States": {"Work": task("echo")},
                },
                "End": True,
            }
        }
    )

    # When it runs
    record = rt.run("map-index", asl, {"items": ["a", "b", "c"]})

    # Then the output keeps item order and each inner run knows its iteration
    assert record.output == [
        {"value": "a", "index": 0},
        {"value": "b", "index": 1},
        {"value": "c", "index": 2},
    ]
    assert record.state("Each").status == "succeeded"
    work = record.runs("Work")
    assert sorted(run.iteration for run in work) == [0, 1, 2]
    assert all(run.output["value"] == "abc"[run.iteration] for run in work)
    assert len(rt.invocations_of("echo")) == 3


def test_started_execution_can_be_awaited_separately(rt):
    # Given a state machine created once and started twice
    arn = rt.create_state_machine("started-twice", machine({"Call": task("echo")}))
    first = rt.start_execution(arn, {"n": 1})
    second = rt.start_execution(arn, {"n": 2}, name="second")

    # When both are awaited
    records = [rt.wait(first), rt.wait(second)]

    # Then each has its own output and the named one kept its name
    assert [r.output for r in records] == [{"n": 1}, {"n": 2}]
    assert records[1].name == "second"
    assert set(rt.list_executions(arn)) >= {first, second}
    # and updating the definition keeps the same ARN
    assert rt.create_state_machine("started-twice", machine({"P": pass_state()})) == arn
    assert rt.run("started-twice", machine({"P": pass_state()}), {"x": 1}).output == {"x": 1}


def test_handlers_can_be_registered_while_open(rt):
    # Given a handler registered after the runtime opened
    rt.register_handler("late", lambda event, context: {"late": context.function_name})

    # When a Task invokes it
    record = rt.run("late-handler", machine({"Call": task("late")}), {})

    # Then it is served with a Lambda-like context
    assert record.output == {"late": "late"}
