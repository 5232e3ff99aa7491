"""The agent step on the local runtime with the scripted provider: a multi-turn tool loop,
gating enforced in code, max_turns and token budget, outcome routing, the corrective turn,
and no tool executed twice by a duplicate invocation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from relayflow_testing import Server, fresh_allowed_server, load_handler, moto_table
from scripted_ai import AGENT_CONTEXT

from relayflow.local import LocalRuntime
from relayflow.runner import RunResult, run_workflow
from relayflow.validation import load_workflow_text

pytestmark = pytest.mark.integration


def call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "input": args}


def turn(*content: dict[str, Any], tokens: tuple[int, int] = (100, 20)) -> dict[str, Any]:
    return {
        "content": list(content),
        "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]},
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def answer(response: Any, outcome: str | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"response": response}
    if outcome is not None:
        args["outcome"] = outcome
    return call("final", "final_answer", args)


server = pytest.fixture(fresh_allowed_server, name="server")


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with LocalRuntime(time_scale=0.001) as rt:
        ddb = rt.client("dynamodb")
        ddb.create_table(
            TableName="app-customers",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        ddb.put_item(
            TableName="app-customers", Item={"pk": {"S": "local#c-1"}, "plan": {"S": "pro"}}
        )
        yield rt


def workflow(server: Server, fixture: str, agent: str = "", after: str = "") -> str:
    return f"""
id: agent-test
start: triage
http_tools:
  crm:
    base_url: {server.url}/crm
    timeout_seconds: 5
    operations:
      customer: {{method: GET, path: "/customers/{{{{ args.id }}}}"}}
      refund: {{method: POST, path: /refunds, body: {{customer: "{{{{ args.id }}}}"}}}}
