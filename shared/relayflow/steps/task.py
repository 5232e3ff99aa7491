"""Parse a step Task payload and shape a step's result."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from relayflow.document import StepResult, StepTask
from relayflow.errors import InvalidArgsError
from relayflow.payloads import contains_ref, json_size, offload_if_large, resolve_refs


def parse_task(event: Any) -> StepTask:
    """The Task payload as a model, with offloaded outputs in its document read back from S3
    and its caught error (``error``) in its public form
    (:func:`relayflow.causes.public_error`). A malformed payload is
    ``Relayflow.InvalidArgs``."""
    try:
        task = StepTask.model_validate(event)
    except ValidationError as exc:
        raise InvalidArgsError(f"malformed step payload: {exc.errors(include_url=False)}") from exc
    task._doc_bytes = json_size(task.doc)
    if contains_ref(task.doc):
        task.doc = resolve_refs(task.doc)
    if isinstance(task.doc.get("error"), dict):
        # Templates read a caught error as a workflow may see it: name, message, details;
        # never the stack trace Lambda put in its cause.
        from relayflow.causes import public_error

        task.doc["error"] = public_error(task.doc["error"])
    return task


def run_place(task: StepTask) -> dict[str, str]:
    """Where a waiting step stands: the run's tenant, workflow and run id, the step and its
    execution (the fields an approval, waitpoint, gate or park item starts with)."""
    run_info = task.doc.get("run") or {}
    return {
        "tenant": str(run_info.get("tenant") or "local"),
        "workflow_id": str(run_info.get("workflow_id") or ""),
        "run_id": str(run_info.get("id") or ""),
        "step": task.step.key,
        "execution_id": task.context.execution_id,
    }


def result(
    output: Any, branch: str | None = None, *, task: StepTask | None = None
) -> dict[str, Any]:
    """A step Lambda's return value (:class:`StepResult`).

    Given the ``task``, an output too large for the state document is offloaded to S3 and
    replaced by a reference (:mod:`relayflow.payloads`)."""
    if task is not None:
        output = offload_if_large(output, task=task)
    shaped = StepResult(output=output, branch=branch)
    # ``branch`` is always present (null when none): a routing Choice reads it, and a Choice
    # on a missing path fails the run.
    return {"output": shaped.output, "branch": shaped.branch}
