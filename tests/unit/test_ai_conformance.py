"""Every request the AI providers build, held to the providers' own request models.

Relayflow builds its provider requests by hand (docs/ai-steps.md says why); this test is what
keeps them exact. The requests come from real agent loops (tool calls, tool results, a refused
call, corrective turns after an empty answer, a text answer and a wrong final answer) and from
the batch providers' submissions, and each is checked against:

* the official ``anthropic`` SDK's ``MessageCreateParamsNonStreaming`` and Message Batches
  ``Request`` (also for the Anthropic records of Bedrock batch jobs, which carry the same body);
* the official ``openai`` SDK's ``CompletionCreateParamsNonStreaming`` (deprecated fields
  refused) and ``BatchCreateParams``;
* botocore's ``bedrock-runtime`` service model (``Converse``; Amazon Nova batch records,
  whose body mirrors it);

plus the conversation rules the APIs enforce beyond their types (no empty turn, no blank
text, roles that alternate, a result for every tool call). A sampling parameter the model
does not take is never sent: the provider refuses to build the request, and validation
refuses the definition first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

# The official SDKs are dev dependencies (pyproject's dev extra): without them this check
# must not pass quietly, so they are imported, not skipped.
import anthropic.types as anthropic_types
import openai.types as openai_types
import pytest
from sdk_conformance import bedrock_runtime_model, shape_problems, typed_problems

from relayflow.ai.batch import AnthropicBatch, BatchRequest, OpenAIBatch
from relayflow.ai.capabilities import temperature_problem
from relayflow.ai.messages import ModelRequest, ModelTurn, Usage, text_block, tool_call_block
from relayflow.ai.providers.anthropic import AnthropicProvider
from relayflow.ai.providers.bedrock import BedrockProvider
from relayflow.ai.providers.openai import OpenAIProvider
from relayflow.errors import InvalidArgsError
from relayflow.steps.agent import AgentLoop
from relayflow.steps.boundary import REAL
from relayflow.validation import validate_data

MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "openai": "gpt-4.1-mini",
    "bedrock": "amazon.nova-lite-v1:0",
}


# --------------------------------------------------------------------------- the agent loops


class Recorder:
    """A provider that answers with scripted turns and keeps every request it was sent."""

    def __init__(self, name: str, turns: list[list[dict[str, Any]]]) -> None:
        self.name = name
        self.turns = turns
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelTurn:
        self.requests.append(request)
        content = self.turns[len(self.requests) - 1]
        calls = any(b["type"] == "tool_call" for b in content)
        return ModelTurn(content, "tool_use" if calls else "end_turn", Usage(10, 5))


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return tool_call_block(call_id, name, arguments, "test")


FINAL_OK = {"response": "Refund one charge.", "outcome": "refund"}
#: name → (agent config changes, the model's turns)
CONVERSATIONS: dict[str, tuple[dict[str, Any], list[list[dict[str, Any]]]]] = {
    "tools, a refused call, an empty answer": (
        {},
        [
            [
                text_block("Looking the customer up."),
                call("toolu_1", "aws_dynamodb_get_item", {"table": "t", "key": {"pk": "c"}}),
                call("toolu_2", "aws_sqs_send_message", {"queue_url": "q", "body": "x"}),
            ],
            [],
            [call("toolu_3", "final_answer", FINAL_OK)],
        ],
    ),
    "an empty first answer": ({}, [[], [call("toolu_1", "final_answer", FINAL_OK)]]),
    "a text answer": (
        {},
        [[text_block("Refund, I think.")], [call("toolu_1", "final_answer", FINAL_OK)]],
    ),
    "a wrong final answer with another call": (
        {},
        [
            [
                call("toolu_1", "final_answer", {"response": "x", "outcome": "maybe"}),
                call("toolu_2", "aws_dynamodb_get_item", {"table": "t", "key": {"pk": "c"}}),
            ],
            [call("toolu_3", "final_answer", FINAL_OK)],
        ],
    ),
    "a plain-text agent without tools or system": (
        {"tools": None, "blocked_tools": None, "outcomes": None, "system": None},
        [[text_block("Done.")]],
    ),
}


def agent_config(provider: str, changes: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {
        "model": f"{provider}:{MODELS[provider]}",
        "system": "You triage tickets.",
        "prompt": "Ticket 7: charged twice",
        "tools": ["aws.dynamodb.get_item", "aws.sqs.send_message"],
        "blocked_tools": ["aws.sqs.send_message"],
        "outcomes": {"refund": "refund", "escalate": "inherit"},
        "max_tokens": 512,
        "breaker": None,
    }
    config.update(changes)
    return {k: v for k, v in config.items() if v is not None}


def conversation_requests(
    provider: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> list[ModelRequest]:
    """The model requests one agent loop sends, with a temperature the provider accepts
    where it accepts one."""
    changes, turns = CONVERSATIONS[name]
    config = agent_config(provider, changes)
    if temperature_problem(provider, MODELS[provider], 0.7) is None:
        config["temperature"] = 0.7
    loop = AgentLoop(
        config=config, doc={}, identity=None, record=lambda _i, thunk: thunk(), effects=REAL
    )
    recorder = Recorder(provider, turns)
    loop.provider = recorder
    monkeypatch.setattr(
        AgentLoop, "execute", lambda self, tool, c: {"ok": True, "output": {"item": {"pk": "c"}}}
    )
    loop.start()
    assert len(recorder.requests) == len(turns)
    return recorder.requests


# --------------------------------------------------------------------------- the wire rules


def anthropic_wire_problems(body: dict[str, Any]) -> list[str]:
    """Anthropic's rules beyond the types: every turn has content, no text block is blank,
    the conversation starts with the user, and every tool_use is answered by a tool_result
    in the next user turn."""
    problems: list[str] = []
    messages = body.get("messages") or []
    if messages and messages[0]["role"] != "user":
        problems.append("messages[0]: the conversation must start with a user turn")
    for index, message in enumerate(messages):
        content = message["content"]
        if not content:
            problems.append(f"messages[{index}]: an empty {message['role']} turn")
            continue
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            if block["type"] == "text" and not block["text"].strip():
                problems.append(f"messages[{index}]: a blank text block")
        uses = {b["id"] for b in blocks if b["type"] == "tool_use"}
        if uses:
            following = messages[index + 1]["content"] if index + 1 < len(messages) else []
            answered = {b.get("tool_use_id") for b in following if isinstance(b, dict)}
            if index + 1 < len(messages) and uses - answered:
                problems.append(f"messages[{index}]: tool_use {sorted(uses - answered)} unanswered")
    return problems


def bedrock_wire_problems(params: dict[str, Any]) -> list[str]:
    """Converse's rules beyond its service model: content in every turn, no blank text,
    roles that alternate starting with the user, every toolUse answered."""
    problems: list[str] = []
    messages = params.get("messages") or []
    for index, message in enumerate(messages):
        expected = "user" if index % 2 == 0 else "assistant"
        if message["role"] != expected:
            problems.append(f"messages[{index}]: roles must alternate ({expected} expected)")
        if not message["content"]:
            problems.append(f"messages[{index}]: an empty {message['role']} turn")
        for block in message["content"]:
            if "text" in block and not block["text"].strip():
                problems.append(f"messages[{index}]: a blank text block")
        uses = {b["toolUse"]["toolUseId"] for b in message["content"] if "toolUse" in b}
        if uses and index + 1 < len(messages):
            answered = {
                b["toolResult"]["toolUseId"]
                for b in messages[index + 1]["content"]
                if "toolResult" in b
            }
            if uses - answered:
                problems.append(f"messages[{index}]: toolUse {sorted(uses - answered)} unanswered")
    return problems


def openai_wire_problems(body: dict[str, Any]) -> list[str]:
    """Chat Completions' rules beyond the types: an assistant message has content or tool
    calls, and each tool call is answered by a tool message before the next turn."""
    problems: list[str] = []
    messages = body.get("messages") or []
    for index, message in enumerate(messages):
        if message["role"] == "assistant":
            if not message.get("content") and not message.get("tool_calls"):
                problems.append(f"messages[{index}]: an assistant message with nothing in it")
            calls = {c["id"] for c in message.get("tool_calls") or []}
            answered = set()
            for later in messages[index + 1 :]:
                if later["role"] != "tool":
                    break
                answered.add(later["tool_call_id"])
            if calls - answered:
                problems.append(
                    f"messages[{index}]: tool calls {sorted(calls - answered)} unanswered"
                )
        elif message["role"] in ("user", "system") and not message.get("content"):
            problems.append(f"messages[{index}]: an empty {message['role']} message")
    return problems


def anthropic_problems(body: dict[str, Any]) -> list[str]:
    params = anthropic_types.message_create_params.MessageCreateParamsNonStreaming
    return typed_problems(body, params) + anthropic_wire_problems(body)


def openai_problems(body: dict[str, Any]) -> list[str]:
    params = openai_types.chat.completion_create_params.CompletionCreateParamsNonStreaming
    return typed_problems(body, params) + openai_wire_problems(body)


def converse_problems(params: dict[str, Any]) -> list[str]:
    shape = bedrock_runtime_model().operation_model("Converse").input_shape
    return shape_problems(params, shape) + bedrock_wire_problems(params)


BUILDERS: dict[str, tuple[Callable[[ModelRequest], dict[str, Any]], Callable[..., list[str]]]] = {
    "anthropic": (lambda r: AnthropicProvider().body(r), anthropic_problems),
    "openai": (lambda r: OpenAIProvider().body(r), openai_problems),
    "bedrock": (lambda r: BedrockProvider(client=object()).params(r), converse_problems),
}


# --------------------------------------------------------------------------- agent requests


@pytest.mark.parametrize("conversation", list(CONVERSATIONS))
@pytest.mark.parametrize("provider", list(BUILDERS))
def test_every_agent_request_matches_the_providers_request_model(
    provider: str, conversation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the requests one agent loop sends (tool results, refusals, corrective turns)
    build, problems_of = BUILDERS[provider]
    for turn, request in enumerate(conversation_requests(provider, conversation, monkeypatch)):
        # When the provider puts each on the wire
        wire = build(request)
        # Then the provider's own request model and rules accept it
        assert problems_of(wire) == [], f"turn {turn + 1}: {json.dumps(wire)[:1500]}"


@pytest.mark.parametrize("provider", list(BUILDERS))
def test_the_corrective_turn_after_an_empty_answer_is_one_user_message_naming_the_problem(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a model whose first answer is empty
    requests = conversation_requests(provider, "an empty first answer", monkeypatch)
    # When the corrective turn goes out
    wire = BUILDERS[provider][0](requests[1])
    # Then no assistant turn is sent, and the user turn says what was wrong
    messages = [m for m in wire["messages"] if m["role"] != "system"]
    assert [m["role"] for m in messages] == ["user"]
    text = json.dumps(messages[0]["content"])
    assert "Ticket 7" in text and "empty" in text and "final_answer" in text


@pytest.mark.parametrize(
    ("provider", "model", "temperature"),
    [
        ("anthropic", "claude-sonnet-4-5", 0.5),
        ("bedrock", "anthropic.claude-3-5-haiku-20241022-v1:0", 0.5),
        ("bedrock", "amazon.nova-lite-v1:0", 1.5),
        ("openai", "o3-mini", 0.2),
    ],
)
def test_a_temperature_the_model_does_not_take_is_refused_by_validation_and_never_sent(
    provider: str, model: str, temperature: float
) -> None:
    # Given an agent whose temperature its model does not accept
    definition = {
        "id": "t",
        "start": "a",
        "steps": {
            "a": {
                "type": "agent",
                "model": f"{provider}:{model}",
                "prompt": "hi",
                "temperature": temperature,
                **({"api_key": {"name": "k"}} if provider == "anthropic" else {}),
            }
        },
    }
    # When the definition is validated
    _, problems = validate_data(definition)
    # Then it is refused with the path and the rule
    assert [(p.path, p.rule) for p in problems] == [("steps.a.temperature", "model-capability")]
    # And a request that reached the provider anyway is refused before it is sent
    request = ModelRequest(model, [{"role": "user", "content": [text_block("hi")]}])
    with pytest.raises(InvalidArgsError, match="temperature"):
        BUILDERS[provider][0](ModelRequest(model, request.messages, temperature=temperature))


def test_an_llm_batch_temperature_is_held_to_the_same_table() -> None:
    step = {"type": "llm_batch", "prompt": "hi", "temperature": 0.5}
    for model, refused in [
        ("bedrock:anthropic.claude-3-5-haiku-20241022-v1:0", True),
        ("bedrock:amazon.nova-lite-v1:0", False),
        ("openai:gpt-4.1-mini", False),
    ]:
        definition = {"id": "t", "start": "a", "steps": {"a": {**step, "model": model}}}
        _, problems = validate_data(definition)
        assert [p.rule for p in problems] == (["model-capability"] if refused else []), model


def test_the_sdks_say_what_the_capability_table_says() -> None:
    # The installed SDKs are the truth the table is written from.
    anthropic_fields = anthropic_types.message_create_params.MessageCreateParamsBase.__annotations__
    assert "temperature" not in anthropic_fields and "max_tokens" in anthropic_fields
    from sdk_conformance import deprecated_fields

    openai_params = openai_types.chat.completion_create_params.CompletionCreateParamsNonStreaming
    assert "max_tokens" in deprecated_fields(openai_params)
    assert "max_completion_tokens" not in deprecated_fields(openai_params)
    converse = bedrock_runtime_model().operation_model("Converse").input_shape
    limits = converse.members["inferenceConfig"].members["temperature"].metadata
    assert (limits["min"], limits["max"]) == (0, 1)


# --------------------------------------------------------------------------- batch requests

BATCH = [
    BatchRequest("item-0", "Summarise: great", system="Be brief.", max_tokens=50),
    BatchRequest("item-1", "Summarise: awful", max_tokens=50),
]


def test_anthropic_message_batch_requests_match_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr("relayflow.ai.providers.http_common.api_key", lambda ref, p: "k")

    def post_json(provider: str, url: str, headers: dict[str, str], body: dict[str, Any]):
        sent.append(body)
        return {"id": "msgbatch_1"}

    monkeypatch.setattr("relayflow.ai.providers.http_common.post_json", post_json)
    AnthropicBatch(None, {"name": "k"}).submit("claude-haiku-4-5", BATCH)
    params = anthropic_types.messages.batch_create_params.BatchCreateParams
    assert typed_problems(sent[0], params) == []
    for request in sent[0]["requests"]:
        assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", request["custom_id"])
        assert anthropic_wire_problems(request["params"]) == []
    # A temperature (which the API does not take) is refused before anything is sent
    with pytest.raises(InvalidArgsError, match="temperature"):
        AnthropicBatch(None, {"name": "k"}).submit(
            "claude-haiku-4-5", [BatchRequest("item-0", "x", temperature=0.5)]
        )
    assert len(sent) == 1


def test_openai_batch_lines_and_batch_match_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: dict[str, Any] = {}

    def post_multipart(provider, url, headers, fields, file):
        sent["file"] = file[2].decode()
        return {"id": "file-1"}

    def post_json(provider, url, headers, body):
        sent["batch"] = body
        return {"id": "batch_1"}

    monkeypatch.setattr("relayflow.ai.providers.http_common.post_multipart", post_multipart)
    monkeypatch.setattr("relayflow.ai.providers.http_common.post_json", post_json)
    OpenAIBatch(None, None).submit(
        "gpt-4.1-mini", [*BATCH[:1], BatchRequest("item-1", "x", temperature=0.3)]
    )
    batch_params = openai_types.batch_create_params.BatchCreateParams
    assert typed_problems(sent["batch"], batch_params) == []
    lines = [json.loads(line) for line in sent["file"].splitlines()]
    assert len(lines) == 2
    for line in lines:
        assert set(line) == {"custom_id", "method", "url", "body"}
        assert (line["method"], line["url"]) == ("POST", "/v1/chat/completions")
        assert openai_problems(line["body"]) == []


class _Recorded:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def put_object(self, **kwargs: Any) -> None:
        self.bodies.append(kwargs["Body"])

    def create_model_invocation_job(self, **kwargs: Any) -> dict[str, str]:
        return {"jobArn": "arn:aws:bedrock:us-east-1:1:model-invocation-job/j"}


def bedrock_records(model_id: str, requests: list[BatchRequest]) -> list[dict[str, Any]]:
    from relayflow.ai.bedrock_batch import BedrockBatch
    from relayflow.settings import override_settings

    recorded = _Recorded()
    with override_settings(bedrock_batch_role_arn="arn:aws:iam::1:role/b", payload_bucket="b"):
        BedrockBatch(bedrock=recorded, s3=recorded).submit(model_id, requests)
    return [json.loads(line) for line in recorded.bodies[0].decode().splitlines()]


MANY = [BatchRequest(f"item-{i}", f"Summarise review {i}", max_tokens=64) for i in range(120)]


@pytest.mark.parametrize(
    "model_id",
    [
        "anthropic.claude-3-5-haiku-20241022-v1:0",
        "us.amazon.nova-lite-v1:0",
        "meta.llama3-1-70b-instruct-v1:0",
        "mistral.mistral-small-2402-v1:0",
        "mistral.mistral-large-2407-v1:0",
    ],
)
def test_bedrock_batch_records_have_unique_alphanumeric_ids_and_the_familys_body(
    model_id: str,
) -> None:
    # Given a batch of 120 items
    records = bedrock_records(model_id, MANY)
    # Then each record id is alphanumeric (AWS: an 11-character alphanumeric string), and
    # unique in the job
    ids = [r["recordId"] for r in records]
    assert all(re.fullmatch(r"[A-Za-z0-9]{11}", i) for i in ids), ids[:3]
    assert len(set(ids)) == len(ids) == 120
    # And each modelInput is the family's InvokeModel body
    for record in records:
        assert set(record) == {"recordId", "modelInput"}
        assert family_body_problems(model_id, record["modelInput"]) == []


def family_body_problems(model_id: str, body: dict[str, Any]) -> list[str]:
    if "anthropic." in model_id:
        # Anthropic on Bedrock: the Messages body without model, plus anthropic_version.
        rest = dict(body)
        if rest.pop("anthropic_version", None) != "bedrock-2023-05-31":
            return ["anthropic_version must be bedrock-2023-05-31"]
        return anthropic_problems({**rest, "model": model_id})
    if "amazon.nova" in model_id:
        shapes = bedrock_runtime_model().operation_model("Converse").input_shape.members
        rest = dict(body)
        if rest.pop("schemaVersion", None) != "messages-v1":
            return ["schemaVersion must be messages-v1"]
        problems = [f"no field {k!r}" for k in rest if k not in shapes]
        return problems + [
            p for k, v in rest.items() if k in shapes for p in shape_problems(v, shapes[k], k)
        ]
    allowed = {
        "meta.": {"prompt", "max_gen_len", "temperature", "top_p"},
        "mistral.mistral-large-2407": {"messages", "max_tokens", "temperature", "top_p"},
        "mistral.": {"prompt", "max_tokens", "temperature", "top_p", "top_k", "stop"},
    }
    keys = next(v for k, v in allowed.items() if k in model_id)
    return [f"no field {k!r}" for k in body if k not in keys]


def test_bedrock_batch_records_of_anthropic_models_carry_no_temperature() -> None:
    with pytest.raises(InvalidArgsError, match="temperature"):
        bedrock_records(
            "anthropic.claude-3-5-haiku-20241022-v1:0",
            [BatchRequest("item-0", "x", max_tokens=5, temperature=0.5)],
        )
    nova = bedrock_records(
        "amazon.nova-lite-v1:0", [BatchRequest("item-0", "x", max_tokens=5, temperature=0.5)]
    )
    assert nova[0]["modelInput"]["inferenceConfig"]["temperature"] == 0.5
