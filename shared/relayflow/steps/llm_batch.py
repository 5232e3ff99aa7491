"""The llm_batch step: one prompt, or one per item, submitted as a provider batch job; the
compiled state machine polls it (Wait → status Task → Choice), so no Lambda waits.

The same function serves both Tasks. The step's own state submits (once per step execution:
the submission is recorded, so a duplicate invocation does not start a second job); the
``<key>.poll`` state asks for the job's status. The output, once the job ended, is
``{state: "ended", results: [{index, custom_id, status, response | error, usage}], counts,
usage}``; while it runs, ``{state: "in_progress", batch, submitted_at, polls}``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from relayflow.document import StepTask
from relayflow.errors import BatchDeadline, BatchFailed, InvalidArgsError
from relayflow.expressions import render
from relayflow.expressions.templates import text_form
from relayflow.steps.effects import BatchJob, Effects
from relayflow.steps.task import parse_task, result

#: The state name suffix of the compiled poll Task.
POLL_SUFFIX = ".poll"


def now() -> float:
    """Seconds since the epoch (a seam for the deadline's tests)."""
    return time.time()


def requests_of(config: dict[str, Any], doc: dict[str, Any]) -> list[Any]:
    """The batch's requests: ``prompt`` once, or ``prompt_template`` per item of ``items``
    (each rendered with ``item`` and ``index``)."""
    from relayflow.ai.batch import BatchRequest

    system = config.get("system")
    system_text = text_form(render(system, doc)) if system else None
    common = {
        "system": system_text,
        "max_tokens": int(config.get("max_tokens") or 1024),
        "temperature": config.get("temperature"),
    }
    if config.get("prompt") is not None:
        return [BatchRequest("item-0", text_form(render(config["prompt"], doc)), **common)]
    items = render(config.get("items"), doc)
    if not isinstance(items, list):
        raise InvalidArgsError(f"llm_batch items must render to a list, got {type(items).__name__}")
    if not items:
        raise InvalidArgsError("llm_batch items rendered to an empty list")
    return [
        BatchRequest(
            f"item-{index}",
            text_form(render(config["prompt_template"], {**doc, "item": item, "index": index})),
            **common,
        )
        for index, item in enumerate(items)
    ]


def run(event: Any, context: Any, effects: Effects) -> dict[str, Any]:
    """Submit the batch (the step's state) or poll it (the ``.poll`` state), through
    ``effects``: a dry run submits nothing and records the would-be submission."""
    from relayflow.ai.providers import split_model

    task = parse_task(event)
    config = task.step.config
    provider_name, model_id = split_model(str(config.get("model") or ""))
    state = task.context.state or task.step.key
    polling = state.endswith(POLL_SUFFIX)
    job = BatchJob(
        provider_name,
        model_id,
        polling,
        requests=lambda: requests_of(config, task.doc),
        act=lambda: act(event, context, task, provider_name, model_id, polling=polling),
    )
    return effects.llm_batch_step(task, job)


def act(
    event: Any,
    context: Any,
    task: StepTask,
    provider_name: str,
    model_id: str,
    *,
    polling: bool,
) -> dict[str, Any]:
    """The real submission (recorded once per step execution) or poll."""
    from relayflow.ai.batch_providers import batch_provider_for

    config = task.step.config
    provider = batch_provider_for(
        provider_name, {k: config.get(k) for k in ("base_url", "api_key")}
    )
    if polling:
        previous = ((task.doc.get("steps") or {}).get(task.step.key) or {}).get("output") or {}
        return result(poll(provider, provider_name, model_id, config, previous), task=task)
    requests = requests_of(config, task.doc)
    if provider_name == "bedrock":
        from relayflow.ai.bedrock_batch import check_minimum

        fallback = check_minimum(model_id, len(requests), config.get("below_minimum") or "fail")
        if fallback:
            from relayflow.ai.bedrock_batch import run_one_by_one

            results = run_one_by_one(model_id, requests)
            return result(ended(provider_name, model_id, requests, results, batch=False), task=task)

    def submit() -> dict[str, Any]:
        handle = provider.submit(model_id, requests)
        return {
            "state": "in_progress",
            "batch": handle,
            "provider": provider_name,
            "ids": [r.custom_id for r in requests],
            "submitted_at": now(),
            "polls": 0,
        }

    from relayflow.steps.idempotency import run_recorded, step_identity

    identity = step_identity(event)
    if identity is None:
        return result(submit(), task=task)
    scoped = dataclasses.replace(identity, step_key=f"{identity.step_key}#submit")
    return result(
        run_recorded(scoped, lambda _e, _c: submit(), event, context, part=True), task=task
    )


def poll(
    provider: Any,
    provider_name: str,
    model_id: str,
    config: dict[str, Any],
    previous: dict[str, Any],
) -> dict[str, Any]:
    """Ask for the job's status; raise ``Relayflow.BatchDeadline`` past ``deadline_seconds``."""
    handle = previous.get("batch")
    if not isinstance(handle, dict):
        raise InvalidArgsError("the llm_batch poll found no submitted batch in the document")
    status = provider.status(handle)
    if status.state != "ended":
        waited = now() - float(previous.get("submitted_at") or now())
        deadline = int(config.get("deadline_seconds") or 86_400)
        if waited > deadline:
            raise BatchDeadline(
                f"batch {handle.get('id')} did not end within {deadline} s",
                batch_id=handle.get("id"),
            )
        return {**previous, "batch": status.handle, "polls": int(previous.get("polls") or 0) + 1}
    from relayflow.ai.batch import BatchRequest

    requests = [BatchRequest(i, "") for i in previous.get("ids") or []]
    return ended(
        provider_name, model_id, requests, status.results, batch=True, handle=status.handle
    )


def ended(
    provider_name: str,
    model_id: str,
    requests: list[Any],
    results: dict[str, dict[str, Any]],
    *,
    batch: bool,
    handle: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The step's output for a finished job: one entry per item, in item order."""
    from relayflow.ai.batch import usage_of
    from relayflow.ai.prices import estimate_cost

    items = []
    for index, request in enumerate(requests):
        found = results.get(request.custom_id) or {"status": "missing", "error": "no result"}
        items.append({"index": index, "custom_id": request.custom_id, **found})
    counts = {"succeeded": sum(1 for i in items if i["status"] == "succeeded")}
    counts["failed"] = len(items) - counts["succeeded"]
    if items and counts["succeeded"] == 0:
        raise BatchFailed(
            f"every item of the batch failed ({len(items)}; first: {items[0].get('error')})",
            batch_id=(handle or {}).get("id"),
        )
    usage = usage_of(results)
    return {
        "state": "ended",
        "batch_id": (handle or {}).get("id"),
        "results": items,
        "counts": counts,
        "usage": {
            "model": f"{provider_name}:{model_id}",
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "batch": batch,
            "estimated_cost_usd": estimate_cost(provider_name, model_id, usage, batch=batch),
        },
    }
