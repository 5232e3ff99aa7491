"""Bedrock Converse against botocore's Stubber: the request Relayflow sends is validated
against the bedrock-runtime service model, and the answers are Converse's wire format."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from relayflow.ai.messages import ModelRequest, ToolSpec, tool_result_block
from relayflow.ai.providers.bedrock import BedrockProvider
from relayflow.errors import ModelError, ModelResponseInvalid, TransientError

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
LOOKUP = ToolSpec(
    "crm_lookup",
    "Look a customer up.",
    {"type": "object", "properties": {"id": {"type": "string"}}},
)


@pytest.fixture
def stubbed() -> Any:
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    with Stubber(client) as stub:
        yield BedrockProvider(client), stub
        stub.assert_no_pending_responses()


def converse_answer(content: list[dict[str, Any]], stop: str, usage: tuple[int, int]) -> dict:
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {"inputTokens": usage[0], "outputTokens": usage[1], "totalTokens": sum(usage)},
        "metrics": {"latencyMs": 420},
    }


def test_a_tool_use_turn_is_sent_and_read_in_converse_format(stubbed):
    provider, stub = stubbed
    # Given a conversation with a system prompt and one tool
    request = ModelRequest(
        model_id=MODEL,
        system="You triage tickets.",
        messages=[{"role": "user", "content": [{"type": "text", "text": "Ticket from c-1"}]}],
        tools=[LOOKUP],
        max_tokens=512,
    )
    expected = {
        "modelId": MODEL,
        "messages": [{"role": "user", "content": [{"text": "Ticket from c-1"}]}],
        "system": [{"text": "You triage tickets."}],
        "inferenceConfig": {"maxTokens": 512},
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "crm_lookup",
                        "description": "Look a customer up.",
                        "inputSchema": {"json": LOOKUP.input_schema},
                    }
                }
            ]
        },
    }
    stub.add_response(
        "converse",
        converse_answer(
            [
                {"text": "Looking up."},
                {"toolUse": {"toolUseId": "tu-1", "name": "crm_lookup", "input": {"id": "c-1"}}},
            ],
            "tool_use",
            (210, 33),
        ),
        expected,
    )
    # When the model is called
    turn = provider.complete(request)
    # Then its tool call, stop reason and usage are read
    assert turn.stop_reason == "tool_use"
    assert turn.text == "Looking up."
    assert [(c.id, c.name, c.input) for c in turn.tool_calls] == [
        ("tu-1", "crm_lookup", {"id": "c-1"})
    ]
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (210, 33)


def test_tool_results_travel_as_tool_result_blocks(stubbed):
    provider, stub = stubbed
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_call", "id": "tu-1", "name": "crm_lookup", "input": {"id": "c"}}
            ],
        },
        {
            "role": "user",
            "content": [
                tool_result_block("tu-1", {"plan": "pro"}),
                tool_result_block("tu-2", "refused", is_error=True),
            ],
        },
    ]
    stub.add_response(
        "converse",
        converse_answer([{"text": "Pro plan."}], "end_turn", (300, 5)),
        {
            "modelId": MODEL,
            "messages": [
                {"role": "user", "content": [{"text": "hi"}]},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "toolUse": {
                                "toolUseId": "tu-1",
                                "name": "crm_lookup",
                                "input": {"id": "c"},
                            }
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "toolResult": {
                                "toolUseId": "tu-1",
                                "content": [{"json": {"plan": "pro"}}],
                                "status": "success",
                            }
                        },
                        {
                            "toolResult": {
                                "toolUseId": "tu-2",
                                "content": [{"text": "refused"}],
                                "status": "error",
                            }
                        },
                    ],
                },
            ],
            "inferenceConfig": ANY,
        },
    )
    turn = provider.complete(ModelRequest(model_id=MODEL, messages=messages))
    assert turn.stop_reason == "end_turn" and turn.text == "Pro plan." and turn.tool_calls == []


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("end_turn", "end_turn"),
        ("stop_sequence", "end_turn"),
        ("max_tokens", "max_tokens"),
        ("guardrail_intervened", "refused"),
        ("content_filtered", "refused"),
    ],
)
def test_stop_reasons_are_mapped(stubbed, stop, expected):
    provider, stub = stubbed
    stub.add_response("converse", converse_answer([{"text": "x"}], stop, (1, 1)))
    turn = provider.complete(
        ModelRequest(
            model_id=MODEL, messages=[{"role": "user", "content": [{"type": "text", "text": "q"}]}]
        )
    )
    assert turn.stop_reason == expected


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        ("ThrottlingException", 429, TransientError),
        ("ServiceUnavailableException", 503, TransientError),
        ("ModelTimeoutException", 408, TransientError),
        ("InternalServerException", 500, TransientError),
        ("ValidationException", 400, ModelError),
        ("AccessDeniedException", 403, ModelError),
        ("ResourceNotFoundException", 404, ModelError),
    ],
)
def test_converse_errors_become_named_errors(stubbed, code, status, error):
    provider, stub = stubbed
    stub.add_client_error("converse", service_error_code=code, http_status_code=status)
    with pytest.raises(error) as raised:
        provider.complete(
            ModelRequest(
                model_id=MODEL,
                messages=[{"role": "user", "content": [{"type": "text", "text": "q"}]}],
            )
        )
    assert raised.value.details["code"] == code


def test_an_answer_without_a_message_is_invalid():
    from relayflow.ai.providers.bedrock import parse_response

    with pytest.raises(ModelResponseInvalid):
        parse_response({"stopReason": "end_turn", "usage": {}})
