"""The timeline of an Express run, from what its steps recorded.

An Express execution has no execution history (``GetExecutionHistory`` refuses it), so the
timeline that :mod:`relayflow.control.timeline` folds for a Standard run cannot be built.
What remains is what the run wrote itself:

* every acting step (tool, webhook_out, custom, code, agent, llm_batch) records its result
  under its step identity: one entry per step execution that completed (each for_each item
  and each pass through a cycle is its own record);
* a succeeded run's output (the state document its machine recorded on the run item) holds
  the record of every step still live at the end (``outputs:`` keeps more): one entry each
  for the steps the records do not cover, native ones included.

Steps whose output left the document, and steps that failed, have no entry; the run item
holds the run's error and cause. With the machine's CloudWatch Logs (level ``ALL``,
docs/engines.md) every state's entry and exit is in the log group, without payloads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from relayflow.control.timeline import StepRun
from relayflow.dal import Dal, RunItem
from relayflow.dal.express import step_records

#: Powertools' status of a record whose step finished.
COMPLETED = "COMPLETED"


def _output(data: Any) -> Any:
    try:
        result = json.loads(data) if isinstance(data, str) else data
    except ValueError:
        return None
    return result.get("output") if isinstance(result, dict) else None


def express_steps(
    dal: Dal,
    run: RunItem,
    step_types: Mapping[str, str],
    step_runners: Mapping[str, str],
) -> list[StepRun]:
    """One entry per completed step execution the run's steps recorded (records of parts,
    such as an agent's turns, and of unknown steps are left out), then one per step the
    run's recorded output still holds, in definition order."""
    steps: list[StepRun] = []
    for record in step_records(dal, run.tenant, run.run_id):
        key = str(record.get("sk", "")).split("#", 1)[0]
        if key not in step_types or record.get("status") != COMPLETED:
            continue
        steps.append(
            StepRun(
                key=key,
                type=step_types[key],
                status="succeeded",
                attempts=1,
                started_at=None,
                ended_at=None,
                duration_ms=None,
                runner=step_runners.get(key, step_types[key]),
                output=_output(record.get("data")),
            )
        )
    recorded = {step.key for step in steps}
    final = _document_steps(run.output)
    for key, type_ in step_types.items():
        entry = final.get(key)
        if key in recorded or not isinstance(entry, dict) or "output" not in entry:
            continue
        steps.append(
            StepRun(
                key=key,
                type=type_,
                status=str(entry.get("status") or "succeeded"),
                attempts=1,
                started_at=None,
                ended_at=None,
                duration_ms=None,
                runner=step_runners.get(key, type_),
                output=entry["output"],
            )
        )
    order = {key: i for i, key in enumerate(step_types)}
    return sorted(steps, key=lambda step: order.get(step.key, len(order)))


def _document_steps(output: str | None) -> dict[str, Any]:
    """``$.steps`` of the run's recorded output (the final state document)."""
    try:
        document = json.loads(output) if output else None
    except ValueError:
        return {}
    steps = document.get("steps") if isinstance(document, dict) else None
    return steps if isinstance(steps, dict) else {}


def with_duration(run: RunItem) -> RunItem:
    """The run with ``duration_ms`` from its start and end when its machine recorded the end
    (a native record cannot compute it; the sweep sets it later)."""
    if run.duration_ms is not None or not run.ended_at:
        return run
    started = datetime.fromisoformat(run.started_at.replace("Z", "+00:00"))
    ended = datetime.fromisoformat(run.ended_at.replace("Z", "+00:00"))
    return run.model_copy(
        update={"duration_ms": round((ended - started).total_seconds() * 1000, 3)}
    )
