"""The timeline of an Express run, from what its steps recorded.

An Express execution has no execution history (``GetExecutionHistory`` refuses it), so the
timeline that :mod:`relayflow.control.timeline` folds for a Standard run cannot be built.
What remains is what the steps wrote themselves: every acting step (tool, webhook_out,
custom, code, agent, llm_batch) records its result under its step identity, and those records
are the entries here, one per step execution that completed (each for_each item and each
pass through a cycle is its own record). Native steps (Pass, Choice, Wait) and steps that
failed leave no record; the run item holds the run's error and cause. With the machine's
CloudWatch Logs (level ``ALL``, docs/engines.md) every state's entry and exit is in the log
group, without payloads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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
    such as an agent's turns, and of unknown steps are left out)."""
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
    return steps
