"""Rerun from a step: a new run of an earlier run's trigger that starts at a chosen step.

``POST /runs/{run_id}/rerun {from_step, version}`` starts a new run (a new run id; the earlier
run is not touched) with:

* the earlier run's trigger payload (``input``, checked against the target version's
  ``input_schema`` like any start);
* the outputs of the steps the earlier run finished, in ``$.steps`` of its execution input,
  read from its timeline (a rerun of a rerun also carries what its origin carried), so the
  steps it runs read the same data as before;
* ``$.rerun = {from_step, of}``, which the *rerun variant* of the version reads to start at
  that step (:mod:`relayflow.compiler.rerun`: the normal machine with a Choice at the top,
  published as one more version of the workflow's state machine on first use, recorded on
  the version item, as the step-through variant is).

``version`` is ``pinned`` (the earlier run's version, the default) or ``current`` (the live
one: "retry with the fix"). ``from_step`` must be a step of the main flow of that version; a
step inside a parallel branch or a for_each item is refused with the main-flow step that owns
it. A run still running (or queued, or parked) cannot be rerun: cancel or resume it first.

What a rerun does not redo: a saga's compensation list holds only the steps the rerun ran,
and a step-through or dry-run mode is not carried over.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from relayflow.control.errors import ApiError, Conflict
from relayflow.control.models import StartRunResult
from relayflow.dal import RunItem, VersionItem, WorkflowItem

if TYPE_CHECKING:
    from relayflow.control.service import ControlPlane
    from relayflow.definition.graph import StepGraph

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


class UnknownStep(ApiError):
    """``from_step`` is not a main-flow step of the version the rerun runs."""

    status, code = 422, "unknown_step"


class OutputsNotRecorded(ApiError):
    """Steps before ``from_step`` whose outputs the earlier run did not record (an Express
    run keeps no output of its native steps), so a rerun there would lose them."""

    status, code = 409, "outputs_not_recorded"


class Reruns:
    """Reruns from a step, for one control plane."""

    def __init__(self, control: ControlPlane) -> None:
        self.control = control

    def rerun(self, tenant: str, run_id: str, from_step: str, *, version: str) -> StartRunResult:
        """Start the rerun (see the module docstring)."""
        from relayflow.control.plane.common import RerunSeed, loads_optional

        control = self.control
        earlier = control._run(tenant, run_id)
        if earlier.status in _UNDER_WAY:
            raise Conflict(
                f"run {run_id} is {earlier.status}: cancel it (or resume it) before a rerun"
            )
        head = control._workflow(tenant, earlier.workflow_id)
        number = head.live_version if version == "current" else earlier.version
        number = number or head.live_version
        item = control._version(tenant, head.workflow_id, number)
        main = main_flow_steps(item)
        if from_step not in main:
            raise UnknownStep(_unknown_step_message(item, from_step, main), {"steps": main})
        outputs, unknown = self._outputs(earlier, set(main))
        lost = sorted(unknown - _reachable(item, from_step))
        if lost:
            raise OutputsNotRecorded(
                f"run {run_id} ran on Express, which records no output of native steps, so "
                f"the output of {', '.join(lost)} is unknown and a rerun from {from_step!r} "
                "would run without it: rerun from an earlier step (or the start), or give the "
                "workflow engine: standard (docs/engines.md)",
                {"steps": lost},
            )
        seed = RerunSeed(of=run_id, from_step=from_step, steps=outputs)
        return control.start_run(
            tenant,
            head.workflow_id,
            loads_optional(earlier.input),
            version=number,
            trigger_type="rerun",
            rerun=seed,
        )

    def _outputs(self, run: RunItem, keys: set[str]) -> tuple[dict[str, Any], set[str]]:
        """``$.steps`` records of the main-flow steps ``run`` (and the runs it reran)
        finished, the newest run's winning; and the finished steps whose output was not
        recorded (native steps of an Express run: its timeline comes from step records)."""
        chain: list[RunItem] = [run]
        while chain[-1].rerun_of and len(chain) < _MAX_CHAIN:
            origin = self.control.dal.get_run(run.tenant, chain[-1].rerun_of)
            if origin is None:
                break
            chain.append(origin)
        records: dict[str, Any] = {}
        unknown: set[str] = set()
        for item in reversed(chain):
            steps, source, _ = self.control.run_timeline(item)
            for step in steps:
                if step.key not in keys or step.status != "succeeded":
                    continue
                if source != "history" and step.runner == "native" and step.output is None:
                    unknown.add(step.key)
                    records.pop(step.key, None)
                    continue
                unknown.discard(step.key)
                records[step.key] = {"output": step.output, "status": "succeeded"}
        return records, unknown

    def target(self, head: WorkflowItem, version: int) -> str:
        """The version ARN of ``version``'s rerun variant, published on first use."""
        item = self.control._version(head.tenant, head.workflow_id, version)
        if item.rerun_version_arn:
            return item.rerun_version_arn
        return self._publish(head, item)

    def _publish(self, head: WorkflowItem, item: VersionItem) -> str:
        from relayflow.compiler import compile_workflow
        from relayflow.compiler.rerun import rerun_variant
        from relayflow.control.engines import compile_options
        from relayflow.control.machine_config import machine_config
        from relayflow.control.plane.common import check_compiled
        from relayflow.control.step_through import stored_workflow

        workflow = stored_workflow(item)
        options = compile_options(head.tenant, head)
        compiled = compile_workflow(workflow, options)
        variant = rerun_variant(compiled.asl, main_flow_steps(item))
        check_compiled(variant, what="the rerun variant (a Choice that starts at a step)")
        arn = self.control.machines.update(
            head.state_machine_arn,
            json.dumps(variant, separators=(",", ":")),
            **machine_config(head.tenant, workflow),
            description=f"Relayflow {head.tenant}/{head.workflow_id} version {item.version} "
            "(rerun from a step)",
        )
        self.control.dal.set_rerun_version(head.tenant, head.workflow_id, item.version, arn)
        return arn


def main_flow_steps(item: VersionItem) -> list[str]:
    """The steps of a version's main flow (the ones a rerun may start at), in flow order."""
    scopes, _ = _graph(item).scopes()
    return list(scopes[0].steps) if scopes else []


def _reachable(item: VersionItem, from_step: str) -> set[str]:
    """The steps a run started at ``from_step`` can reach (and so runs again itself)."""
    return _graph(item).reachable(from_step)


def _graph(item: VersionItem) -> StepGraph:
    """The step graph of a stored version's definition."""
    from relayflow.definition.graph import StepGraph

    definition = json.loads(item.definition)
    on_failure = (definition.get("errors") or {}).get("on_failure")
    return StepGraph(definition.get("steps") or {}, str(definition.get("start") or ""), on_failure)


def _unknown_step_message(item: VersionItem, from_step: str, main: list[str]) -> str:
    steps = json.loads(item.definition).get("steps") or {}
    where = f"version {item.version} of workflow {item.workflow_id}"
    if from_step in steps:
        return (
            f"step {from_step!r} runs inside a parallel branch or a for_each item of {where}; "
            f"rerun from the main-flow step that holds it (one of: {', '.join(main)})"
        )
    return f"{where} has no step {from_step!r}; a rerun starts at one of: {', '.join(main)}"
