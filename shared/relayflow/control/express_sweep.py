"""The maintenance sweep that settles Express runs, which no recorder hears of
(``docs/engines.md``).

The sweep visits each deadline marker (:mod:`relayflow.dal.express`) once its deadline passed:
a run still ``running`` never recorded its end, so it is marked ``timed_out``; a run the
machine recorded itself is settled like the recorder settles a Standard run's end (DLQ
archive, admission slot, lifecycle event, breaker, notifications), through the same
:func:`relayflow.control.recorder.record_status_change`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from relayflow.control.status_events import DETAIL_TYPE, SOURCE
from relayflow.dal import RunItem
from relayflow.dal.express import ExpressDeadlines
from relayflow.observability import logger, record_metric

if TYPE_CHECKING:
    from relayflow.control.recorder import RecordingPlane

#: Markers one maintenance pass handles at most.
SWEEP_BATCH = 200


def _machine_of(execution_arn: str) -> str:
    """``arn:…:execution:<machine>:<name>`` → ``arn:…:stateMachine:<machine>``."""
    parts = execution_arn.split(":")
    if len(parts) < 8:
        return ""
    return ":".join([*parts[:5], "stateMachine", parts[6]])


def _status_change(
    run: RunItem, status: str, error: str | None, cause: str | None
) -> dict[str, Any]:
    """The status change event the recorder would have got for ``run``'s end (Express
    emits none): what :func:`relayflow.control.recorder.record_status_change` settles."""
    ended = run.ended_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def millis(value: str) -> int:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)

    document = {
        "run": {
            "id": run.run_id,
            "workflow_id": run.workflow_id,
            "version": run.version,
            "tenant": run.tenant,
        }
    }
    return {
        "source": SOURCE,
        "detail-type": DETAIL_TYPE,
        "detail": {
            "executionArn": run.execution_arn,
            "stateMachineArn": _machine_of(run.execution_arn or ""),
            "name": run.run_id,
            "status": status,
            "startDate": millis(run.started_at),
            "stopDate": millis(ended),
            "input": json.dumps(document),
            "inputDetails": {"included": True},
            "output": run.output,
            "error": error,
            "cause": cause,
        },
    }


def sweep_express_runs(
    control: RecordingPlane, *, now: datetime | None = None, limit: int = SWEEP_BATCH
) -> dict[str, Any]:
    """Settle every Express run whose deadline passed: ``timed_out`` when its machine recorded
    no end, else its recorded end; then archive failures in the DLQ, publish the lifecycle
    event, free its admission slot and notify, as the recorder does for Standard runs.
    Returns the run ids by outcome and emits ``ExpressRunsTimedOut``."""
    now = now or datetime.now(UTC)
    markers = ExpressDeadlines(control.ports.dal)
    timed_out: list[str] = []
    settled: list[str] = []
    for due in markers.due(now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), limit):
        run = control.ports.dal.get_run(due.tenant, due.run_id)
        if run is None:
            markers.remove(due)
            continue
        if run.status == "running":
            change = _status_change(
                run,
                "TIMED_OUT",
                "States.Timeout",
                "the Express run recorded no end by its deadline",
            )
            timed_out.append(run.run_id)
        elif run.native_status is not None and run.recorded_status is None:
            status = "SUCCEEDED" if run.native_status == "succeeded" else "FAILED"
            change = _status_change(run, status, run.error, run.cause)
            settled.append(run.run_id)
        elif run.status == "aborted" and run.recorded_status is None:
            # Cancelled through the API: the execution ran on (Express cannot stop), and its
            # own record found the run no longer running.
            change = _status_change(run, "ABORTED", run.error, run.cause)
            settled.append(run.run_id)
        else:
            markers.remove(due)
            continue
        # The recorder loads only when a run is due: most sweeps of the minute find none.
        from relayflow.control.recorder import record_status_change

        record_status_change(change, control=control)
        markers.remove(due)
    if timed_out:
        record_metric("ExpressRunsTimedOut", len(timed_out))
        logger.warning("express runs timed out", extra={"run_ids": timed_out})
    return {"timed_out": timed_out, "settled": settled}
