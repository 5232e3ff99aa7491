"""Other workflows as an agent's tools, on the local runtime with the scripted provider: a call
of ``workflow.<id>`` suspends the loop, the compiled ``startExecution.sync:2`` state runs the
child (same tenant, dry-run inherited), and the agent resumes with the child's output as the
call's result. Gating applies to workflow tools as to any tool."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from scripted_ai import AGENT_CONTEXT
from workflow_shapes import FAILING_CHILD

from relayflow.definition.models import Workflow
from relayflow.local import LocalRuntime
from relayflow.runner import RunResult, run_workflow
from relayflow.validation import load_workflow_text

pytestmark = pytest.mark.integration
BARE_RUNTIME = True

CHILD = """
id: price-lookup
start: quote
steps:
  quote:
    type: transform
    mapping:
      sku: "{{ trigger.sku }}"
      price: "{{ trigger.qty * 5 }}"
      parent: "{{ run.parent.step }}"
      dry_run: "{{ run.dry_run }}"
"""


def call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "input": args}


def turn(*content: dict[str, Any]) -> dict[str, Any]:
    return {"content": list(content), "usage": {"input_tokens": 100, "output_tokens": 10}}


def agent(fixture: str, extra: str = "") -> Workflow:
    text = f"""
id: quoter
start: ask
steps:
  ask:
    type: agent
    model: scripted:{fixture}
    prompt: "Quote {{{{ trigger.sku }}}}"
    tools: [workflow.price-lookup, workflow.failing-child]
{extra}
"""
    return load_workflow_text(text, "quoter.yaml")


def gated_lookup(fixtures: Callable[..., str], name: str, call_id: str, text: str) -> Workflow:
    """An agent whose model calls the workflow tool price-lookup, which needs approval, and
    then answers ``text`` (the scripted fixture ``name``)."""
    fixture = fixtures(
        name,
        turn(call(call_id, "workflow_price-lookup", {"sku": "A-1", "qty": 1})),
        turn({"type": "text", "text": text}),
    )
    return agent(fixture, "    require_approval_tools: [workflow.price-lookup]")


def run(runtime: LocalRuntime, workflow: Workflow, **options: Any) -> RunResult:
    children = [load_workflow_text(t, "child.yaml") for t in (CHILD, FAILING_CHILD)]
    return run_workflow(
        workflow,
        {"sku": "A-1"},
        runtime=runtime,
        workflows={c.id: c for c in children},
        timeout=60,
        **options,
    )


def child_runs(runtime: LocalRuntime, workflow_id: str) -> list[dict[str, Any]]:
    arn = f"arn:aws:states:us-east-1:123456789012:stateMachine:relayflow-{workflow_id}"
    try:
        return list(runtime.sfn_client.list_executions(stateMachineArn=arn)["executions"])
    except Exception:  # no state machine published yet: no runs
        return []


def test_an_agent_calls_a_child_workflow_gets_its_output_and_finishes(runtime, fixtures):
    # Given an agent whose model calls the price-lookup workflow, then answers from its output
    fixture = fixtures(
        "quote",
        turn(
            {"type": "text", "text": "Let me price it."},
            call("q1", "workflow_price-lookup", {"sku": "A-1", "qty": 3}),
        ),
        turn({"type": "text", "text": "A-1 costs 15."}),
    )
    before = len(child_runs(runtime, "price-lookup"))
    # When it runs
    result = run(runtime, agent(fixture), dry_run=True)
    # Then one child run started, and its output came back as the call's result
    assert result.succeeded, (result.error, result.cause)
    out = result.output["steps"]["ask"]["output"]
    assert out["response"] == "A-1 costs 15." and out["turns"] == 2
    (entry,) = out["tool_calls"]
    assert entry["tool"] == "workflow.price-lookup" and entry["status"] == "succeeded"
    quote = entry["output"]["steps"]["quote"]
    # the child saw the arguments as its trigger, its parent step, and the inherited dry run
    assert quote == {"sku": "A-1", "price": 15, "parent": "ask", "dry_run": True}
    runs = child_runs(runtime, "price-lookup")
    assert len(runs) == before + 1
    assert entry["run_id"] == entry["output"]["run_id"]
    assert any(r["name"] == entry["run_id"] for r in runs)


def test_a_step_after_the_agent_reads_the_answer_built_from_the_child(runtime, fixtures):
    # Given an agent with a workflow tool and outcomes, then a step that reads its answer
    fixture = fixtures(
        "quote_routed",
        turn(call("q1", "workflow_price-lookup", {"sku": "A-1", "qty": 2})),
        turn(call("fin", "final_answer", {"response": "10", "outcome": "quoted"})),
    )
    extra = (
        "    outcomes: {quoted: report}\n"
        '  report: {type: transform, mapping: {price: "{{ steps.ask.output.response }}"}}\n'
    )
    # When it runs / Then the child's result fed the answer and the run routed on it
    result = run(runtime, agent(fixture, extra))
    assert result.succeeded, (result.error, result.cause)
    assert result.output["steps"]["report"]["output"] == {"price": "10"}


def test_a_blocked_workflow_tool_never_starts_a_child(runtime, fixtures):
    # Given a workflow tool the step blocks, and a model that calls it anyway
    fixture = fixtures(
        "blocked_child",
        turn(call("b1", "workflow_price-lookup", {"sku": "A-1", "qty": 1})),
        turn({"type": "text", "text": "Could not price it."}),
    )
    before = len(child_runs(runtime, "price-lookup"))
    # When it runs
    result = run(runtime, agent(fixture, "    blocked_tools: [workflow.price-lookup]"))
    # Then the call was refused in code and no child run exists
    assert result.succeeded, (result.error, result.cause)
    (entry,) = result.output["steps"]["ask"]["output"]["tool_calls"]
    assert entry["status"] == "refused" and "blocked" in entry["error"]
    assert len(child_runs(runtime, "price-lookup")) == before


def test_a_failed_child_is_an_error_result_the_model_sees(runtime, fixtures):
    # Given a call of a workflow that fails
    fixture = fixtures(
        "failing_child",
        turn(call("f1", "workflow_failing-child", {"items": [1, 2]})),
        turn({"type": "text", "text": "The lookup failed."}),
    )
    # When it runs
    result = run(runtime, agent(fixture))
    # Then the loop went on with the child's failure as the call's result
    assert result.succeeded, (result.error, result.cause)
    out = result.output["steps"]["ask"]["output"]
    (entry,) = out["tool_calls"]
    assert entry["status"] == "failed"
    assert entry["error"]["error"] == "Relayflow.SubWorkflowFailed"
    assert entry["error"]["child_status"] == "FAILED"
    assert entry["error"]["child_error"] == "Relayflow.TooManyItems"
    assert out["response"] == "The lookup failed."


def test_two_calls_in_one_turn_start_two_children_in_order(runtime, fixtures):
    # Given one turn with two workflow calls
    fixture = fixtures(
        "two_children",
        turn(
            call("t1", "workflow_price-lookup", {"sku": "A-1", "qty": 1}),
            call("t2", "workflow_price-lookup", {"sku": "B-2", "qty": 2}),
        ),
        turn({"type": "text", "text": "Both priced."}),
    )
    # When it runs / Then each call got its own child run and result
    result = run(runtime, agent(fixture))
    assert result.succeeded, (result.error, result.cause)
    calls = result.output["steps"]["ask"]["output"]["tool_calls"]
    assert [c["output"]["steps"]["quote"]["price"] for c in calls] == [5, 10]
    assert calls[0]["run_id"] != calls[1]["run_id"]


# --------------------------------------------------------------------------- idempotency


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``invoke(workflow, steps=None)``: the agent function on the ``ask`` step's payload
    (a run of tenant acme, one run id per test), with moto for the step-results table and
    S3."""
    import uuid

    from relayflow_testing import load_handler, moto_table

    from relayflow.adapters.aws import client
    from relayflow.compiler import compile_workflow
    from relayflow.settings import get_settings

    context = AGENT_CONTEXT
    handler = load_handler("agent").handler
    run_id = uuid.uuid4().hex

    def call_agent(workflow: Workflow, steps: dict[str, Any] | None = None) -> dict[str, Any]:
        asl = compile_workflow(workflow).asl
        event = {
            "step": asl["States"]["ask"]["Parameters"]["Payload"]["step"],
            "doc": {
                "run": {"id": run_id, "workflow_id": "quoter", "tenant": "acme", "depth": 0},
                "trigger": {"sku": "A-1"},
                "steps": steps or {},
            },
            "context": {"execution_id": "exec-1", "state": "ask", "attempt": 0},
        }
        return dict(handler(json.loads(json.dumps(event)), context))

    with moto_table(monkeypatch):
        client("s3").create_bucket(Bucket=get_settings().payload_bucket)
        yield call_agent


