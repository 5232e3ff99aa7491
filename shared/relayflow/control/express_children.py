"""Run items for the Express children of a Standard run's ``sub_workflow`` steps.

Step Functions sends execution status-change events for Standard executions only, so the
recorder never hears of an Express child that a ``sub_workflow`` step ran
(``startExecution.sync:2``), and the child's own native record (:mod:`relayflow.compiler.
recording`) finds no run item to update: the child run would be invisible. The parent's
execution history holds what those events would have said. The Task's result when the child
succeeded, and the ``Cause`` of its ``States.TaskFailed`` when it did not, is the child's
``DescribeExecution`` in the ``sync:2`` shape (``ExecutionArn``, ``Name``, ``Status``,
``StartDate``/``StopDate`` in epoch milliseconds, ``Input``/``Output`` as JSON, ``Error``,
``Cause``).

When the recorder records a Standard run's end it reads that history anyway. For each child
of an Express workflow it finds there, :func:`child_status_changes` rebuilds the two events
AWS would have sent for a Standard child (``RUNNING``, then the end), and the recorder records
them like any other: the child gets its run item (trigger ``sub_workflow``, engine
``express``), its lifecycle events and, when it failed, its DLQ entry. Both are idempotent, so a
repeated delivery of the parent's end, or a local server's recorder that saw the child itself,
records nothing twice. A child still running when its parent was stopped has no result in the
history and is not recorded here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from relayflow.control.stored_json import loads_or_none

#: The Task resource of a ``sub_workflow`` step (``resource`` in its history events).
SYNC_RESOURCE = "startExecution.sync:2"
_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})


def child_executions(history: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """The ``sync:2`` results (a child's DescribeExecution) of every child execution the
    history's ``sub_workflow`` Tasks saw end, oldest first."""
    for event in history:
        kind = event.get("type")
        if kind == "TaskSucceeded":
            details = event.get("taskSucceededEventDetails") or {}
            text = details.get("output")
        elif kind == "TaskFailed":
            details = event.get("taskFailedEventDetails") or {}
            text = details.get("cause")
        else:
            continue
        if details.get("resourceType") != "states" or details.get("resource") != SYNC_RESOURCE:
            continue
        result = loads_or_none(text)
        if (
            isinstance(result, dict)
            and isinstance(result.get("ExecutionArn"), str)
            and result.get("Status") in _TERMINAL
        ):
            yield result


def child_status_changes(child: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The status-change events (AWS's shape) of one ended child: its start, then its end."""
    arn = str(child["ExecutionArn"])
    parts = arn.split(":")
    detail = {
        "executionArn": arn,
        "stateMachineArn": child.get("StateMachineArn"),
        "stateMachineVersionArn": child.get("StateMachineVersionArn"),
        "name": child.get("Name") or parts[-1],
        "status": child["Status"],
        "startDate": _millis(child.get("StartDate")),
        "stopDate": _millis(child.get("StopDate")),
        "input": _text(child.get("Input")),
        "inputDetails": {"included": True},
        "output": _text(child.get("Output")),
        "outputDetails": {"included": True},
        "error": child.get("Error"),
        "cause": child.get("Cause"),
    }
    running = {**detail, "status": "RUNNING", "stopDate": None, "output": None}
    running.update(error=None, cause=None)
    return [_event(arn, parts, running), _event(arn, parts, detail)]


def _event(arn: str, parts: list[str], detail: dict[str, Any]) -> dict[str, Any]:
    from relayflow.control.status_events import DETAIL_TYPE, SOURCE

    stamp = detail["stopDate"] or detail["startDate"]
    time = datetime.fromtimestamp(stamp / 1000, UTC) if stamp else datetime.now(UTC)
    return {
        "version": "0",
        "id": f"sync2-{parts[-1]}-{str(detail['status']).lower()}",
        "detail-type": DETAIL_TYPE,
        "source": SOURCE,
        "account": parts[4] if len(parts) > 4 else "",
        "time": time.replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "region": parts[3] if len(parts) > 3 else "",
        "resources": [arn],
        "detail": detail,
    }


def _text(value: Any) -> str | None:
    """``Input``/``Output`` of a ``sync:2`` result are JSON values; the event carries text."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _millis(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        from relayflow.control.times import parse_iso

        try:
            return int(parse_iso(value).timestamp() * 1000)
        except ValueError:
            return None
    return None
