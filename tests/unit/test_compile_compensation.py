"""The compiled saga (compiler/compensation.py): where failures go, what the walk contains,
and that every machine passes the compiler check."""

from __future__ import annotations

from typing import Any

from relayflow.compiler import compile_workflow
from relayflow.compiler.check import check_machine
from relayflow.validation import validate_data

HOOK = "https://example.com/undo"


def compiled(data: dict[str, Any]) -> Any:
    workflow, problems = validate_data(data)
    assert problems == [], problems
    assert workflow is not None
    result = compile_workflow(workflow)
    assert check_machine(result.asl) == []
    return result


def for_each(key: str, item: str, nxt: str | None) -> dict[str, dict[str, Any]]:
    step: dict[str, Any] = {"type": "for_each", "items": "{{ trigger.seats }}", "step": item}
    if nxt:
        step["on_success"] = nxt
    hold = {
        "type": "webhook_out",
        "url": "https://example.com/hold",
        "compensate": {"type": "webhook_out", "url": HOOK, "body": "{{ output }}"},
    }
    return {key: step, item: hold}


def test_two_for_each_sagas_with_the_longest_keys_have_unique_short_state_names():
    # Given two compensated for_each steps whose keys are 64 characters long
    first, second = "a" * 64, "b" * 64
    steps = {**for_each(first, "x" * 64, second), **for_each(second, "y" * 64, "pay")}
    steps["pay"] = {"type": "webhook_out", "url": "https://example.com/pay"}
    # When compiled, Then the machine passes the check (unique names of at most 80 chars)
    asl = compiled({"id": "w", "start": first, "steps": steps}).asl
    assert asl["States"][f"_saga.{first}"]["Type"] == "Map"
    assert asl["States"][f"_saga.{second}"]["ItemsPath"] == "$.saga.todo.output"


def test_every_way_the_run_fails_leads_to_the_walk():
    # Given a saga with a for_each (its too-many-items Fail) and a step with no route
    steps = {**for_each("each", "hold", "pay")}
    steps["each"]["max_items"] = 3
    steps["pay"] = {
        "type": "webhook_out",
        "url": "https://example.com/pay",
        "retry": {"max_attempts": 2, "backoff": "linear", "base_seconds": 1},
    }
    asl = compiled({"id": "w", "start": "each", "steps": steps}).asl
    states = asl["States"]
    # Then no Fail state is left but the walk's own two
    fails = sorted(name for name, s in states.items() if s["Type"] == "Fail")
    assert fails == ["_saga.fail", "_saga.raise"]
    # and the compiled failures hand their error to the walk
    assert states["each.too_many"] == {
        "Type": "Pass",
        "Next": "_saga.next",
        "Result": {
            "Error": "Relayflow.TooManyItems",
            "Cause": states["each.too_many"]["Result"]["Cause"],
        },
        "ResultPath": "$.error",
    }
    assert states["pay.failed"]["Next"] == "_saga.next"
    # and every Task, Map and Parallel of the main flow catches into the walk
    for name in ("each", "pay"):
        assert states[name]["Catch"][-1]["ErrorEquals"] == ["States.ALL"]
    assert states["each"]["Catch"][-1]["Next"] == "_saga.next"
    # and the compensation Task is not caught into the walk again
    assert states["_saga.each"]["Catch"][0]["Next"] == "_saga.each.failed"


def test_without_a_way_to_fail_the_machine_has_no_saga_states():
    # Given a compensated step whose failure is routed, in a flow whose steps cannot fail
    steps = {
        "charge": {
            "type": "webhook_out",
            "url": "https://example.com/charge",
            "compensate": {"type": "webhook_out", "url": HOOK},
            "on_success": "done",
            "on_failure": "done",
        },
        "done": {"type": "noop"},
    }
    asl = compiled({"id": "w", "start": "charge", "steps": steps}).asl
    # Then nothing could ever be compensated, so nothing is compiled for it
    assert not [name for name in asl["States"] if "saga" in name]


