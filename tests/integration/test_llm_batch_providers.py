"""Batch providers on their wire formats: Anthropic Message Batches against a local HTTP
server; Bedrock batch inference with botocore's Stubber (bedrock, service-quotas) and moto's
S3 for the JSONL records."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from relayflow_testing import Received, Reply, Server, allowed_server, moto_table

from relayflow.ai.batch import AnthropicBatch, BatchRequest
from relayflow.ai.bedrock_batch import BedrockBatch, check_minimum, minimum_records
from relayflow.errors import BatchFailed, BatchTooSmall, TransientError
from relayflow.settings import override_settings
from relayflow.tenancy import acting_for

pytestmark = pytest.mark.integration
KEY = "sk-batch-test-key"
REQUESTS = [
    BatchRequest("item-0", "Summarise: great", system="Be brief.", max_tokens=50),
    BatchRequest("item-1", "Summarise: awful", system="Be brief.", max_tokens=50),
]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from relayflow.adapters.aws import client
    from relayflow.tools.secrets import clear_secret_cache

    with moto_table(monkeypatch), acting_for("acme"):
        clear_secret_cache()
        client("secretsmanager").create_secret(
            Name="relayflow/local/acme/anthropic", SecretString=KEY
        )
        client("s3").create_bucket(Bucket="relayflow-payloads")
        yield
        clear_secret_cache()


# --------------------------------------------------------------------------- Anthropic


@pytest.fixture
def server(aws: None) -> Iterator[Server]:
    with allowed_server() as srv:
        yield srv


def test_anthropic_message_batches_submit_poll_and_results(server):
    status = {"processing_status": "in_progress"}
    results = [
        {
            "custom_id": "item-0",
            "result": {
                "type": "succeeded",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Positive."}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 20, "output_tokens": 2},
                },
            },
        },
        {
            "custom_id": "item-1",
            "result": {
                "type": "errored",
                "error": {"type": "error", "error": {"type": "overloaded_error"}},
            },
        },
    ]

    def reply(received: Received) -> Reply:
        if received.method == "POST" and received.path == "/v1/messages/batches":
            body = {
                "id": "msgbatch_01",
                "type": "message_batch",
                "processing_status": "in_progress",
            }
        elif received.path == "/v1/messages/batches/msgbatch_01":
            body = {
                "id": "msgbatch_01",
                "type": "message_batch",
                **status,
                "results_url": f"{server.url}/v1/messages/batches/msgbatch_01/results",
            }
        elif received.path.endswith("/results"):
            lines = "\n".join(json.dumps(r) for r in results).encode()
            return 200, {"Content-Type": "application/binary"}, lines
        else:
            return 404, {}, b""
        return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()

    server.reply = reply
    provider = AnthropicBatch(server.url, {"name": "anthropic"})
    # When the batch is submitted
    handle = provider.submit("claude-haiku-4-5", REQUESTS)
    submitted = json.loads(server.requests[0].body)
    # Then each item is one request with its custom_id and Messages params
    assert handle == {"id": "msgbatch_01"}
    assert server.requests[0].headers["x-api-key"] == KEY
    assert submitted["requests"][0] == {
        "custom_id": "item-0",
        "params": {
            "model": "claude-haiku-4-5",
            "max_tokens": 50,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Summarise: great"}]}
            ],
            "system": "Be brief.",
        },
    }
    # And while it runs, a poll says so; once ended, the JSONL results are read per item
    assert provider.status(handle).state == "in_progress"
    status["processing_status"] = "ended"
    done = provider.status(handle)
    assert done.state == "ended"
    assert done.results["item-0"] == {
        "status": "succeeded",
        "response": "Positive.",
        "usage": {"input_tokens": 20, "output_tokens": 2},
    }
    assert done.results["item-1"] == {"status": "errored", "error": {"type": "overloaded_error"}}


def test_anthropic_batch_429_is_transient(server):
    server.reply = lambda _: (429, {"Retry-After": "30", "Content-Type": "application/json"}, b"{}")
    with pytest.raises(TransientError) as raised:
        AnthropicBatch(server.url, {"name": "anthropic"}).submit("m", REQUESTS)
    assert raised.value.details["retry_after"] == 30


# --------------------------------------------------------------------------- Bedrock


def quotas_client(values: dict[str, float]) -> tuple[Any, Stubber]:
    client = boto3.client("service-quotas", region_name="us-east-1")
    stub = Stubber(client)
    stub.add_response(
        "list_service_quotas",
        {
            "Quotas": [
                {"QuotaName": name, "Value": value, "QuotaCode": f"L-{i}", "ServiceCode": "bedrock"}
                for i, (name, value) in enumerate(values.items())
            ]
        },
        {"ServiceCode": "bedrock"},
    )
    stub.activate()
    return client, stub


QUOTAS = {
    "Minimum number of records per batch inference job for Claude 3.5 Haiku": 100.0,
    "Minimum number of records per batch inference job for Claude 3 Haiku": 50.0,
    "On-demand InvokeModel tokens per minute for Claude 3 Haiku": 400000.0,
}


def test_the_minimum_records_quota_is_read_for_the_model():
    client, _ = quotas_client(QUOTAS)
    assert minimum_records("anthropic.claude-3-haiku-20240307-v1:0", client) == 50
    client, _ = quotas_client(QUOTAS)
    assert minimum_records("us.anthropic.claude-3-5-haiku-20241022-v1:0", client) == 100
    client, _ = quotas_client({})
    assert minimum_records("anthropic.claude-3-haiku-20240307-v1:0", client) == 100


def test_the_minimum_records_quota_is_read_for_other_families():
    quotas = {
        "Minimum number of records per batch inference job for Llama 3.1 70B Instruct": 20.0,
        "Minimum number of records per batch inference job for Nova Lite": 30.0,
        "Minimum number of records per batch inference job for Claude 3 Haiku": 500.0,
    }
    client, _ = quotas_client(quotas)
    assert minimum_records("meta.llama3-1-70b-instruct-v1:0", client) == 20
    client, _ = quotas_client(quotas)
    assert minimum_records("us.amazon.nova-lite-v1:0", client) == 30


def test_below_the_minimum_the_step_refuses_or_falls_back():
    client, _ = quotas_client(QUOTAS)
    with pytest.raises(BatchTooSmall) as raised:
        check_minimum("anthropic.claude-3-haiku-20240307-v1:0", 2, "fail", client)
    assert raised.value.details == {"minimum": 50, "records": 2}
    client, _ = quotas_client(QUOTAS)
    assert check_minimum("anthropic.claude-3-haiku-20240307-v1:0", 2, "one_by_one", client) is True
    client, _ = quotas_client(QUOTAS)
    assert check_minimum("anthropic.claude-3-haiku-20240307-v1:0", 50, "fail", client) is False


def test_bedrock_batch_job_writes_records_creates_the_job_and_reads_results(aws):
    from relayflow.adapters.aws import client

    bedrock = boto3.client("bedrock", region_name="us-east-1")
    s3 = client("s3")
    with (
        override_settings(bedrock_batch_role_arn="arn:aws:iam::123456789012:role/batch"),
        Stubber(bedrock) as stub,
    ):
        job_arn = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/j1"
        stub.add_response(
            "create_model_invocation_job",
            {"jobArn": job_arn},
            {
                "jobName": ANY,
                "roleArn": "arn:aws:iam::123456789012:role/batch",
                "modelId": "anthropic.claude-3-haiku-20240307-v1:0",
                "inputDataConfig": ANY,
                "outputDataConfig": ANY,
            },
        )
        provider = BedrockBatch(bedrock, s3)
        handle = provider.submit("anthropic.claude-3-haiku-20240307-v1:0", REQUESTS)
        # The records are JSONL in the Anthropic format Bedrock expects
        body = s3.get_object(Bucket="relayflow-payloads", Key=f"{handle['prefix']}/input.jsonl")[
            "Body"
        ].read()
        records = [json.loads(line) for line in body.decode().splitlines()]
        assert records[1] == {
            "recordId": "REC00000001",
            "modelInput": {
                "anthropic_version": "bedrock-2023-05-31",
                "max_tokens": 50,
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Summarise: awful"}]}
                ],
                "system": "Be brief.",
            },
        }
        # While the job runs, a poll says so
        stub.add_response(
            "get_model_invocation_job",
            job_response(job_arn, "InProgress"),
            {"jobIdentifier": job_arn},
        )
        assert provider.status(handle).state == "in_progress"
        # Once completed, the .jsonl.out records are the per-item results
        out = "\n".join(
            json.dumps(r)
            for r in [
                {
                    "recordId": "REC00000000",
                    "modelOutput": {
                        "content": [{"type": "text", "text": "Positive."}],
                        "usage": {"input_tokens": 12, "output_tokens": 2},
                    },
                },
                {
                    "recordId": "REC00000001",
                    "error": {"errorCode": 400, "errorMessage": "bad record"},
                },
            ]
        )
        s3.put_object(
            Bucket="relayflow-payloads",
            Key=f"{handle['prefix']}/output/j1/input.jsonl.out",
            Body=out.encode(),
        )
        stub.add_response(
            "get_model_invocation_job",
            job_response(job_arn, "Completed"),
            {"jobIdentifier": job_arn},
        )
        done = provider.status(handle)
        assert done.results["item-0"]["response"] == "Positive."
        assert done.results["item-1"] == {
            "status": "errored",
            "error": {"errorCode": 400, "errorMessage": "bad record"},
        }
        # A failed job is a whole-batch failure
        stub.add_response(
            "get_model_invocation_job", job_response(job_arn, "Failed"), {"jobIdentifier": job_arn}
        )
        with pytest.raises(BatchFailed, match="ended Failed"):
            provider.status(handle)


def job_response(arn: str, status: str) -> dict[str, Any]:
    from datetime import UTC, datetime

    return {
        "jobArn": arn,
        "jobName": "j1",
        "modelId": "anthropic.claude-3-haiku-20240307-v1:0",
        "roleArn": "arn:aws:iam::123456789012:role/batch",
        "status": status,
        "submitTime": datetime(2026, 12, 1, tzinfo=UTC),
        "inputDataConfig": {"s3InputDataConfig": {"s3Uri": "s3://relayflow-payloads/in.jsonl"}},
        "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://relayflow-payloads/out/"}},
    }


# --------------------------------------------------------------------------- OpenAI


def test_openai_batch_uploads_jsonl_creates_the_batch_and_reads_output_and_error_files(server):
    import email

    from relayflow.ai.batch import OpenAIBatch

    state = {"status": "in_progress"}
    output = {
        "id": "batch_req_1",
        "custom_id": "item-0",
        "response": {
            "status_code": 200,
            "body": {
                "choices": [
                    {
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "Positive."},
                    }
                ],
                "usage": {"prompt_tokens": 15, "completion_tokens": 2},
            },
        },
        "error": None,
    }
    failed = {
        "id": "batch_req_2",
        "custom_id": "item-1",
        "response": {
            "status_code": 400,
            "body": {"error": {"message": "bad", "type": "invalid_request_error"}},
        },
        "error": None,
    }

    def reply(received: Received) -> Reply:
        routes = {
            ("POST", "/v1/files"): {"id": "file-in", "object": "file", "purpose": "batch"},
            ("POST", "/v1/batches"): {"id": "batch_abc", "object": "batch", "status": "validating"},
            ("GET", "/v1/batches/batch_abc"): {
                "id": "batch_abc",
                "object": "batch",
                **state,
                "output_file_id": "file-out",
                "error_file_id": "file-err",
            },
        }
        if (received.method, received.path) in routes:
            body = json.dumps(routes[(received.method, received.path)]).encode()
            return 200, {"Content-Type": "application/json"}, body
        if received.path == "/v1/files/file-out/content":
            return 200, {"Content-Type": "application/octet-stream"}, json.dumps(output).encode()
        if received.path == "/v1/files/file-err/content":
            return 200, {"Content-Type": "application/octet-stream"}, json.dumps(failed).encode()
        return 404, {}, b""

    server.reply = reply
    provider = OpenAIBatch(f"{server.url}/v1", {"name": "anthropic"})
    # When submitted
    handle = provider.submit("gpt-4o-mini", REQUESTS)
    upload, create = server.requests[0], server.requests[1]
    # Then the requests went up as a JSONL file (purpose batch), and the batch names it
    message = email.message_from_bytes(
        f"Content-Type: {upload.headers['content-type']}\r\n\r\n".encode() + upload.body
    )
    parts = {p.get_param("name", header="content-disposition"): p for p in message.get_payload()}
    assert parts["purpose"].get_payload() == "batch"
    lines = [json.loads(line) for line in parts["file"].get_payload().splitlines()]
    assert lines[0] == {
        "custom_id": "item-0",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Summarise: great"},
            ],
            "max_completion_tokens": 50,
        },
    }
    assert json.loads(create.body) == {
        "input_file_id": "file-in",
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    assert upload.headers["authorization"] == f"Bearer {KEY}" and handle["id"] == "batch_abc"
    # And it polls until completed, then reads the output and the error files
    assert provider.status(handle).state == "in_progress"
    state["status"] = "completed"
    done = provider.status(handle)
    assert done.results["item-0"] == {
        "status": "succeeded",
        "response": "Positive.",
        "usage": {"input_tokens": 15, "output_tokens": 2},
    }
    assert done.results["item-1"]["status"] == "errored"
    assert done.results["item-1"]["error"]["type"] == "invalid_request_error"
    # A failed batch is a whole-batch failure
    state["status"] = "failed"
    with pytest.raises(BatchFailed, match="ended failed"):
        provider.status(handle)
