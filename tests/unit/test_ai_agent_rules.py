"""Agent steps without a runtime: tool gating and schemas, the price table, the answer
schema, validation rules and the compiled outcome routing."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from relayflow.ai.messages import Usage
from relayflow.ai.prices import estimate_cost, price_for
from relayflow.ai.tools import FINAL_ANSWER, Toolbox, wire_name
from relayflow.compiler import compile_workflow
from relayflow.definition.agent_tools import permitted_tools, workflow_tools
from relayflow.steps.agent import answer_schema
from relayflow.validation import validate_data

HTTP_TOOLS = {
    "crm": {
        "base_url": "https://crm.example.com/api",
        "operations": {
            "customer": {"method": "GET", "path": "/customers/{{ args.id }}"},
            "note": {
                "method": "POST",
                "path": "/notes",
                "body": {"text": "{{ args.text }}", "by": "{{ run.id }}"},
            },
        },
    }
}


# --------------------------------------------------------------------------- gating


@pytest.mark.parametrize(
    ("tools", "allowed", "blocked", "expected"),
    [
        (["a", "b"], None, None, ["a", "b"]),
        (["a", "b"], ["a"], None, ["a"]),
        (None, ["a", "b"], ["b"], ["a"]),
        (["a", "b"], None, ["a"], ["b"]),
        (None, None, None, []),
        (["a", "a"], None, None, ["a"]),
    ],
)
def test_permitted_tools(tools, allowed, blocked, expected):
    assert permitted_tools(tools, allowed, blocked) == expected


def test_only_permitted_tools_are_offered_and_every_other_call_is_refused():
    box = Toolbox.build(
        {
            "tools": ["http.crm.customer", "aws.sqs.send_message"],
            "blocked_tools": ["aws.sqs.send_message"],
        },
        HTTP_TOOLS,
    )
    assert [s.name for s in box.specs] == ["http_crm_customer"]
    assert box.check("http_crm_customer") == ("http.crm.customer", None)
    assert box.check("http.crm.customer") == ("http.crm.customer", None)
    assert (
        box.check("aws_sqs_send_message")[1]
        == "tool 'aws.sqs.send_message' is blocked for this step"
    )
    assert (
        box.check("aws.sqs.send_message")[1]
        == "tool 'aws.sqs.send_message' is blocked for this step"
    )
    assert box.check("http.crm.note") == (None, "there is no tool named 'http.crm.note'")


def test_workflow_tools_are_gated_and_take_an_object():
    box = Toolbox.build(
        {
            "tools": ["workflow.price-lookup", "workflow.refunds"],
            "blocked_tools": ["workflow.refunds"],
        },
        {},
    )
    (spec,) = box.specs
    assert spec.name == "workflow_price-lookup" and spec.input_schema["type"] == "object"
    assert box.check("workflow_price-lookup") == ("workflow.price-lookup", None)
    assert box.check("workflow.refunds") == (
        "workflow.refunds",
        "tool 'workflow.refunds' is blocked for this step",
    )
    assert workflow_tools({"tools": ["workflow.a", "http.crm.customer"]}) == ["a"]
    assert workflow_tools({"tools": ["workflow.a"], "blocked_tools": ["workflow.a"]}) == []


def test_wire_names_are_safe_for_every_provider():
    assert wire_name("aws.dynamodb.get_item") == "aws_dynamodb_get_item"
    assert wire_name("http.my-api.op") == "http_my-api_op"
    assert len(wire_name("http." + "x" * 100)) == 64


def test_tool_schemas_are_derived_from_their_declarations():
    box = Toolbox.build(
        {"tools": ["aws.dynamodb.get_item", "http.crm.note", "http.crm"]},
        HTTP_TOOLS,
        answer_schema({"outcomes": ["a", "b"]}),
    )
    specs = {s.name: s for s in box.specs}
    ddb = specs["aws_dynamodb_get_item"].input_schema
    assert set(ddb["required"]) == {"table", "key"} and "consistent" in ddb["properties"]
    note = specs["http_crm_note"].input_schema
    assert note == {"type": "object", "properties": {"text": {}}, "required": ["text"]}
    assert specs["http_crm"].input_schema["properties"]["method"]["enum"][0] == "GET"
    final = specs[FINAL_ANSWER].input_schema
    assert final["properties"]["outcome"] == {"type": "string", "enum": ["a", "b"]}
    assert final["required"] == ["response", "outcome"]


def test_plain_text_agents_have_no_final_answer_tool():
    assert answer_schema({}) is None
    assert answer_schema({"output_schema": {"type": "object"}})["required"] == ["response"]


# --------------------------------------------------------------------------- prices


def test_prices_and_cost_estimates():
    usage = Usage(1_000_000, 100_000)
    assert estimate_cost("anthropic", "claude-sonnet-4-5-20250929", usage) == 4.5
    assert estimate_cost("bedrock", "us.anthropic.claude-3-haiku-20240307-v1:0", usage) == 0.375
    assert estimate_cost("openai", "gpt-4o-mini", usage, batch=True) == 0.105
    assert estimate_cost("scripted", "anything", usage) == 0.0
    assert estimate_cost("openai", "my-local-model", usage) is None
    assert price_for("openai", "gpt-4o-mini-2024-07-18") == price_for("openai", "gpt-4o-mini")


# --------------------------------------------------------------------------- validation

BASE: dict[str, Any] = {
    "id": "wf",
    "start": "triage",
    "http_tools": {"crm": HTTP_TOOLS["crm"]},
    "steps": {
        "triage": {
            "type": "agent",
            "model": "bedrock:anthropic.claude-3-5-haiku-20241022-v1:0",
            "prompt": "Ticket {{ trigger.id }}",
            "tools": ["http.crm.customer", "aws.dynamodb.get_item"],
            "outcomes": {"refund": "refund", "spam": "inherit"},
        },
        "refund": {"type": "noop"},
    },
}


def problems_of(mutate) -> set[tuple[str, str]]:
    data = copy.deepcopy(BASE)
    mutate(data["steps"]["triage"])
    _, problems = validate_data(data)
    return {(p.path, p.rule) for p in problems}


def test_the_base_agent_is_valid():
    assert problems_of(lambda s: None) == set()


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda s: s.update(model="gemini:pro"), ("steps.triage.model", "model-provider")),
        (lambda s: s.update(model="claude"), ("steps.triage.model", "model-provider")),
        (lambda s: s.pop("model"), ("steps.triage.model", "required")),
        (
            lambda s: s.update(model="anthropic:claude-haiku-4-5"),
            ("steps.triage.api_key", "required"),
        ),
        (
            lambda s: s.update(base_url="https://x.example.com"),
            ("steps.triage.base_url", "not-applicable"),
        ),
        (
            lambda s: s["tools"].append("aws.dynamodb.drop_table"),
            ("steps.triage.tools[2]", "unknown-tool"),
        ),
        (lambda s: s["tools"].append("http.crm.delete"), ("steps.triage.tools[2]", "unknown-tool")),
        (
            lambda s: s.update(blocked_tools=["http.nope"]),
            ("steps.triage.blocked_tools[0]", "unknown-tool"),
        ),
        (
            lambda s: s.update(
                allowed_tools=["http.crm.customer"], blocked_tools=["http.crm.customer"]
            ),
            ("steps.triage.blocked_tools", "tool-gating"),
        ),
        (
            lambda s: s.update(require_approval_tools=["aws.sqs.send_message"]),
            ("steps.triage.require_approval_tools", "tool-gating"),
        ),
        (
            lambda s: s["outcomes"].update(close="closer"),
            ("steps.triage.outcomes.close", "unknown-step"),
        ),
        (lambda s: s.update(outcomes={}), ("steps.triage.outcomes", "outcomes")),
        (lambda s: s.update(agent_id="support-bot"), ("steps.triage.agent_id", "not-applicable")),
        (lambda s: s.update(max_turns=0), ("steps.triage.max_turns", "greater-than-equal")),
        (
            lambda s: s.update(output_schema={"type": "strin"}),
            ("steps.triage.output_schema", "json-schema"),
        ),
        (lambda s: s.update(prompt="{{ trigger.id"), ("steps.triage.prompt", "template")),
        (lambda s: s["tools"].append("workflow.Bad Id"), ("steps.triage.tools[2]", "unknown-tool")),
        (lambda s: s["tools"].append("workflow."), ("steps.triage.tools[2]", "unknown-tool")),
        (
            lambda s: s.update(require_approval_tools=["workflow.refunds"]),
            ("steps.triage.require_approval_tools", "tool-gating"),
        ),
    ],
)
def test_agent_validation_rules(mutate, expected):
    assert expected in problems_of(mutate)


# --------------------------------------------------------------------------- compiled routing


def test_all_inherited_outcomes_need_no_choice():
    data = copy.deepcopy(BASE)
    data["steps"]["triage"]["outcomes"] = {"spam": "inherit"}
    data["steps"]["triage"]["on_success"] = "refund"
    workflow, problems = validate_data(data)
    assert not problems and workflow is not None
    states = compile_workflow(workflow).asl["States"]
    assert states["triage"]["Next"] == "triage.inherited"
    assert "triage.route" not in states
    assert states["triage.inherited"] == {
        "Type": "Fail",
        "Error": "Relayflow.AgentOutcomeInherited",
        "Cause": "agent step 'triage' picked an outcome that inherits its failure handling",
    }


def test_an_agent_without_outcomes_takes_on_success_and_carries_its_http_tools():
    data = copy.deepcopy(BASE)
    del data["steps"]["triage"]["outcomes"]
    data["steps"]["triage"]["on_success"] = "refund"
    workflow, problems = validate_data(data)
    assert not problems and workflow is not None
    compiled = compile_workflow(workflow)
    assert compiled.asl["States"]["triage"]["Next"] == "refund"
    assert compiled.step_runners["triage"] == "agent"
    import json

    config = json.loads(compiled.asl["States"]["triage"]["Parameters"]["Payload"]["step"]["config"])
    assert set(config["http_tools"]) == {"crm"} and "outcomes" not in config


@pytest.mark.parametrize(
    ("item_step", "path"),
    [
        (
            {
                "type": "agent",
                "model": "scripted:x",
                "prompt": "hi",
                "tools": ["http.crm.customer"],
                "require_approval_tools": ["http.crm.customer"],
            },
            "steps.each_one.require_approval_tools",
        ),
        (
            {"type": "agent", "model": "scripted:x", "prompt": "hi", "outcomes": {"a": "inherit"}},
            "steps.each_one.outcomes",
        ),
        ({"type": "llm_batch", "model": "scripted:x", "prompt": "hi"}, "steps.each.step"),
        (
            {"type": "agent", "model": "scripted:x", "prompt": "hi", "tools": ["workflow.x"]},
            "steps.each_one.tools",
        ),
    ],
)
def test_a_for_each_cannot_run_routing_agents_or_batches_per_item(item_step, path):
    # (workflow tools too: their child runs are states around the agent Task)
    data = {
        "id": "wf",
        "start": "each",
        "http_tools": {"crm": HTTP_TOOLS["crm"]},
        "steps": {
            "each": {"type": "for_each", "items": "{{ trigger.xs }}", "step": "each_one"},
            "each_one": item_step,
        },
    }
    _, problems = validate_data(data)
    assert (path, "for-each-target") in {(p.path, p.rule) for p in problems}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"model": "gemini:pro"}, ("steps.batch.model", "model-provider")),
        (
            {"model": "bedrock:amazon.titan-text-express-v1"},
            ("steps.batch.model", "model-provider"),
        ),
        ({"model": "bedrock:cohere.command-r-v1:0"}, ("steps.batch.model", "model-provider")),
        ({"model": "bedrock:meta.llama2-13b-chat-v1"}, ("steps.batch.model", "model-provider")),
        (
            {"model": "bedrock:amazon.nova-2-multimodal-embeddings-v1:0"},
            ("steps.batch.model", "model-provider"),
        ),
        ({"model": "anthropic:claude-haiku-4-5"}, ("steps.batch.api_key", "required")),
        ({"prompt": "one"}, ("steps.batch", "value-error")),
        ({"items": None}, ("steps.batch", "value-error")),
        ({"retry": {"backoff": "linear"}}, ("steps.batch.retry.backoff", "not-applicable")),
        ({"concurrency": {"limit": 1}}, ("steps.batch.concurrency", "not-applicable")),
        (
            {"rate_limit": {"limit": 10, "window_seconds": 60}},
            ("steps.batch.rate_limit", "not-applicable"),
        ),
        ({"prompt_template": "{{ item.text"}, ("steps.batch.prompt_template", "template")),
        ({"poll_interval_seconds": 0}, ("steps.batch.poll_interval_seconds", "greater-than-equal")),
    ],
)
def test_llm_batch_validation_rules(change, expected):
    step = {
        "type": "llm_batch",
        "model": "scripted:reviews",
        "items": "{{ trigger.reviews }}",
        "prompt_template": "Summarise {{ item.text }}",
    }
    step.update(change)
    step = {k: v for k, v in step.items() if v is not None}
    _, problems = validate_data({"id": "wf", "start": "batch", "steps": {"batch": step}})
    assert expected in {(p.path, p.rule) for p in problems}


@pytest.mark.parametrize(
    "model",
    [
        "bedrock:anthropic.claude-3-haiku-20240307-v1:0",
        "bedrock:us.amazon.nova-lite-v1:0",
        "bedrock:meta.llama3-1-70b-instruct-v1:0",
        "bedrock:mistral.mistral-small-2402-v1:0",
        "bedrock:mistral.mistral-large-2407-v1:0",
    ],
)
def test_llm_batch_accepts_the_bedrock_families_it_writes_records_for(model):
    step = {"type": "llm_batch", "model": model, "prompt": "Say hi"}
    _, problems = validate_data({"id": "wf", "start": "batch", "steps": {"batch": step}})
    assert problems == []