def test_the_compensation_function_is_in_the_iam_statements():
    # Given a tool step compensated by a webhook_out call
    steps = {
        "put": {
            "type": "tool",
            "tool": "aws.sqs.send_message",
            "args": {"queue_url": "https://sqs.example.com/q", "body": "x"},
            "compensate": {"type": "webhook_out", "url": HOOK},
            "on_success": "after",
        },
        "after": {"type": "webhook_out", "url": "https://example.com/after"},
    }
    result = compiled({"id": "w", "start": "put", "steps": steps})
    (invoke,) = [s for s in result.iam_statements if s["Action"] == ["lambda:InvokeFunction"]]
    # Then the state machine may invoke the webhook_out function for the compensation
    assert any(arn.endswith("relayflow-webhook_out") for arn in invoke["Resource"])
    assert result.step_runners["_saga.put"] == "webhook_out"
    # And the output is not carried when the compensation does not read it
    assert "output.$" not in result.asl["States"]["put.saga"]["Parameters"]


def test_a_gated_agent_records_its_completion_after_the_gate_not_at_each_pause():
    # Given an agent whose refund tool waits for approval, compensated by a webhook
    steps = {
        "refunder": {
            "type": "agent",
            "model": "scripted:refund",
            "prompt": "{{ trigger.request }}",
            "tools": ["aws.sqs.send_message"],
            "require_approval_tools": ["aws.sqs.send_message"],
            "compensate": {"type": "webhook_out", "url": HOOK, "body": "{{ output }}"},
            "on_success": "after",
        },
        "after": {"type": "webhook_out", "url": "https://example.com/after"},
    }
    states = compiled({"id": "w", "start": "refunder", "steps": steps}).asl["States"]
    # Then the agent Task still goes to its gate (a pause loops back without recording)
    assert states["refunder"]["Next"] == "refunder.await"
    assert states["refunder.approval"]["Next"] == "refunder"
    # and only the gate's way on (the agent answered) records the completion
    assert states["refunder.await"]["Default"] == "refunder.saga"
    assert states["refunder.saga"]["Next"] == "after"


def test_a_custom_step_with_branches_records_before_routing():
    steps = {
        "decide": {
            "type": "custom",
            "url": "https://example.com/decide",
            "branches": {"fast": "fast"},
            "on_success": "slow",
            "compensate": {"type": "custom", "url": HOOK},
        },
        "fast": {"type": "webhook_out", "url": "https://example.com/fast"},
        "slow": {"type": "webhook_out", "url": "https://example.com/slow"},
    }
    states = compiled({"id": "w", "start": "decide", "steps": steps}).asl["States"]
    assert states["decide"]["Next"] == "decide.saga"
    assert states["decide.saga"]["Next"] == "decide.route"
    # A custom compensation gets the output (it sends the document it gets)
    assert states["decide.saga"]["Parameters"]["output.$"] == "$.steps.decide.output"


def test_a_compensated_step_of_an_error_handler_nothing_routes_to_is_left_out():
    # Given a workflow-wide handler that only native steps could reach (so it is not compiled)
    data = {
        "id": "w",
        "start": "a",
        "errors": {"on_failure": "undo"},
        "steps": {
            "a": {"type": "transform", "mapping": {"x": 1}, "on_success": "charge"},
            "charge": {
                "type": "webhook_out",
                "url": "https://example.com/charge",
                "compensate": {"type": "webhook_out", "url": HOOK},
                "on_failure": "b",
            },
            "b": {"type": "noop"},
            "undo": {
                "type": "webhook_out",
                "url": "https://example.com/undo",
                "compensate": {"type": "webhook_out", "url": HOOK},
            },
        },
    }
    states = compiled(data).asl["States"]
    assert "undo" not in states and "_saga.undo" not in states


def test_the_document_size_estimate_counts_the_saga_list():
    from relayflow.compiler.docsize import document_size_problems
    from relayflow.definition.models import Workflow

    # Given a for_each whose item records fit the document once (250 × ~600 bytes)
    steps: dict[str, Any] = {
        "each": {"type": "for_each", "items": "{{ trigger.items }}", "step": "call"},
        "call": {"type": "webhook_out", "url": "https://example.com/x"},
    }
    steps["each"]["max_items"] = 250
    data = {"id": "w", "start": "each", "steps": steps}
    assert document_size_problems(Workflow.model_validate(data)) == []
    # When its item step compensates, the saga list carries the records a second time
    steps["call"]["compensate"] = {"type": "webhook_out", "url": HOOK}
    (problem,) = document_size_problems(Workflow.model_validate(data))
    # Then the estimate warns, naming the saga list
    assert problem.rule == "document-size" and "saga (" in problem.message


