"""The agent function in template.yaml: Bedrock on the configured model ids only, the tool
function's grants for its tool calls (nothing wider), and the state machines may invoke it."""

from __future__ import annotations

import json

from sam_template import (
    ACCOUNT,
    REGION,
    Resolver,
    allows,
    function_resources,
    load_template,
    role_statements,
)

TEMPLATE = load_template()
FUNCTIONS = function_resources(TEMPLATE)
MODEL = "arn:aws:bedrock:{region}::foundation-model/{model}"


def policies(resolver: Resolver, kind: str) -> list[dict]:
    """The function's policies, resolved (a policy under a false condition is left out)."""
    props = TEMPLATE["Resources"][FUNCTIONS[kind]]["Properties"]
    return resolver.resolve(props.get("Policies") or [])


def statements(resolver: Resolver, kind: str) -> list[dict]:
    return [s for p in policies(resolver, kind) if "Statement" in p for s in p["Statement"]]


def test_the_agent_may_invoke_exactly_the_configured_bedrock_models():
    # Given the stack deployed with two model ids
    resolver = Resolver(
        TEMPLATE,
        Stage="dev",
        BedrockModelIds="anthropic.claude-3-5-haiku-20241022-v1:0,amazon.nova-lite-v1:0",
    )
    granted = statements(resolver, "agent")
    (bedrock,) = [s for s in granted if s.get("Sid") == "BedrockConfiguredModels"]
    # Then the agent function may invoke those two models (in any region: inference
    # profiles), with and without streaming, and no other model
    assert bedrock["Resource"] == [
        "arn:aws:bedrock:*::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0",
        "arn:aws:bedrock:*::foundation-model/amazon.nova-lite-v1:0",
    ]
    for action in ("bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"):
        for model in ("anthropic.claude-3-5-haiku-20241022-v1:0", "amazon.nova-lite-v1:0"):
            assert allows(granted, action, MODEL.format(region=REGION, model=model))
    assert not allows(
        granted,
        "bedrock:InvokeModel",
        MODEL.format(region=REGION, model="anthropic.claude-opus-4-1-20250805-v1:0"),
    )
    assert not allows(granted, "bedrock:CreateModelInvocationJob", bedrock["Resource"][0])
    # And no other function may call Bedrock (but llm_batch, whose grants are checked below)
    for kind in FUNCTIONS:
        if kind not in ("agent", "llm_batch"):
            assert "bedrock:" not in json.dumps(statements(resolver, kind)), kind


def test_one_model_id_grants_one_model():
    resolver = Resolver(TEMPLATE, Stage="prod", BedrockModelIds="amazon.nova-micro-v1:0")
    (bedrock,) = [
        s for s in statements(resolver, "agent") if s.get("Sid") == "BedrockConfiguredModels"
    ]
    assert bedrock["Resource"] == ["arn:aws:bedrock:*::foundation-model/amazon.nova-micro-v1:0"]


def test_the_agent_holds_the_tool_functions_grants_and_nothing_wider():
    # Its tool calls run the tool step's code, so they need the same (prefix-scoped) grants
    resolver = Resolver(TEMPLATE, Stage="dev", SecretsKmsKeyArn="arn:aws:kms:us-east-1:1:key/k")
    tool, agent = policies(resolver, "tool"), policies(resolver, "agent")
    assert all(p in agent for p in tool)
    extra = [p for p in agent if p not in tool]
    assert [s["Sid"] for p in extra for s in p["Statement"]] == ["BedrockConfiguredModels"]
    assert '"Resource": "*"' not in json.dumps(agent)


def test_the_state_machines_may_invoke_the_agent_function_of_their_stage():
    resolver = Resolver(TEMPLATE, Stage="dev")
    granted = role_statements(TEMPLATE, resolver, "StateMachineRole")
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:relayflow-dev-agent"
    assert allows(granted, "lambda:InvokeFunction", arn)
    assert allows(granted, "lambda:InvokeFunction", f"{arn}:live")
    assert not allows(granted, "lambda:InvokeFunction", arn.replace("-dev-", "-prod-"))


def test_llm_batch_runs_bedrock_jobs_with_its_own_role_only():
    # Given the llm_batch function's grants
    resolver = Resolver(
        TEMPLATE, Stage="dev", BedrockModelIds="anthropic.claude-3-haiku-20240307-v1:0"
    )
    granted = statements(resolver, "llm_batch")
    job = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:model-invocation-job/abc"
    model = MODEL.format(region=REGION, model="anthropic.claude-3-haiku-20240307-v1:0")
    # Then it may create and read batch jobs for the configured models, invoke them one by one
    for action in ("bedrock:CreateModelInvocationJob", "bedrock:GetModelInvocationJob"):
        assert allows(granted, action, job)
    assert allows(granted, "bedrock:CreateModelInvocationJob", model)
    assert allows(granted, "bedrock:InvokeModel", model)
    assert not allows(granted, "bedrock:InvokeModel", MODEL.format(region=REGION, model="x.y"))
    # And pass only the batch role, only to Bedrock
    (pass_role,) = [s for s in granted if s.get("Sid") == "PassBatchRoleToBedrock"]
    assert pass_role["Resource"].endswith("bedrockbatchrole")
    assert pass_role["Condition"] == {
        "StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}
    }
    # And the batch role reaches only the batch records in the payload bucket
    role = role_statements(TEMPLATE, resolver, "BedrockBatchRole")
    bucket = resolver.get_att("PayloadBucket", "Arn")
    assert allows(role, "s3:PutObject", f"{bucket}/payloads/batch/job/output/x.jsonl.out")
    assert not allows(role, "s3:GetObject", f"{bucket}/payloads/acme/run/step/out.json")
    trust = TEMPLATE["Resources"]["BedrockBatchRole"]["Properties"]["AssumeRolePolicyDocument"]
    assert trust["Statement"][0]["Principal"] == {"Service": "bedrock.amazonaws.com"}
