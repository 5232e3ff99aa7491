"""Rerun from a step: a new run of an earlier run's trigger that starts at a chosen step.

``POST /runs/{run_id}/rerun {from_step, version}`` starts a new run (a new run id; the earlier
run is not touched) with:

* the earlier run's trigger payload (``input``, checked against the target version's
  ``input_schema`` like any start);
* the records the earlier run's steps left in its document, in ``$.steps`` of its execution
  input, read from its timeline (a rerun of a rerun also carries what its origin carried):
  successes, ``on_error: continue`` fallbacks, skipped parks and the failed records of
  ``settle: all`` branches, so the steps it runs read the same data as before;
* ``$.rerun = {from_step, of}``, which the *rerun variant* of the version reads to start at
  that step (:mod:`relayflow.compiler.rerun`: the normal machine with a Choice at the top,
  published as one more version of the workflow's state machine on first use, recorded on
  the version item, as the step-through variant is).

``version`` is ``pinned`` (the earlier run's version, the default) or ``current`` (the live
one: "retry with the fix"). ``from_step`` must be a step of the main flow of that version; a
step inside a parallel branch or a for_each item is refused with the main-flow step that owns
it. A run still running (or queued, or parked) cannot be rerun: cancel or resume it first.

The earlier run's modes are kept unless the request says otherwise: a rerun of a dry run is a
dry run (``dry_run: false`` makes it act). A step-through rerun cannot be built yet (the
rerun and step-through variants are separate machines), so rerunning a step-through run
without ``step_through: false`` is refused with a 422 ``mode_not_carried`` instead of
silently acting on the world without the pauses the run had.

What a rerun does not redo: a saga's compensation list holds only the steps the rerun ran.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from relayflow.control.errors import ApiError, Conflict
from relayflow.control.lookups import find_run, find_version, find_workflow
from relayflow.control.models import StartRunResult
from relayflow.control.ports import Ports, RunControl
from relayflow.control.records import RerunSeed, loads_optional
from relayflow.control.run_reads import run_timeline
from relayflow.control.variants import main_flow_steps, step_graph
from relayflow.dal import RunItem, VersionItem

#: Runs that are still under way: a rerun would race them.
_UNDER_WAY = ("queued", "pending", "running", "parked")
#: How far back a chain of reruns is followed for outputs.
_MAX_CHAIN = 20


class RerunRequest(BaseModel):
    """The body of ``POST /runs/{run_id}/rerun``."""

    model_config = ConfigDict(extra="forbid")

    from_step: str = Field(
        description="The main-flow step the new run starts at; the steps before it are not "
        "run again, their outputs come from the earlier run."
    )
    version: Literal["pinned", "current"] = Field(
        "pinned",
        description="pinned: the earlier run's version; current: the workflow's live version.",
    )
    dry_run: bool | None = Field(
        None,
        description="Whether the rerun is a dry run (acting steps record, never act); "
        "by default the earlier run's mode.",
    )
    step_through: bool | None = Field(
        None,
        description="Whether the rerun pauses before each step; by default the earlier run's "
        "mode. A step-through rerun is not available: a rerun of a step-through run needs "
        "step_through: false.",
    )


class UnknownStep(ApiError):
    """``from_step`` is not a main-flow step of the version the rerun runs."""

    status, code = 422, "unknown_step"


class ModeNotCarried(ApiError):
    """The rerun would need a mode it cannot run in (step-through)."""

    status, code = 422, "mode_not_carried"


class OutputsNotRecorded(ApiError):
    """Steps before ``from_step`` whose outputs the earlier run did not record (an Express
    run keeps no output of its native steps), so a rerun there would lose them."""

    status, code = 409, "outputs_not_recorded"


def rerun(
    ports: Ports,
    runs: RunControl,
    tenant: str,
    run_id: str,
    from_step: str,
    *,
    version: str,
    dry_run: bool | None = None,
    step_through: bool | None = None,
) -> StartRunResult:
    """Start the rerun (see the module docstring) through ``runs``. ``dry_run`` and
    ``step_through`` ``None``: the earlier run's modes."""
    dal = ports.dal
    earlier = find_run(dal, tenant, run_id)
    if earlier.status in _UNDER_WAY:
        raise Conflict(f"run {run_id} is {earlier.status}: cancel it (or resume it) before a rerun")
    dry = earlier.dry_run if dry_run is None else dry_run
    if earlier.step_through if step_through is None else step_through:
        raise ModeNotCarried(
            f"run {run_id} ran step by step, and a rerun cannot pause before each step: "
            'send "step_through": false to rerun it without pauses'
            + (" (still a dry run)" if dry else ""),
            {"mode": "step_through"},
        )
    head = find_workflow(dal, tenant, earlier.workflow_id)
    number = head.live_version if version == "current" else earlier.version
    number = number or head.live_version
    item = find_version(dal, tenant, head.workflow_id, number)
    main = main_flow_steps(item)
    if from_step not in main:
        raise UnknownStep(_unknown_step_message(item, from_step, main), {"steps": main})
    outputs, unknown = _outputs(ports, earlier, item)
    lost = sorted(unknown - step_graph(item).reachable(from_step))
    if lost:
        raise OutputsNotRecorded(
            f"run {run_id} ran on Express, which records no output of native steps, so "
            f"the output of {', '.join(lost)} is unknown and a rerun from {from_step!r} "
            "would run without it: rerun from an earlier step (or the start), or give the "
            "workflow engine: standard (docs/engines.md)",
            {"steps": lost},
        )
    seed = RerunSeed(of=run_id, from_step=from_step, steps=outputs)
    return runs.start_run(
        tenant,
        head.workflow_id,
        loads_optional(earlier.input),
        version=number,
        trigger_type="rerun",
        rerun=seed,
        dry_run=dry,
    )


