"""Anthropic Messages and OpenAI-compatible Chat Completions against a local HTTP server:
the request on the wire, tool calls, and 429 / 5xx / 4xx / malformed answers as named
errors. Keys come from Secrets Manager / SSM (moto) and never appear in an error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from relayflow_testing import Received, Reply, Server, allowed_server, moto_table

from relayflow.ai.messages import ModelRequest, ToolSpec, tool_result_block
from relayflow.ai.providers import provider_for
from relayflow.errors import ModelError, ModelResponseInvalid, SsrfBlocked, TransientError
from relayflow.tenancy import acting_for

pytestmark = pytest.mark.integration
KEY = "sk-test-9f8e7d-secret"
LOOKUP = ToolSpec(
    "crm_lookup", "Look up.", {"type": "object", "properties": {"id": {"type": "string"}}}
)
CONVERSATION = [
    {"role": "user", "content": [{"type": "text", "text": "Ticket from c-1"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_call", "id": "t1", "name": "crm_lookup", "input": {"id": "c-1"}}
        ],
    },
    {"role": "user", "content": [tool_result_block("t1", {"plan": "pro"})]},
]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    from relayflow.adapters.aws import client
    from relayflow.tools.secrets import clear_secret_cache

    with moto_table(monkeypatch), allowed_server() as srv, acting_for("acme"):
        clear_secret_cache()
        client("secretsmanager").create_secret(
            Name="relayflow/local/acme/anthropic", SecretString=KEY
        )
        client("ssm").put_parameter(
            Name="/relayflow/local/acme/openai", Value=KEY, Type="SecureString"
        )
        yield srv
        clear_secret_cache()


def json_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Any:
    def reply(_: Received) -> Reply:
        return (
            status,
            {"Content-Type": "application/json", **(headers or {})},
            json.dumps(body).encode(),
        )

    return reply


def request(tools: bool = True, temperature: float | None = None) -> ModelRequest:
    return ModelRequest(
        model_id="m-1",
        system="You triage.",
        messages=CONVERSATION,
        tools=[LOOKUP] if tools else [],
        max_tokens=256,
        temperature=temperature,
    )


def anthropic(server: Server) -> Any:
    provider, _ = provider_for(
        "anthropic:m-1", {"base_url": server.url, "api_key": {"name": "anthropic"}}
    )
    return provider


def openai(server: Server) -> Any:
    provider, _ = provider_for(
        "openai:m-1",
        {"base_url": f"{server.url}/v1", "api_key": {"name": "openai", "source": "ssm"}},
    )
    return provider


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_request_and_tool_use_answer(server):
    server.reply = json_reply(
        200,
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_2", "name": "crm_lookup", "input": {"id": "c-2"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 320, "output_tokens": 41},
        },
    )
    turn = anthropic(server).complete(request())
    (sent,) = server.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY and sent.headers["anthropic-version"] == "2023-06-01"
    body = json.loads(sent.body)
    assert body == {
        "model": "m-1",
        "max_tokens": 256,
        "system": "You triage.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Ticket from c-1"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "crm_lookup", "input": {"id": "c-1"}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": '{"plan":"pro"}',
                        "is_error": False,
                    }
                ],
            },
        ],
        "tools": [
            {"name": "crm_lookup", "description": "Look up.", "input_schema": LOOKUP.input_schema}
        ],
    }
    assert turn.stop_reason == "tool_use" and turn.text == "Checking."
    assert [(c.id, c.name, c.input) for c in turn.tool_calls] == [
        ("toolu_2", "crm_lookup", {"id": "c-2"})
    ]
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (320, 41)


# --------------------------------------------------------------------------- OpenAI


def test_openai_request_and_tool_calls_answer(server):
    server.reply = json_reply(
        200,
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_9",
                                "type": "function",
                                "function": {"name": "crm_lookup", "arguments": '{"id":"c-9"}'},
                            }
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 150, "completion_tokens": 12, "total_tokens": 162},
        },
    )
    turn = openai(server).complete(request(temperature=0.0))
    (sent,) = server.requests
    assert sent.path == "/v1/chat/completions" and sent.headers["authorization"] == f"Bearer {KEY}"
    body = json.loads(sent.body)
    assert body["messages"] == [
        {"role": "system", "content": "You triage."},
        {"role": "user", "content": "Ticket from c-1"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "crm_lookup", "arguments": '{"id": "c-1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": '{"plan":"pro"}'},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "crm_lookup",
                "description": "Look up.",
                "parameters": LOOKUP.input_schema,
            },
        }
    ]
    assert body["max_completion_tokens"] == 256 and body["model"] == "m-1"
    assert "max_tokens" not in body and body["temperature"] == 0.0
    assert turn.stop_reason == "tool_use"
    assert [(c.id, c.input) for c in turn.tool_calls] == [("call_9", {"id": "c-9"})]
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (150, 12)


def test_openai_without_api_key_sends_no_authorization(server):
    server.reply = json_reply(
        200,
        {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}]},
    )
    provider, _ = provider_for("openai:local-llama", {"base_url": server.url})
    turn = provider.complete(request(tools=False))
    assert "authorization" not in server.requests[0].headers
    assert turn.text == "hi" and turn.stop_reason == "end_turn"


def test_openai_arguments_that_are_not_json_are_invalid(server):
    server.reply = json_reply(
        200,
        {
            "choices": [
                {
                    "finish_reason": "tool_calls",
                    "message": {
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "crm_lookup", "arguments": "{id: c-1"},
                            }
                        ]
                    },
                }
            ]
        },
    )
    with pytest.raises(ModelResponseInvalid, match="not JSON"):
        openai(server).complete(request())


# --------------------------------------------------------------------------- errors (both)


@pytest.mark.parametrize("make", [anthropic, openai], ids=["anthropic", "openai"])
def test_429_with_retry_after_is_transient(server, make):
    server.reply = json_reply(429, {"error": {"type": "rate_limit_error"}}, {"Retry-After": "7"})
    with pytest.raises(TransientError) as raised:
        make(server).complete(request())
    assert raised.value.details["retry_after"] == 7 and raised.value.details["status"] == 429
    assert KEY not in str(raised.value.to_dict())


@pytest.mark.parametrize("status", [500, 503, 529])
@pytest.mark.parametrize("make", [anthropic, openai], ids=["anthropic", "openai"])
def test_5xx_is_transient(server, make, status):
    server.reply = json_reply(status, {"error": {"type": "overloaded_error"}})
    with pytest.raises(TransientError) as raised:
        make(server).complete(request())
    assert raised.value.details["status"] == status


@pytest.mark.parametrize("make", [anthropic, openai], ids=["anthropic", "openai"])
def test_4xx_is_a_model_error(server, make):
    server.reply = json_reply(400, {"error": {"type": "invalid_request_error", "message": "bad"}})
    with pytest.raises(ModelError) as raised:
        make(server).complete(request())
    assert (
        raised.value.details["status"] == 400
        and "invalid_request_error" in raised.value.details["body"]
    )
    assert KEY not in str(raised.value.to_dict())


ANTHROPIC_400 = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "max_tokens: 99999 > 64000, which is the maximum allowed for this model",
    },
    "request_id": "req_011",
}
OPENAI_400 = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
}


@pytest.mark.parametrize(
    ("make", "answer", "reason"),
    [
        (anthropic, ANTHROPIC_400, "max_tokens: 99999 > 64000"),
        (openai, OPENAI_400, "Unsupported parameter: 'max_tokens'"),
    ],
    ids=["anthropic", "openai"],
)
def test_a_refusal_keeps_the_providers_status_and_reason(server, make, answer, reason):
    # Given a provider that refuses the request with its reason in the body
    server.reply = json_reply(400, answer)
    # When the model is called
    with pytest.raises(ModelError) as raised:
        make(server).complete(request())
    # Then the error names the status and the provider's reason, and keeps the body
    assert "400" in raised.value.message and reason in raised.value.message
    assert raised.value.details["status"] == 400
    assert json.loads(raised.value.details["body"]) == answer


def test_a_refusal_body_is_bounded_and_redacted(server):
    # Given a 400 whose body echoes the key and runs to 20 KB
    server.reply = json_reply(
        400, {"error": {"message": f"bad key {KEY}"}, "padding": "x" * 20_000}
    )
    with pytest.raises(ModelError) as raised:
        anthropic(server).complete(request())
    # Then the error keeps at most 4 KB of it, and never the key
    details = raised.value.details
    assert len(details["body"].encode()) <= 4096 and details["body"].endswith("…")
    assert KEY not in json.dumps(raised.value.to_dict())
    assert "[redacted]" in raised.value.message


@pytest.mark.parametrize("make", [anthropic, openai], ids=["anthropic", "openai"])
def test_malformed_json_is_a_named_error(server, make):
    server.reply = lambda _: (200, {"Content-Type": "application/json"}, b"{not json")
    with pytest.raises(ModelResponseInvalid, match="not JSON"):
        make(server).complete(request())


@pytest.mark.parametrize("make", [anthropic, openai], ids=["anthropic", "openai"])
def test_a_body_without_content_is_invalid(server, make):
    server.reply = json_reply(200, {"unexpected": True})
    with pytest.raises(ModelResponseInvalid):
        make(server).complete(request())


def test_provider_calls_go_through_the_ssrf_guard(monkeypatch):
    # Without 127.0.0.1 allowed, a base_url on the loopback is refused before any request
    from relayflow.settings import override_settings

    with override_settings(ssrf_allow=[]):
        provider, _ = provider_for("openai:m", {"base_url": "http://127.0.0.1:9/v1"})
        with pytest.raises(SsrfBlocked):
            provider.complete(request(tools=False))