def test_a_duplicate_turn_names_one_child_and_a_replay_starts_none(fixtures, invoke):
    # Given an agent step whose model calls a workflow tool
    fixture = fixtures(
        "dup_child",
        turn(call("d1", "workflow_price-lookup", {"sku": "A-1", "qty": 2})),
        turn({"type": "text", "text": "Priced."}),
    )
    workflow = agent(fixture)
    # When the turn is invoked twice (Lambda's at-least-once delivery)
    first, second = invoke(workflow), invoke(workflow)
    # Then both name the same child run: Step Functions starts one execution of a name
    assert first["branch"] == second["branch"] == "awaiting_workflow"
    pending = first["output"]["pending"]
    assert pending == second["output"]["pending"]
    assert pending["workflow_id"] == "price-lookup" and len(pending["run_id"]) == 32
    assert pending["input"] == {"sku": "A-1", "qty": 2}
    # When the compiled child state has run and the agent resumes with its result
    child = {"run_id": pending["run_id"], "steps": {"quote": {"output": {"price": 10}}}}
    done = invoke(workflow, {"ask": {**first, "status": "succeeded", "workflow": child}})
    # Then the child's output is the call's result and the loop finished
    assert done["branch"] is None and done["output"]["response"] == "Priced."
    (entry,) = done["output"]["tool_calls"]
    assert entry["output"] == {"run_id": pending["run_id"], "steps": {"quote": {"price": 10}}}
    # And a replay of the step from its first turn (a run restarted under its id) reads the
    # recorded result back instead of asking for the child again
    again = invoke(workflow)
    assert again["branch"] is None and again["output"]["tool_calls"] == [entry]


