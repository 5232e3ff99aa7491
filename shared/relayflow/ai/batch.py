"""Batch model providers for ``llm_batch``: submit many prompts as one job, then poll it.

``submit(requests) -> handle`` starts the job; ``status(handle) -> BatchStatus`` tells whether
it is still running and, once it ended, the result of every item (by ``custom_id``). Handles
are plain JSON: they travel in the state document between the compiled poll states.

* ``scripted:<fixture>``: the fixture's ``batch`` section (tests, demo);
* ``anthropic:<model>``: Anthropic Message Batches (``/v1/messages/batches``);
* ``bedrock:<model>``: Bedrock batch inference (``CreateModelInvocationJob``; JSONL records in
  the payload bucket), Anthropic models on Bedrock. The job needs at least the account's
  minimum number of records (a Service Quotas value); below it the step refuses or, when
  configured, runs the items one by one through Converse.

* ``openai:<model>``: the OpenAI Batch API (a JSONL file of Chat Completions requests
  uploaded to ``/files``, ``/batches`` with a 24 h window, the output and error files).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from relayflow.ai.messages import ModelRequest, Usage, text_block
from relayflow.ai.providers.anthropic import AnthropicProvider
from relayflow.ai.providers.openai import OpenAIProvider
from relayflow.errors import BatchFailed, ModelResponseInvalid

BatchState = Literal["in_progress", "ended"]
BATCH_PROVIDERS: tuple[str, ...] = ("scripted", "anthropic", "openai", "bedrock")


@dataclass(frozen=True)
class BatchRequest:
    custom_id: str
    prompt: str
    system: str | None = None
    max_tokens: int = 1024
    temperature: float | None = None

    def model_request(self, model_id: str) -> ModelRequest:
        """The item as one model call: a single user turn."""
        return ModelRequest(
            model_id=model_id,
            messages=[{"role": "user", "content": [text_block(self.prompt)]}],
            system=self.system,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
        )


@dataclass
class BatchStatus:
    state: BatchState
    handle: dict[str, Any]
    #: custom_id → ``{"status": "succeeded", "response", "usage"}`` or
    #: ``{"status": "errored" | "expired" | "canceled", "error"}``; set once ended.
    results: dict[str, dict[str, Any]] = field(default_factory=dict)


class BatchProvider(Protocol):
    name: str

    def submit(self, model_id: str, requests: list[BatchRequest]) -> dict[str, Any]: ...

    def status(self, handle: dict[str, Any]) -> BatchStatus: ...


def item_bodies(provider: str, model_id: str, requests: list[BatchRequest]) -> list[Any]:
    """Each item's request body as the provider's batch job would carry it (Message Batches
    ``params``, a Chat Completions body, a Bedrock record's ``modelInput``, a scripted
    prompt), built by the same code as a submission and held to the same capability rules,
    without reading a key or sending anything: what a dry run records."""
    if provider == "anthropic":
        from relayflow.ai.providers.anthropic import AnthropicProvider

        return [AnthropicProvider().body(r.model_request(model_id)) for r in requests]
    if provider == "openai":
        from relayflow.ai.providers.openai import OpenAIProvider

        return [OpenAIProvider().body(r.model_request(model_id)) for r in requests]
    if provider == "bedrock":
        from relayflow.ai.bedrock_formats import record_format
        from relayflow.ai.capabilities import checked_temperature

        fmt = record_format(model_id)
        return [
            fmt.build(
                r.prompt,
                r.system,
                r.max_tokens,
                checked_temperature(provider, model_id, r.temperature),
            )
            for r in requests
        ]
    return [{"prompt": r.prompt, "system": r.system} for r in requests]


def jsonl_rows(text: str, problem: str) -> Iterator[Any]:
    """The JSON value of each non-blank line of ``text``; a line that is not JSON is
    ``Relayflow.ModelResponseInvalid`` with ``problem`` as its message."""
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except ValueError:
            raise ModelResponseInvalid(problem) from None


def usage_of(results: dict[str, dict[str, Any]]) -> Usage:
    total = Usage()
    for item in results.values():
        usage = item.get("usage") or {}
        total = total + Usage(
            int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
        )
    return total


# --------------------------------------------------------------------------- scripted


class ScriptedBatch:
    """Replays a fixture's ``batch`` section: ``{"polls": 2, "status": "ended" | "failed",
    "results": [{"text": "…", "usage": {…}} | {"error": "…"}, …]}`` (one entry per item, in
    order; missing entries repeat the last one). The job ends after ``polls`` status calls."""

    name = "scripted"

    def __init__(self) -> None:
        self.fixture: str | None = None

    def submit(self, model_id: str, requests: list[BatchRequest]) -> dict[str, Any]:
        ids = [r.custom_id for r in requests]
        digest = hashlib.sha256(json.dumps([model_id, ids]).encode()).hexdigest()[:16]
        return {"id": f"scripted-{digest}", "fixture": model_id, "ids": ids, "polls": 0}

    def status(self, handle: dict[str, Any]) -> BatchStatus:
        from relayflow.ai.providers.scripted import fixture_path

        spec = json.loads(fixture_path(handle["fixture"]).read_text()).get("batch") or {}
        polls = int(handle.get("polls", 0)) + 1
        handle = {**handle, "polls": polls}
        if polls < int(spec.get("polls", 1)):
            return BatchStatus("in_progress", handle)
        if spec.get("status") == "failed":
            raise BatchFailed(f"scripted batch {handle['id']} failed", batch_id=handle["id"])
        entries = spec.get("results") or [{"text": ""}]
        results: dict[str, dict[str, Any]] = {}
        for index, custom_id in enumerate(handle["ids"]):
            entry = entries[min(index, len(entries) - 1)]
            if "error" in entry:
                results[custom_id] = {"status": "errored", "error": entry["error"]}
            else:
                results[custom_id] = {
                    "status": "succeeded",
                    "response": entry.get("text", ""),
                    "usage": entry.get("usage") or {},
                }
        return BatchStatus("ended", handle, results)


# --------------------------------------------------------------------------- Anthropic


class AnthropicBatch(AnthropicProvider):
    """Anthropic Message Batches: ``POST /v1/messages/batches``, ``GET …/{id}``, and the
    JSONL at ``results_url`` once ``processing_status`` is ``ended``. Its connection, headers
    and item bodies are the Messages provider's."""

    name = "anthropic"

    def submit(self, model_id: str, requests: list[BatchRequest]) -> dict[str, Any]:
        from relayflow.ai.providers.http_common import post_json

        # Each item's params are the agent's Messages body (one user turn): the same
        # builder, so the same SDK conformance and capability rules.
        build = self.body
        body = {
            "requests": [
                {"custom_id": r.custom_id, "params": build(r.model_request(model_id))}
                for r in requests
            ]
        }
        answer = post_json(self.name, f"{self.base_url}/v1/messages/batches", self.headers(), body)
        if not isinstance(answer.get("id"), str):
            raise ModelResponseInvalid("anthropic answered a batch without an id")
        return {"id": answer["id"]}

    def status(self, handle: dict[str, Any]) -> BatchStatus:
        from relayflow.ai.providers.anthropic import parse_response
        from relayflow.ai.providers.http_common import get_json, get_text

        headers = self.headers()
        batch = get_json(self.name, f"{self.base_url}/v1/messages/batches/{handle['id']}", headers)
        if batch.get("processing_status") != "ended":
            return BatchStatus("in_progress", handle)
        url = batch.get("results_url")
        if not isinstance(url, str):
            raise ModelResponseInvalid("anthropic ended a batch without a results_url")
        results: dict[str, dict[str, Any]] = {}
        text = get_text(self.name, url, headers)
        for row in jsonl_rows(text, "anthropic batch results hold a line that is not JSON"):
            outcome = row.get("result") or {}
            kind = outcome.get("type")
            if kind == "succeeded":
                turn = parse_response(outcome.get("message") or {})
                results[str(row.get("custom_id"))] = {
                    "status": "succeeded",
                    "response": turn.text,
                    "usage": {
                        "input_tokens": turn.usage.input_tokens,
                        "output_tokens": turn.usage.output_tokens,
                    },
                }
            else:
                error = (outcome.get("error") or {}).get("error") or outcome.get("error") or kind
                results[str(row.get("custom_id"))] = {
                    "status": str(kind or "errored"),
                    "error": error,
                }
        return BatchStatus("ended", handle, results)