def test_a_parallel_nested_in_a_branch_carries_the_saga_too():
    # Given a compensated step, then a parallel whose branch is itself a parallel
    machine = compiled(
        {
            "id": "nested",
            "start": "pay",
            "steps": {
                "pay": {
                    "type": "webhook_out",
                    "url": "https://example.com/pay",
                    "compensate": {"type": "webhook_out", "url": HOOK},
                    "on_success": "fork",
                },
                "fork": {"type": "parallel", "branches": ["inner", "side"]},
                "inner": {"type": "parallel", "branches": ["a", "b"]},
                "a": {"type": "noop"},
                "b": {"type": "noop"},
                "side": {"type": "noop"},
            },
        }
    ).asl
    # Then both rebuild the document with the saga (the outer one reads its first branch's
    # copy, which the inner one wrote: were it dropped there, the outer would fail the run)
    fork = machine["States"]["fork"]
    inner = fork["Branches"][0]["States"]["inner"]
    assert fork["ResultSelector"]["saga.$"] == "$[0].saga"
    assert inner["ResultSelector"]["saga.$"] == "$[0].saga"


def _compensation_tasks(asl: dict[str, Any]) -> list[dict[str, Any]]:
    """The Lambda Tasks of the compensation walk (each runs one step's undo call)."""
    found: list[dict[str, Any]] = []

    def walk(states: dict[str, Any]) -> None:
        for state in states.values():
            if state.get("Type") == "Task" and state.get("ResultPath") == "$.saga.last":
                found.append(state)
            for inner in ("Iterator", "ItemProcessor"):
                if inner in state:
                    walk(state[inner]["States"])
            for branch in state.get("Branches", []):
                walk(branch["States"])

    walk(asl["States"])
    return found


def _retried_errors(task: dict[str, Any]) -> list[str]:
    return [e for rule in task.get("Retry", []) for e in rule["ErrorEquals"]]


def test_an_inline_compensation_with_retry_none_compiles_to_one_attempt():
    # Given an inline compensation that asks for one attempt (this crashed the compiler)
    undo = {"type": "webhook_out", "url": HOOK, "method": "DELETE", "retry": "none"}
    steps = {"charge": {"type": "webhook_out", "url": "https://example.com/c", "compensate": undo}}
    # When compiled
    tasks = _compensation_tasks(compiled({"id": "w", "start": "charge", "steps": steps}).asl)
    # Then its Task retries only Lambda's own service errors, never Relayflow.Transient
    assert len(tasks) == 1
    assert "Relayflow.Transient" not in _retried_errors(tasks[0])
    assert "Lambda.ServiceException" in _retried_errors(tasks[0])


def test_an_inline_compensation_gets_the_defaults_a_compensation_step_gets():
    # Given the same undo call written inline on one step and as a compensation step on another
    undo = {"type": "webhook_out", "url": HOOK, "method": "DELETE"}
    steps = {
        "a": {
            "type": "webhook_out",
            "url": "https://example.com/a",
            "compensate": undo,
            "on_success": "b",
        },
        "b": {"type": "webhook_out", "url": "https://example.com/b", "compensate": "undo_b"},
        "undo_b": undo,
    }
    data = {"id": "w", "start": "a", "steps": steps, "defaults": {"timeout_seconds": 40}}
    tasks = _compensation_tasks(compiled(data).asl)
    # Then both undo Tasks retry and time out alike: the workflow's defaults
    assert len(tasks) == 2
    assert tasks[0]["Retry"] == tasks[1]["Retry"]
    assert "Relayflow.Transient" in _retried_errors(tasks[0])
    assert tasks[0]["TimeoutSeconds"] == tasks[1]["TimeoutSeconds"] == 40
