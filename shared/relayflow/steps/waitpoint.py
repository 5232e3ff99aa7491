"""The waitpoint step: pause the run until another system completes or fails it.

A ``lambda:invoke.waitForTaskToken`` Task, like the approval step. The waitpoint gets its own
id; the task token stays in the table, and callers resume the run through
``POST /waitpoints/{id}/complete`` or ``/fail`` (the control plane's wait service).

Without an idempotency key the waitpoint's id is derived from the step execution (run id,
step, item, loop pass), so a run restarted from the DLQ finds the waitpoint its earlier
execution made: a completed one resumes it at once with the recorded data; a pending, expired
or failed one waits again, for this execution.

Idempotency key: the rendered ``idempotency_key`` names the waitpoint within the tenant (its
id is derived from tenant and key), so a second waitpoint created with the same key reuses the
first one's id:

* still pending (or expired): it now waits for *this* execution (the token is replaced, so a
  completion resumes the newest run; an earlier run that still waits runs into its timeout);
* already completed or failed: that outcome stands, and this execution resumes with it at
  once (completing a waitpoint is a fact about the outside world, not about one run).
"""

from __future__ import annotations

from typing import Any

from relayflow.errors import InvalidArgsError, TransientError
from relayflow.expressions import render
from relayflow.expressions.templates import text_form
from relayflow.steps.approval import task_token, wait_fields
from relayflow.steps.task import parse_task, result, run_place
from relayflow.steps.wait_outcomes import (
    WAITPOINT_FAILED,
    completion_output,
    failure_cause,
    waitpoint_id,
)

MAX_KEY_LENGTH = 512


def run(event: Any) -> dict[str, Any]:
    """Create (or, for a known idempotency key, re-arm) the waitpoint; the output (ignored
    by the waiting Task) names it. A ``step_gate`` payload is a step-through run's gate
    (:mod:`relayflow.steps.step_gate`), which this function serves too."""
    from relayflow.dal.errors import DataAccessError
    from relayflow.dal.waits import WaitDal, WaitpointItem

    step = event.get("step") if isinstance(event, dict) else None
    if isinstance(step, dict) and step.get("type") == "step_gate":
        from relayflow.steps import step_gate

        return step_gate.run(event)
    if isinstance(step, dict) and step.get("type") == "park":
        # A run parked at a failed step (on_error: park) waits in this function's Task too.
        from relayflow.steps import park

        return park.run(event)

    task = parse_task(event)
    if task.step.type == "wait_for_event":
        # wait_for_event steps run in this function too (docs/flow-control.md).
        from relayflow.steps import event_wait

        return event_wait.run(event)
    token = task_token(event)
    config = task.step.config
    place = run_place(task)
    tenant = place["tenant"]
    key: str | None = None
    if config.get("idempotency_key") is not None:
        key = text_form(render(config["idempotency_key"], task.doc))
        if not key or len(key) > MAX_KEY_LENGTH:
            raise InvalidArgsError(
                f"the idempotency key of step {task.step.key!r} renders to an empty or "
                f"over-long ({MAX_KEY_LENGTH}+) text",
                step=task.step.key,
            )
    item = WaitpointItem(
        waitpoint_id=waitpoint_id(tenant, key, event),
        **place,
        label=config.get("label") or task.step.key,
        idempotency_key=key,
        **wait_fields(token, config.get("timeout_seconds")),
    )
    dal = WaitDal()
    try:
        if not dal.put_waitpoint(item):
            # Without a key the id is this step execution's: a restarted run waits again
            # after a failure (which is what it is retried for); a completion stands.
            rearmed = dal.rearm_waitpoint(item, after_failure=key is None)
            if rearmed is None:
                existing = dal.get_waitpoint(tenant, item.waitpoint_id)
                if existing is not None:
                    _resume_with(existing, token)
                    return result({"waitpoint_id": existing.waitpoint_id, "reused": True})
                raise TransientError("the waitpoint changed while it was re-armed; retry")
    except DataAccessError as exc:
        raise TransientError(f"could not store the waitpoint of step {task.step.key!r}") from exc
    return result({"waitpoint_id": item.waitpoint_id, "expires_at": item.deadline})


def _resume_with(existing: Any, token: str) -> None:
    """Resume this execution with the outcome an earlier completion already recorded."""
    from botocore.exceptions import ClientError

    from relayflow.adapters.aws import client

    sfn = client("stepfunctions")
    try:
        if existing.status == "completed":
            sfn.send_task_success(taskToken=token, output=completion_output(existing.result))
        else:
            error = existing.error or {}
            sfn.send_task_failure(
                taskToken=token,
                error=WAITPOINT_FAILED,
                cause=failure_cause(error.get("error"), error.get("message")),
            )
    except ClientError as exc:
        raise TransientError("could not resume with the waitpoint's earlier outcome") from exc