def test_an_approval_gated_workflow_tool_asks_first_then_runs_the_child(fixtures, invoke):
    # Given a workflow tool that needs approval
    workflow = gated_lookup(fixtures, "gated_child", "g1", "Priced after approval.")
    # When the model calls it / Then the loop waits for a person first
    asked = invoke(workflow)
    assert asked["branch"] == "awaiting_approval"
    assert asked["output"]["pending"]["tool"] == "workflow.price-lookup"
    # When a person approves / Then the loop waits for the child run
    decision = {"approved": True, "responder": "ops@example.com"}
    started = invoke(workflow, {"ask": {**asked, "status": "succeeded", "approval": decision}})
    assert started["branch"] == "awaiting_workflow"
    pending = started["output"]["pending"]
    assert pending["approved_by"] == "ops@example.com"
    # When the child has run / Then its result is the call's, with who approved it
    child = {"run_id": pending["run_id"], "steps": {"quote": {"output": {"price": 5}}}}
    done = invoke(workflow, {"ask": {**started, "status": "succeeded", "workflow": child}})
    (entry,) = done["output"]["tool_calls"]
    assert entry["status"] == "succeeded" and entry["approved_by"] == "ops@example.com"
    assert done["output"]["response"] == "Priced after approval."


def test_a_rejected_workflow_tool_starts_no_child(fixtures, invoke):
    workflow = gated_lookup(fixtures, "rejected_child", "r1", "Not priced.")
    asked = invoke(workflow)
    decision = {"approved": False, "responder": "ops@example.com"}
    done = invoke(workflow, {"ask": {**asked, "status": "succeeded", "approval": decision}})
    # The loop went on without a child run: the call is recorded as rejected
    assert done["branch"] is None
    (entry,) = done["output"]["tool_calls"]
    assert entry["status"] == "rejected" and "run_id" not in entry