steps:
  triage:
    type: agent
    model: scripted:{fixture}
    prompt: "Ticket from {{{{ trigger.customer }}}}"
{agent}
{after}
"""


def run(runtime: LocalRuntime, definition: str, trigger: Any = None) -> RunResult:
    return run_workflow(
        load_workflow_text(definition, "agent.yaml"),
        trigger or {"customer": "c-1"},
        runtime=runtime,
    )


def output(result: RunResult, key: str = "triage") -> Any:
    assert isinstance(result.output, dict), result
    return result.output["steps"][key]["output"]


def test_a_multi_turn_agent_calls_two_tools_and_answers(runtime, server, fixtures):
    # Given an agent that looks the customer up over HTTP, then reads DynamoDB, then answers
    fixture = fixtures(
        "two_tools",
        turn(text("Looking up."), call("c1", "http_crm_customer", {"id": "c-1"})),
        turn(
            call(
                "c2",
                "aws.dynamodb.get_item",
                {"table": "app-customers", "key": {"pk": "local#c-1"}},
            )
        ),
        turn(text("Customer c-1 is on the pro plan."), tokens=(300, 15)),
    )
    agent = "    tools: [http.crm.customer, aws.dynamodb.get_item]"
    # When it runs
    result = run(runtime, workflow(server, fixture, agent))
    # Then both tools ran once, in order, and the answer and usage are in the output
    assert result.succeeded, (result.error, result.cause)
    out = output(result)
    assert [r.path for r in server.requests] == ["/crm/customers/c-1"]
    assert [(c["turn"], c["tool"], c["status"]) for c in out["tool_calls"]] == [
        (1, "http.crm.customer", "succeeded"),
        (2, "aws.dynamodb.get_item", "succeeded"),
    ]
    assert out["tool_calls"][1]["output"]["item"] == {"pk": "local#c-1", "plan": "pro"}
    assert out["response"] == "Customer c-1 is on the pro plan."
    assert out["outcome"] is None and out["turns"] == 3
    assert out["usage"] == {
        "model": f"scripted:{fixture}",
        "input_tokens": 500,
        "output_tokens": 55,
        "total_tokens": 555,
        "estimated_cost_usd": 0.0,
    }


def test_a_blocked_or_unknown_tool_call_is_refused_without_executing(runtime, server, fixtures):
    # Given an agent that knows the refund tool but may not use it, and a model that calls it
    # anyway (by wire name and by catalogue name) and makes a tool up
    fixture = fixtures(
        "blocked",
        turn(
            call("r1", "http_crm_refund", {"id": "c-1"}),
            call("r2", "http.crm.refund", {"id": "c-1"}),
            call("r3", "shell_exec", {"cmd": "rm -rf /"}),
        ),
        turn(text("I could not refund.")),
    )
    agent = "    tools: [http.crm.customer, http.crm.refund]\n    blocked_tools: [http.crm.refund]"
    # When it runs
    result = run(runtime, workflow(server, fixture, agent))
    # Then nothing reached the server, each refusal is recorded, and the loop went on
    assert result.succeeded, (result.error, result.cause)
    assert server.requests == []
    calls = output(result)["tool_calls"]
    assert [(c["tool"], c["status"]) for c in calls] == [
        ("http.crm.refund", "refused"),
        ("http.crm.refund", "refused"),
        ("shell_exec", "refused"),
    ]
    assert "blocked" in calls[0]["error"] and "no tool named" in calls[2]["error"]
    assert output(result)["response"] == "I could not refund."


def test_allowed_tools_limit_what_runs(runtime, server, fixtures):
    # Given allowed_tools narrower than tools
    fixture = fixtures(
        "allowed", turn(call("r1", "http_crm_refund", {"id": "c-1"})), turn(text("done"))
    )
    agent = (
        "    tools: [http.crm.customer, http.crm.refund]\n    allowed_tools: [http.crm.customer]"
    )
    # When the model calls the tool outside allowed_tools / Then it is refused unexecuted
    result = run(runtime, workflow(server, fixture, agent))
    assert result.succeeded and server.requests == []
    assert (
        output(result)["tool_calls"][0]["error"]
        == "tool 'http.crm.refund' is not allowed for this step"
    )


def test_max_turns_stops_the_loop_with_a_named_error(runtime, server, fixtures):
    # Given a model that keeps calling tools
    looping = turn(call("c", "http_crm_customer", {"id": "c-1"}))
    fixture = fixtures("looping", looping, looping, looping)
    agent = "    tools: [http.crm.customer]\n    max_turns: 2"
    # When it runs / Then the step fails with AgentMaxTurns after two turns
    result = run(runtime, workflow(server, fixture, agent))
    assert result.status == "failed"
    assert result.error == "Relayflow.AgentMaxTurns"
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("retry", "attempts"),
    [
        # AgentMaxTurns is deterministic (a retry replays the recorded turns): not retried
        ("{max_attempts: 3, base_seconds: 1}", 1),
        # unless retry_on names it
        ("{max_attempts: 3, base_seconds: 1, retry_on: [Relayflow.AgentMaxTurns]}", 3),
    ],
)
def test_a_retry_policy_does_not_repeat_a_deterministic_agent_failure(
    runtime, server, fixtures, retry, attempts
):
    # Given a model that keeps calling tools, and a step with a retry policy
    looping = turn(call("c", "http_crm_customer", {"id": "c-1"}))
    fixture = fixtures(f"looping_retry_{attempts}", looping, looping)
    agent = f"    tools: [http.crm.customer]\n    max_turns: 1\n    retry: {retry}"
    before = len(agent_invocations(runtime))
    # When it runs / Then it fails with AgentMaxTurns after one attempt of the step
    result = run(runtime, workflow(server, fixture, agent))
    assert result.status == "failed" and result.error == "Relayflow.AgentMaxTurns"
    assert len(agent_invocations(runtime)) - before == attempts
    # (the replayed attempts ran the recorded tool call only once)
    assert len(server.requests) == 1


def agent_invocations(runtime: LocalRuntime) -> list[Any]:
    return [i for i in runtime.invocations if i.function_name == "relayflow-agent"]


def test_the_token_budget_stops_the_loop_with_a_named_error(runtime, server, fixtures):
    # Given a budget of 150 tokens and turns of 120 tokens each
    step = turn(call("c", "http_crm_customer", {"id": "c-1"}), tokens=(100, 20))
    fixture = fixtures("budget", step, step, turn(text("done")))
    agent = "    tools: [http.crm.customer]\n    token_budget: 150"
    # When it runs / Then the second turn goes over the budget: AgentTokenBudget, and its
    # tool call never ran
    result = run(runtime, workflow(server, fixture, agent))
    assert result.error == "Relayflow.AgentTokenBudget"
    assert "240 tokens" in (result.cause or "")
    assert len(server.requests) == 1


ROUTED = """    outcomes: {refund: do_refund, close: do_close, spam: inherit}
    on_failure: review
  do_refund: {type: transform, mapping: {routed: refund}}
  do_close: {type: transform, mapping: {routed: close}}
  review: {type: transform, mapping: {routed: review, error: "{{ error.Error }}"}}
