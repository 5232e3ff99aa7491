"""wait_for_event: a callback Task that a matching event on the Relayflow bus completes.

The Task runs in the waitpoint function, which registers the wait (task token, ``match`` and
the run's data) in the table (:mod:`relayflow.steps.event_wait`); the trigger function
completes matching waits when an event arrives (:mod:`relayflow.control.event_waits`). The
event is the step's output. ``timeout_seconds`` is the Task's ``TimeoutSeconds``: on expiry
the run goes to ``on_timeout``, or the step fails with ``Relayflow.WaitTimeout``.
"""

from __future__ import annotations

from relayflow.compiler.asl import SUCCEEDED
from relayflow.compiler.emitter import Emitter
from relayflow.definition.models import WaitForEventStep

WAIT_TIMEOUT = "Relayflow.WaitTimeout"
#: The wait is registered by the waitpoint function (same table rights, same token handling).
RUNS_IN = "waitpoint"


def emit_wait_for_event(ctx: Emitter, key: str, step: WaitForEventStep) -> None:
    """The Task (in the waitpoint function); with ``timeout_seconds``, a ``States.Timeout``
    catcher first: to ``on_timeout``, or to a Fail state ``<key>.timeout`` with
    ``Relayflow.WaitTimeout``."""
    config = step.model_dump(
        mode="json", include={"event", "source", "match", "timeout_seconds"}, exclude_none=True
    )
    # callback_task names the function after the step's type; this step runs in another's.
    task = ctx.callback_task(key, step, config, {"output.$": "$.event", "status": SUCCEEDED})
    task.parameters["FunctionName"] = ctx.c.options.arn(RUNS_IN)
    ctx.c.runners[key] = RUNS_IN
    # Without timeout_seconds the wait never expires: no catcher, and no Fail state that
    # nothing would reach (ASL refuses unreachable states).
    if step.timeout_seconds:
        if step.on_timeout:
            target = ctx.route(key, step.on_timeout)
        else:
            target = f"{key}.timeout"
            cause = f"step {key} waited {step.timeout_seconds} s for a {step.event} event"
            # A settling branch records the timeout and ends; elsewhere the run fails.
            settled = ctx.failure_target(key) if ctx.settle else None
            ctx.raise_error(target, WAIT_TIMEOUT, cause, settled)
        timeout_catch = {
            "ErrorEquals": ["States.Timeout"],
            "ResultPath": "$.error",
            "Next": target,
        }
        task.catch = [timeout_catch, *task.catch]
    ctx.machine.add(key, ctx.flow(task, key, step.on_success))
