"""Bedrock batch inference for each model family whose records Relayflow writes: the JSONL
``modelInput`` of each item in the family's InvokeModel format, and the ``modelOutput`` of
each output record read back as the item's response and usage (botocore's Stubber for
bedrock, moto for S3). Other families are refused before anything is written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from relayflow_testing import moto_table

from relayflow.ai.batch import BatchRequest
from relayflow.ai.bedrock_batch import BedrockBatch
from relayflow.errors import InvalidArgsError
from relayflow.settings import override_settings

pytestmark = pytest.mark.integration

ROLE = "arn:aws:iam::123456789012:role/batch"
JOB = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/j1"
REQUEST = BatchRequest("item-0", "Summarise: great", system="Be brief.", max_tokens=50)

#: model id → (the record's modelInput, a modelOutput, the usage read from it)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, int] | None]] = {
    "us.amazon.nova-lite-v1:0": (
        {
            "schemaVersion": "messages-v1",
            "messages": [{"role": "user", "content": [{"text": "Summarise: great"}]}],
            "inferenceConfig": {"maxTokens": 50},
            "system": [{"text": "Be brief."}],
        },
        {
            "output": {"message": {"role": "assistant", "content": [{"text": "Positive."}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 12, "outputTokens": 2, "totalTokens": 14},
        },
        {"input_tokens": 12, "output_tokens": 2},
    ),
    "meta.llama3-1-70b-instruct-v1:0": (
        {
            "prompt": "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief."
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nSummarise: great<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n",
            "max_gen_len": 50,
        },
        {
            "generation": "Positive.",
            "prompt_token_count": 30,
            "generation_token_count": 3,
            "stop_reason": "stop",
        },
        {"input_tokens": 30, "output_tokens": 3},
    ),
    "mistral.mistral-small-2402-v1:0": (
        {"prompt": "<s>[INST] Be brief.\n\nSummarise: great [/INST]", "max_tokens": 50},
        {"outputs": [{"text": "Positive.", "stop_reason": "stop"}]},
        None,
    ),
    "mistral.mistral-large-2407-v1:0": (
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Summarise: great"},
            ],
            "max_tokens": 50,
        },
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Positive."}}]},
        None,
    ),
}


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from relayflow.adapters.aws import client

    with moto_table(monkeypatch), override_settings(bedrock_batch_role_arn=ROLE):
        s3 = client("s3")
        s3.create_bucket(Bucket="relayflow-payloads")
        yield s3


def job(model_id: str, status: str) -> dict[str, Any]:
    return {
        "jobArn": JOB,
        "jobName": "j1",
        "modelId": model_id,
        "roleArn": ROLE,
        "status": status,
        "submitTime": datetime(2026, 12, 1, tzinfo=UTC),
        "inputDataConfig": {"s3InputDataConfig": {"s3Uri": "s3://relayflow-payloads/in.jsonl"}},
        "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://relayflow-payloads/out/"}},
    }


@pytest.mark.parametrize("model_id", sorted(CASES))
def test_each_family_writes_its_records_and_reads_its_results(s3, model_id):
    model_input, model_output, usage = CASES[model_id]
    bedrock = boto3.client("bedrock", region_name="us-east-1")
    with Stubber(bedrock) as stub:
        stub.add_response(
            "create_model_invocation_job",
            {"jobArn": JOB},
            {
                "jobName": ANY,
                "roleArn": ROLE,
                "modelId": model_id,
                "inputDataConfig": ANY,
                "outputDataConfig": ANY,
            },
        )
        provider = BedrockBatch(bedrock, s3)
        # When the job is submitted
        handle = provider.submit(model_id, [REQUEST])
        # Then the record is in the family's InvokeModel format
        key = f"{handle['prefix']}/input.jsonl"
        (line,) = s3.get_object(Bucket="relayflow-payloads", Key=key)["Body"].read().splitlines()
        assert json.loads(line) == {"recordId": "REC00000000", "modelInput": model_input}
        # When the job completed with the family's output record
        record = {
            "recordId": "REC00000000",
            "modelInput": model_input,
            "modelOutput": model_output,
        }
        s3.put_object(
            Bucket="relayflow-payloads",
            Key=f"{handle['prefix']}/output/j1/input.jsonl.out",
            Body=json.dumps(record).encode(),
        )
        stub.add_response(
            "get_model_invocation_job", job(model_id, "Completed"), {"jobIdentifier": JOB}
        )
        done = provider.status(json.loads(json.dumps(handle)))
    # Then the item's response (and, where the family reports them, its tokens) are read
    expected: dict[str, Any] = {"status": "succeeded", "response": "Positive."}
    if usage is not None:
        expected["usage"] = usage
    assert done.results == {"item-0": expected}


def test_temperature_goes_where_each_family_reads_it(s3):
    from relayflow.ai.bedrock_formats import record_format

    def build(model_id: str) -> dict[str, Any]:
        return record_format(model_id).build("hi", None, 10, 0.2)

    assert build("amazon.nova-micro-v1:0")["inferenceConfig"] == {
        "maxTokens": 10,
        "temperature": 0.2,
    }
    assert build("meta.llama3-8b-instruct-v1:0")["temperature"] == 0.2
    assert build("mistral.mistral-7b-instruct-v0:2")["temperature"] == 0.2
    # Anthropic models take no temperature (relayflow.ai.capabilities refuses one earlier)
    assert "temperature" not in build("anthropic.claude-3-haiku-20240307-v1:0")
    # without a system prompt, none is sent
    assert "system" not in build("amazon.nova-micro-v1:0")
    assert build("mistral.mistral-7b-instruct-v0:2")["prompt"] == "<s>[INST] hi [/INST]"


@pytest.mark.parametrize(
    "model_id", ["amazon.titan-text-express-v1", "cohere.command-r-v1:0", "meta.llama2-13b-chat-v1"]
)
def test_other_families_are_refused_before_anything_is_written(s3, model_id):
    bedrock = boto3.client("bedrock", region_name="us-east-1")
    with Stubber(bedrock), pytest.raises(InvalidArgsError, match="records are written for"):
        BedrockBatch(bedrock, s3).submit(model_id, [REQUEST])
    assert s3.list_objects_v2(Bucket="relayflow-payloads").get("KeyCount") == 0