"""


@pytest.mark.parametrize(
    ("outcome", "taken"),
    [("refund", "do_refund"), ("close", "do_close"), ("spam", "review")],
)
def test_each_outcome_routes_to_its_step_and_inherit_takes_the_failure_route(
    runtime, server, fixtures, outcome, taken
):
    # Given an agent whose answer picks an outcome
    fixture = fixtures(f"outcome_{outcome}", turn(answer("decided", outcome)))
    # When it runs
    result = run(runtime, workflow(server, fixture, after=ROUTED))
    # Then the run went to that outcome's step (spam: the step's on_failure)
    assert result.succeeded, (result.error, result.cause)
    steps = result.output["steps"]
    assert output(result)["outcome"] == outcome
    assert [k for k in ("do_refund", "do_close", "review") if k in steps] == [taken]
    if taken == "review":
        assert steps["review"]["output"]["error"] == "Relayflow.AgentOutcomeInherited"


def test_an_inherited_outcome_without_error_route_fails_the_run(runtime, server, fixtures):
    fixture = fixtures("inherit_fails", turn(answer("spam!", "spam")))
    after = "    outcomes: {refund: done, spam: inherit}\n  done: {type: noop}\n"
    result = run(runtime, workflow(server, fixture, after=after))
    assert result.status == "failed" and result.error == "Relayflow.AgentOutcomeInherited"


def test_a_wrong_answer_gets_one_corrective_turn(runtime, server, fixtures):
    # Given an answer with an outcome that is not declared, then a right one
    fixture = fixtures(
        "corrected", turn(answer("hmm", "maybe")), turn(answer({"amount": 49}, "refund"))
    )
    after = (
        "    output_schema: {type: object, required: [amount], "
        "properties: {amount: {type: number}}}\n" + ROUTED
    )
    # When it runs / Then the corrected answer stands
    result = run(runtime, workflow(server, fixture, after=after))
    assert result.succeeded, (result.error, result.cause)
    assert output(result)["response"] == {"amount": 49}
    assert output(result)["turns"] == 2 and "do_refund" in result.output["steps"]


def test_a_second_wrong_answer_fails_with_a_named_error(runtime, server, fixtures):
    fixture = fixtures("wrong_twice", turn(text("refund it")), turn(answer("x", "maybe")))
    result = run(runtime, workflow(server, fixture, after=ROUTED))
    # The failure route runs with the named error
    assert result.succeeded
    assert result.output["steps"]["review"]["output"]["error"] == "Relayflow.AgentOutputInvalid"


# --------------------------------------------------------------------------- idempotency


def test_a_duplicate_invocation_executes_no_tool_twice(server, fixtures, monkeypatch):
    # Given an agent step payload whose loop calls an HTTP tool twice over two turns
    from relayflow.compiler import compile_workflow

    fixture = fixtures(
        "duplicate",
        turn(call("c1", "http_crm_customer", {"id": "c-1"})),
        turn(call("c2", "http_crm_refund", {"id": "c-1"})),
        turn(text("refunded")),
    )
    agent = "    tools: [http.crm.customer, http.crm.refund]"
    wf = load_workflow_text(workflow(server, fixture, agent), "agent.yaml")
    step = compile_workflow(wf).asl["States"]["triage"]["Parameters"]["Payload"]["step"]
    event = {
        "step": step,
        "doc": {
            "run": {"id": "run-dup", "workflow_id": "agent-test", "tenant": "acme"},
            "trigger": {"customer": "c-1"},
            "steps": {},
        },
        "context": {"execution_id": "exec-1", "state": "triage", "attempt": 0},
    }
    context = AGENT_CONTEXT
    handler = load_handler("agent").handler
    with moto_table(monkeypatch):
        # When the same step execution is invoked twice (Lambda's at-least-once delivery)
        first = handler(json.loads(json.dumps(event)), context)
        second = handler(json.loads(json.dumps(event)), context)
        # And a retry after a failure in the last turn replays turns 1 and 2 (attempt 1)
        event["context"]["attempt"] = 1
        third = handler(json.loads(json.dumps(event)), context)
    # Then each tool ran exactly once, and every invocation answered the same
    assert [r.path for r in server.requests] == ["/crm/customers/c-1", "/crm/refunds"]
    assert first == second == third
    assert first["output"]["response"] == "refunded"


def test_a_provider_refusal_shows_its_status_and_reason_in_the_step_error(runtime, server):
    # Given an OpenAI-compatible model server on the loopback that refuses with a 400 and a
    # reason in its body
    refusal = {
        "error": {
            "message": "max_completion_tokens: 99999 > 16384, the maximum for this model",
            "type": "invalid_request_error",
            "code": "invalid_value",
        }
    }
    server.reply = lambda _received: (
        400,
        {"Content-Type": "application/json"},
        json.dumps(refusal).encode(),
    )
    definition = f"""
id: agent-refused
start: triage
steps:
  triage:
    type: agent
    model: openai:gpt-4.1-mini
    base_url: {server.url}/v1
    prompt: "Ticket from {{{{ trigger.customer }}}}"
    max_tokens: 99999
    breaker: null
    on_failure: report
  report:
    type: transform
    mapping: {{error: "{{{{ error }}}}"}}
"""
    # When the agent runs
    result = run(runtime, definition)
    # Then the step error names the status and the provider's reason, and keeps the body
    assert result.succeeded, (result.error, result.cause)
    error = output(result, "report")["error"]
    assert error["Error"] == "Relayflow.ModelError"
    assert "400" in error["Cause"] and "max_completion_tokens: 99999 > 16384" in error["Cause"]
    assert error["details"]["status"] == 400
    assert json.loads(error["details"]["body"]) == refusal
    # And the request went out as the current API takes it
    (sent,) = server.requests
    assert json.loads(sent.body)["max_completion_tokens"] == 99999