#: Timeline statuses whose step left a record in ``$.steps`` a later step may read: a success,
#: an ``on_error: continue`` fallback and a park's skip (``{output, status}``).
_RECORDED = ("succeeded", "fallback", "skipped")


def document_steps(item: VersionItem) -> tuple[set[str], set[str]]:
    """The steps whose records a run's top-level ``$.steps`` holds (the main flow and, merged
    back, the branches of its ``parallel`` steps, nested ones too; not a ``for_each`` item's),
    and among them the branch steps of ``settle: all`` parallels (a failure there is a
    record, ``{status: failed, error}``, not the run's end)."""
    raw = json.loads(item.definition).get("steps") or {}
    scopes, _ = step_graph(item).scopes()
    visible: set[str] = set()
    settled: set[str] = set()
    for scope in scopes:  # main first; a scope's owner is in an earlier scope
        owner = raw.get(scope.owner) if scope.owner is not None else None
        if scope.owner is None:
            visible.update(scope.steps)
        elif scope.owner in visible and (owner or {}).get("type") == "parallel":
            visible.update(scope.steps)
            if (owner or {}).get("settle") == "all":
                settled.update(scope.steps)
    return visible, settled


def _record(step: Any, settled: set[str]) -> dict[str, Any] | None:
    """The ``$.steps.<key>`` record a timeline step stands for, or ``None`` (it left none)."""
    if step.status in _RECORDED:
        record: dict[str, Any] = {"output": step.output, "status": step.status}
        if step.status == "fallback" and step.error is not None:
            record["error"] = {"Error": step.error, "Cause": step.cause}
        return record
    if step.status in ("caught", "failed") and step.key in settled:
        return {"status": "failed", "error": {"Error": step.error, "Cause": step.cause}}
    return None


def _outputs(ports: Ports, run: RunItem, item: VersionItem) -> tuple[dict[str, Any], set[str]]:
    """``$.steps`` records of the steps ``run`` (and the runs it reran) left in its document
    (:func:`document_steps`: successes, fallbacks, skips, a settled branch's failures), the
    newest run's winning; and the finished steps whose output was not recorded (native
    steps of an Express run: its timeline comes from step records)."""
    keys, settled = document_steps(item)
    chain: list[RunItem] = [run]
    while chain[-1].rerun_of and len(chain) < _MAX_CHAIN:
        origin = ports.dal.get_run(run.tenant, chain[-1].rerun_of)
        if origin is None:
            break
        chain.append(origin)
    records: dict[str, Any] = {}
    unknown: set[str] = set()
    for earlier in reversed(chain):
        steps, source, _ = run_timeline(ports, earlier)
        for step in steps:
            record = _record(step, settled) if step.key in keys else None
            if record is None:
                continue
            if (
                source != "history"
                and step.runner == "native"
                and step.output is None
                and "output" in record
            ):
                unknown.add(step.key)
                records.pop(step.key, None)
                continue
            unknown.discard(step.key)
            records[step.key] = record
    return records, unknown


def _unknown_step_message(item: VersionItem, from_step: str, main: list[str]) -> str:
    steps = json.loads(item.definition).get("steps") or {}
    where = f"version {item.version} of workflow {item.workflow_id}"
    if from_step in steps:
        return (
            f"step {from_step!r} runs inside a parallel branch or a for_each item of {where}; "
            f"rerun from the main-flow step that holds it (one of: {', '.join(main)})"
        )
    return f"{where} has no step {from_step!r}; a rerun starts at one of: {', '.join(main)}"
