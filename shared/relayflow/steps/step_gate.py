"""The gate a step-through run waits at before each step (:mod:`relayflow.compiler.debug`).

Served by the waitpoint function (step type ``step_gate``). The gate stores a waitpoint
labelled :data:`GATE_LABEL` for the step, holding the task token, and the run waits until
``POST /runs/{id}/continue`` completes it (:meth:`ControlPlane.continue_run`). Once the run
was told to run to its end (``step_mode: to_end`` on the run item) a gate raises
``Relayflow.StepThroughOff`` instead, which the gate's own Catch turns into "go on".

A gate stored just as ``to_end`` was set would wait for a continue that already happened: so
after storing it, the gate reads the run again and, if it must not wait, releases itself.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from relayflow.errors import StepThroughOff, TransientError
from relayflow.steps.approval import iso, lifetime, task_token
from relayflow.steps.task import parse_task, result, run_place
from relayflow.steps.wait_outcomes import TOKEN_GONE, completion_output

#: The label of a gate's waitpoint (how ``continue`` tells gates from waitpoint steps).
GATE_LABEL = "step-through"
#: ``step_mode`` of a run that no longer pauses.
TO_END = "to_end"


def _runs_to_end(tenant: str, run_id: str) -> bool:
    from relayflow.dal import get_dal

    run = get_dal().get_run(tenant, run_id)
    return run is not None and run.step_mode == TO_END


def gate_id(event: Any) -> str:
    """The gate's waitpoint id: the step execution's (run, step, item, loop pass), so a
    duplicate invocation finds its own gate and each loop pass gets a new one."""
    import uuid

    from relayflow.steps.idempotency import step_identity

    identity = step_identity(event)
    return identity.wait_id("step_gate") if identity is not None else uuid.uuid4().hex


def run(event: Any) -> dict[str, Any]:
    """Store the gate (or raise ``Relayflow.StepThroughOff`` when the run runs to its end);
    the output (ignored by the waiting Task) names it."""
    from relayflow.dal.errors import DataAccessError
    from relayflow.dal.waits import WaitDal, WaitpointItem

    token = task_token(event)
    task = parse_task(event)
    place = run_place(task)
    tenant, run_id = place["tenant"], place["run_id"]
    try:
        if _runs_to_end(tenant, run_id):
            raise StepThroughOff(f"run {run_id} runs to its end", step=task.step.key)
        now = datetime.now(UTC)
        _, expires_at = lifetime(now, None)
        item = WaitpointItem(
            waitpoint_id=gate_id(event),
            **place,
            label=GATE_LABEL,
            created_at=iso(now),
            task_token=token,
            expires_at=expires_at,
        )
        dal = WaitDal()
        if not dal.put_waitpoint(item) and dal.rearm_waitpoint(item, after_failure=True) is None:
            # A duplicate invocation of a gate that was released already: go on.
            raise StepThroughOff(f"the gate of step {task.step.key!r} was released")
        if _runs_to_end(tenant, run_id):
            _release_self(tenant, item.waitpoint_id)
    except DataAccessError as exc:
        raise TransientError(f"could not store the gate of step {task.step.key!r}") from exc
    return result({"waitpoint_id": item.waitpoint_id, "gate": task.step.key})


def _release_self(tenant: str, waitpoint_id: str) -> None:
    """Complete this gate (``to_end`` was set while it was stored), as ``continue`` would:
    claim it, then resume the run. A continue that completed it first wins, and that is as
    good; a token Step Functions no longer waits on expires the gate; any other failure
    hands the claim back and leaves the gate for a continue (nothing here fails the step)."""
    from botocore.exceptions import ClientError

    from relayflow.adapters.aws import client
    from relayflow.dal.errors import DataAccessError
    from relayflow.dal.waits import WaitDal

    waits = WaitDal()
    now = iso(datetime.now(UTC))
    with contextlib.suppress(DataAccessError):
        claimed = waits.claim_waitpoint(
            tenant, waitpoint_id, status="completed", result=None, error=None, now=now
        )
        if claimed is None:
            return
        try:
            client("stepfunctions").send_task_success(
                taskToken=claimed.task_token, output=completion_output(None)
            )
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in TOKEN_GONE:
                waits.expire_waitpoint(tenant, waitpoint_id)
            else:
                from relayflow.observability import logger

                # The message may quote the token: only the code is logged.
                logger.error("SendTask call failed", extra={"error": code or "ClientError"})
                waits.release_waitpoint(tenant, waitpoint_id, now)
        except Exception:
            waits.release_waitpoint(tenant, waitpoint_id, now)
            raise
