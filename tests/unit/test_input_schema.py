"""A workflow's declared ``input_schema``: checked as a draft 2020-12 schema at validation,
inputs checked against it with JSON pointers and rules, and offered as the argument schema of
an agent's workflow tool in the providers' wire formats."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from definitions import noop_workflow, validation_problems

from relayflow.ai.messages import ModelRequest
from relayflow.ai.providers.anthropic import AnthropicProvider
from relayflow.ai.providers.bedrock import BedrockProvider
from relayflow.ai.providers.openai import OpenAIProvider
from relayflow.ai.tools import Toolbox, workflow_argument_schema
from relayflow.compiler import CompileOptions, compile_workflow
from relayflow.definition.input_schema import MAX_INPUT_SCHEMA_BYTES, input_violations
from relayflow.validation import load_workflow_text, validate_data
from relayflow.validation.children import child_input_schemas, sub_workflow_input_schemas

ORDER = {
    "type": "object",
    "properties": {
        "sku": {"type": "string", "minLength": 1},
        "qty": {"type": "integer", "minimum": 1},
    },
    "required": ["sku", "qty"],
    "additionalProperties": False,
}


# --------------------------------------------------------------------------- validation


def test_a_valid_schema_is_kept_on_the_workflow():
    workflow, found = validate_data(noop_workflow("orders", input_schema=ORDER))
    assert found == []
    assert workflow is not None and workflow.input_schema == ORDER


def test_a_schema_that_is_not_json_schema_is_refused_with_its_path_and_rule():
    bad = {"type": "object", "properties": {"qty": {"type": "integr"}}}
    ((path, rule, message),) = validation_problems(noop_workflow("orders", input_schema=bad))
    assert (path, rule) == ("input_schema", "json-schema")
    assert "/properties/qty/type" in message and "integr" in message


def test_another_draft_is_refused():
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
    ((path, rule, message),) = validation_problems(noop_workflow("orders", input_schema=draft7))
    assert (path, rule) == ("input_schema", "json-schema")
    assert "draft 2020-12" in message


def test_the_2020_12_dialect_may_be_named():
    named = {"$schema": "https://json-schema.org/draft/2020-12/schema", **ORDER}
    assert validation_problems(noop_workflow("orders", input_schema=named)) == []


def test_an_oversized_schema_is_refused_naming_the_limit():
    huge = {"type": "object", "description": "x" * MAX_INPUT_SCHEMA_BYTES}
    ((path, rule, message),) = validation_problems(noop_workflow("orders", input_schema=huge))
    assert (path, rule) == ("input_schema", "input-schema-size")
    assert str(MAX_INPUT_SCHEMA_BYTES) in message


def test_a_schema_that_is_not_an_object_is_refused():
    ((path, _rule, _message),) = validation_problems(
        noop_workflow("orders", input_schema=["type", "object"])
    )
    assert path == "input_schema"


# --------------------------------------------------------------------------- inputs


def test_a_matching_input_has_no_violations():
    assert input_violations(ORDER, {"sku": "A-1", "qty": 2}) == []
    assert input_violations(None, "anything") == []


def test_violations_name_the_pointer_and_the_rule():
    found = input_violations(ORDER, {"sku": "", "qty": "two", "extra/x": 1})
    assert [(v.pointer, v.rule) for v in found] == [
        ("", "additionalProperties"),
        ("/qty", "type"),
        ("/sku", "minLength"),
    ]
    assert "'two' is not of type 'integer'" in found[1].message


def test_a_missing_property_is_reported_at_the_object():
    (violation,) = input_violations(ORDER, {"sku": "A-1"})
    assert (violation.pointer, violation.rule) == ("", "required")
    assert "'qty' is a required property" in violation.message


def test_pointers_escape_slash_and_tilde():
    schema = {"type": "object", "properties": {"a/b~c": {"type": "integer"}}}
    (violation,) = input_violations(schema, {"a/b~c": "x"})
    assert violation.pointer == "/a~1b~0c"


# --------------------------------------------------------------------------- agent tools

PARENT = """
id: quoter
start: ask
steps:
  ask:
    type: agent
    model: bedrock:anthropic.claude-3-5-haiku-20241022-v1:0
    prompt: "Quote"
    tools: [workflow.price-lookup, workflow.quoter, workflow.free-form]