# --------------------------------------------------------------------------- OpenAI


class OpenAIBatch(OpenAIProvider):
    """The OpenAI Batch API: upload the requests as a JSONL file (``purpose=batch``), create a
    batch on ``/v1/chat/completions`` with a 24 h window, poll it, then read its output file
    (and its error file for requests that failed)."""

    name = "openai"
    _RUNNING = frozenset({"validating", "in_progress", "finalizing"})

    def submit(self, model_id: str, requests: list[BatchRequest]) -> dict[str, Any]:
        from relayflow.ai.providers.http_common import post_json, post_multipart

        build = self.body
        lines = [
            json.dumps(
                {
                    "custom_id": r.custom_id,
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": build(r.model_request(model_id)),
                }
            )
            for r in requests
        ]
        headers = self.headers()
        uploaded = post_multipart(
            self.name,
            f"{self.base_url}/files",
            headers,
            {"purpose": "batch"},
            ("file", "relayflow-batch.jsonl", "\n".join(lines).encode()),
        )
        if not isinstance(uploaded.get("id"), str):
            raise ModelResponseInvalid("openai answered the upload without a file id")
        batch = post_json(
            self.name,
            f"{self.base_url}/batches",
            headers,
            {
                "input_file_id": uploaded["id"],
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
            },
        )
        if not isinstance(batch.get("id"), str):
            raise ModelResponseInvalid("openai answered a batch without an id")
        return {
            "id": batch["id"],
            "input_file_id": uploaded["id"],
            "ids": [r.custom_id for r in requests],
        }

    def status(self, handle: dict[str, Any]) -> BatchStatus:
        from relayflow.ai.providers.http_common import get_json, get_text
        from relayflow.ai.providers.openai import parse_response

        headers = self.headers()
        batch = get_json(self.name, f"{self.base_url}/batches/{handle['id']}", headers)
        state = batch.get("status")
        if state in self._RUNNING:
            return BatchStatus("in_progress", handle)
        if state not in ("completed", "expired"):
            raise BatchFailed(
                f"openai batch {handle['id']} ended {state}", batch_id=handle["id"], status=state
            )
        results: dict[str, dict[str, Any]] = {}
        for field_name in ("output_file_id", "error_file_id"):
            file_id = batch.get(field_name)
            if not isinstance(file_id, str):
                continue
            text = get_text(self.name, f"{self.base_url}/files/{file_id}/content", headers)
            for row in jsonl_rows(text, "openai batch output holds a line that is not JSON"):
                response = row.get("response") or {}
                custom_id = str(row.get("custom_id"))
                if row.get("error") or response.get("status_code") != 200:
                    results[custom_id] = {
                        "status": "errored",
                        "error": row.get("error")
                        or (response.get("body") or {}).get("error")
                        or response,
                    }
                    continue
                turn = parse_response(response.get("body") or {})
                results[custom_id] = {
                    "status": "succeeded",
                    "response": turn.text,
                    "usage": {
                        "input_tokens": turn.usage.input_tokens,
                        "output_tokens": turn.usage.output_tokens,
                    },
                }
        if state == "expired":
            for custom_id in handle.get("ids") or []:
                results.setdefault(custom_id, {"status": "expired", "error": "the batch expired"})
        return BatchStatus("ended", handle, results)
