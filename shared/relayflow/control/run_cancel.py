"""Cancelling a run: a queued one leaves its queue, a running or parked one is stopped."""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

from relayflow.control.admission import Admission
from relayflow.control.errors import Conflict
from relayflow.control.limits import CANCEL_ERROR, RUN_RETENTION, RUN_STATUS
from relayflow.control.lookups import find_run
from relayflow.control.models import RunSummary
from relayflow.control.ports import Ports
from relayflow.control.records import run_summary
from relayflow.control.times import elapsed_ms, epoch, iso, now_iso, parse_iso
from relayflow.executions import stepfunctions as sfn_api


def cancel_run(ports: Ports, admission: Admission, tenant: str, run_id: str) -> RunSummary:
    """Stop a running run; it is ``aborted`` at once (the recorder confirms it later).
    :class:`Conflict` when the run has already finished."""
    dal = ports.dal
    run = find_run(dal, tenant, run_id)
    if run.status == "queued" and admission.cancel_queued(run):
        ended_at = now_iso()
        values = {
            "status": "aborted",
            "ended_at": ended_at,
            "error": CANCEL_ERROR,
            "cause": "cancelled while queued",
            "expires_at": epoch(parse_iso(ended_at) + RUN_RETENTION),
        }
        cancelled = dal.update_run(tenant, run_id, values, if_status=("queued",))
        if cancelled is not None:
            return run_summary(cancelled)
        run = find_run(dal, tenant, run_id)
    if run.status not in ("running", "parked"):
        raise Conflict(f"run {run_id} has already finished ({run.status})")
    described: dict[str, Any] | None = None
    cause = "cancelled through the Relayflow control API"
    if run.execution_arn and run.engine != "express":  # Express cannot stop (engines.md)
        with contextlib.suppress(sfn_api.ExecutionMissing):
            ports.machines.stop(run.execution_arn, error=CANCEL_ERROR, cause=cause)
        described = ports.machines.describe(run.execution_arn)
    status = str((described or {}).get("status", "ABORTED"))
    if status in ("SUCCEEDED", "FAILED", "TIMED_OUT"):
        raise Conflict(f"run {run_id} has already finished ({RUN_STATUS[status]})")
    stop = (described or {}).get("stopDate")
    ended_at = iso(stop) if isinstance(stop, datetime) else now_iso()
    updated = dal.update_run(
        tenant,
        run_id,
        {
            "status": "aborted",
            "ended_at": ended_at,
            "duration_ms": elapsed_ms(run.started_at, ended_at),
            "error": CANCEL_ERROR,
            "cause": cause,
            "expires_at": epoch(parse_iso(ended_at) + RUN_RETENTION),
            "parked": None,
        },
        if_status=("running", "parked"),
    )
    if updated is None:
        current = find_run(dal, tenant, run_id)
        if current.status != "aborted":
            raise Conflict(f"run {run_id} has already finished ({current.status})")
        updated = current
    return run_summary(updated)