"""


def agent_config(options: CompileOptions) -> dict[str, Any]:
    compiled = compile_workflow(load_workflow_text(PARENT, "quoter.yaml"), options)
    return json.loads(compiled.asl["States"]["ask"]["Parameters"]["Payload"]["step"]["config"])


def test_child_input_schemas_are_looked_up_and_the_workflow_answers_for_itself():
    parent = load_workflow_text(PARENT, "quoter.yaml").model_copy(
        update={"input_schema": {"type": "object", "required": ["sku"]}}
    )
    looked_up: list[str] = []

    def lookup(workflow_id: str) -> dict[str, Any] | None:
        looked_up.append(workflow_id)
        return {"id": workflow_id, "input_schema": ORDER} if workflow_id == "price-lookup" else {}

    schemas = child_input_schemas(parent, lookup)
    assert schemas == {"price-lookup": ORDER, "quoter": {"type": "object", "required": ["sku"]}}
    assert sorted(looked_up) == ["free-form", "price-lookup"]


def test_the_compiled_agent_config_carries_the_resolved_schemas():
    config = agent_config(CompileOptions(workflow_input_schemas={"price-lookup": ORDER}))
    assert config["workflow_schemas"] == {"price-lookup": ORDER}
    assert "workflow_schemas" not in agent_config(CompileOptions())


def test_the_tool_spec_uses_the_childs_schema_and_any_object_without_one():
    config = agent_config(CompileOptions(workflow_input_schemas={"price-lookup": ORDER}))
    box = Toolbox.build(config, {})
    specs = {spec.name: spec.input_schema for spec in box.specs}
    assert specs["workflow_price-lookup"] == ORDER
    assert specs["workflow_free-form"] == {"type": "object", "additionalProperties": True}


def test_a_declared_non_object_schema_is_wrapped_under_an_object():
    assert workflow_argument_schema({"$schema": "x", "required": ["a"]}) == {
        "type": "object",
        "allOf": [{"required": ["a"]}],
    }


def _request(config: dict[str, Any]) -> ModelRequest:
    box = Toolbox.build(config, {})
    return ModelRequest(
        model_id="anthropic.claude-3-5-haiku-20241022-v1:0",
        system=None,
        messages=[{"role": "user", "content": [{"type": "text", "text": "Quote A-1"}]}],
        tools=box.specs,
        max_tokens=256,
    )


def test_bedrock_converse_sends_the_childs_schema_as_the_tools_input_schema():
    # Given an agent whose workflow tool's child declares an input_schema
    request = _request(agent_config(CompileOptions(workflow_input_schemas={"price-lookup": ORDER})))
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    provider = BedrockProvider(client)
    params = provider.params(request)
    tools = {t["toolSpec"]["name"]: t["toolSpec"] for t in params["toolConfig"]["tools"]}
    # Then the Converse request (checked against the service model by the Stubber) holds it
    assert tools["workflow_price-lookup"]["inputSchema"] == {"json": ORDER}
    answer = {
        "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1},
    }
    with Stubber(client) as stub:
        stub.add_response("converse", answer, params)
        assert provider.complete(request).text == "ok"
        stub.assert_no_pending_responses()


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_http_providers_send_the_childs_schema(provider: str):
    request = _request(agent_config(CompileOptions(workflow_input_schemas={"price-lookup": ORDER})))
    if provider == "anthropic":
        body = AnthropicProvider().body(request)
        tools = {t["name"]: t["input_schema"] for t in body["tools"]}
    else:
        body = OpenAIProvider().body(request)
        tools = {t["function"]["name"]: t["function"]["parameters"] for t in body["tools"]}
    assert tools["workflow_price-lookup"] == ORDER
    json.dumps(body)  # the wire body is plain JSON


# --------------------------------------------------------------------------- sub_workflow

CALLER = """
id: caller
start: call
steps:
  call:
    type: sub_workflow
    workflow_id: price-lookup
    input: {sku: "{{ trigger.sku }}"}
    retry: {max_attempts: 4, retry_on: [States.ALL]}
    on_success: dynamic
    on_failure: handle
  handle: {type: noop}
  dynamic:
    type: sub_workflow
    workflow_id: "{{ trigger.kind }}"
    on_success: handle
"""


def test_sub_workflow_schemas_are_resolved_per_step_for_literal_targets_only():
    caller = load_workflow_text(CALLER, "caller.yaml")
    asked: list[tuple[str, int | None]] = []

    def lookup(workflow_id: str, version: int | None) -> dict[str, Any]:
        asked.append((workflow_id, version))
        return {"input_schema": ORDER}

    assert sub_workflow_input_schemas(caller, lookup) == {"call": ORDER}
    assert asked == [("price-lookup", None)]


def test_a_sub_workflow_with_a_known_schema_checks_its_input_before_the_child_starts():
    caller = load_workflow_text(CALLER, "caller.yaml")
    compiled = compile_workflow(caller, CompileOptions(sub_workflow_input_schemas={"call": ORDER}))
    states = compiled.asl["States"]
    # The depth guard leads to the check, the check to the child's start
    assert states["call.depth"]["Default"] == "call.check_input"
    check = states["call.check_input"]
    assert check["Next"] == "call.prepare"
    config = json.loads(check["Parameters"]["Payload"]["step"]["config"])
    assert config == {
        "mapping": {"sku": "{{ trigger.sku }}"},
        "input_check": {"workflow_id": "price-lookup", "schema": ORDER},
    }
    # A mismatch takes the step's failure route; the step's States.ALL retry is not applied
    assert check["Catch"] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "handle"}
    ]
    assert all("States.ALL" not in r["ErrorEquals"] for r in check.get("Retry", []))
    # The machine's role may invoke the transform function
    assert "transform" in json.dumps(compiled.iam_statements)
    # A templated target has no check; without a schema nothing changes
    assert "dynamic.check_input" not in states
    plain = compile_workflow(caller, CompileOptions()).asl["States"]
    assert plain["call.depth"]["Default"] == "call.prepare" and "call.check_input" not in plain


def test_the_transform_function_refuses_a_child_input_that_breaks_the_schema():
    from relayflow.errors import InvalidRunInput
    from relayflow.steps import transform

    def event(sku: Any) -> dict[str, Any]:
        config = {
            "mapping": {"sku": "{{ trigger.sku }}", "qty": 1},
            "input_check": {"workflow_id": "price-lookup", "schema": ORDER},
        }
        return {
            "step": {"key": "call", "type": "transform", "config": json.dumps(config)},
            "doc": {"run": {"id": "r1"}, "trigger": {"sku": sku}, "steps": {}},
            "context": {"execution_id": "e", "state": "call.check_input", "attempt": 0},
        }

    assert transform.run(event("A-1"))["output"] == {"checked": True}
    with pytest.raises(InvalidRunInput, match=r"/sku: '' should be non-empty \(rule minLength\)"):
        transform.run(event(""))
