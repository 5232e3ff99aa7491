"""How a waitpoint is named and how the run waiting at it is resumed: the waitpoint's id, the
``SendTaskSuccess`` output of a completion, the ``Cause`` of a failure, and the Step
Functions error codes that mean a task token is no longer waited on.

One home for what the waitpoint step (:mod:`relayflow.steps.waitpoint`), the step-through gate
(:mod:`relayflow.steps.step_gate`) and the control plane's wait service
(:mod:`relayflow.control.waits`) must agree on; it imports nothing above the steps.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

#: The error a failed waitpoint fails its step with (ASL Catch/Retry match on it).
WAITPOINT_FAILED = "Relayflow.WaitpointFailed"
#: The longest ``Cause`` a failed waitpoint sends.
MAX_FAILURE_TEXT = 32_768
#: Step Functions' answers for a task token it no longer waits on.
TOKEN_GONE = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})


def waitpoint_id(tenant: str, idempotency_key: str | None, event: Any = None) -> str:
    """The first 32 hex digits of sha256(tenant, key) for a key; without one, the id of the
    step execution (:meth:`StepIdentity.wait_id`: the same for a restarted run), or a fresh
    uuid4 hex for a payload that names no run."""
    if idempotency_key is None:
        from relayflow.steps.idempotency import step_identity

        identity = step_identity(event) if event is not None else None
        return identity.wait_id("waitpoint") if identity else uuid.uuid4().hex
    return hashlib.sha256(f"{tenant}\n{idempotency_key}".encode()).hexdigest()[:32]


def completion_output(data: Any) -> str:
    """The ``SendTaskSuccess`` output of a completion: the data wrapped, so that any JSON
    value (not only an object) can be a step's output."""
    return json.dumps({"data": data}, separators=(",", ":"))


def failure_cause(error: str | None, message: str | None) -> str:
    """The ``Cause`` of a failed waitpoint: the caller's message, after its error code."""
    text = ": ".join(t for t in (error, message) if t) or "the waitpoint was failed"
    return text[:MAX_FAILURE_TEXT]
