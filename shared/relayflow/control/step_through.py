"""Step-through runs: a separately compiled variant of a version, and ``continue``.

A step-through run starts on the *step-through variant* of its version: the same compiled
machine with a gate before each step, parallel branches and for_each items included
(:mod:`relayflow.compiler.debug`), published as one more version of the workflow's state
machine the first time a step-through run of that version starts, and recorded on the version
item. Normal runs never touch it: their machine, version ARN and transition count do not
change. An Express workflow's variant is published on a Standard sibling machine
(:func:`step_through_machine_name`), since Express has no callbacks; its step-through runs are
Standard runs (docs/engines.md).

``continue`` completes the gate the run waits at (a waitpoint labelled ``step-through``; the
oldest, when branches or items wait at several), so exactly one step starts. While that step
runs no gate is pending, and a second ``continue`` is a :class:`Conflict`; two racing calls
claim the same gate and only one wins. ``to_end`` marks the run so that later gates let it
through, and releases every pending gate.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING

from relayflow.control.errors import Conflict, InvalidDefinition
from relayflow.control.models import ContinueResult
from relayflow.dal import RunItem, VersionItem, WorkflowItem

if TYPE_CHECKING:
    from relayflow.control.service import ControlPlane
    from relayflow.definition import Workflow


def step_through_machine_name(stage: str, tenant: str, workflow_id: str) -> str:
    """The Standard machine that runs the step-through variants of an Express workflow
    (``<workflow_id>.step``: workflow ids hold no ``.``, so it names no workflow's machine)."""
    from relayflow.executions.stepfunctions import state_machine_name

    return state_machine_name(stage, tenant, f"{workflow_id}.step")


def stored_workflow(item: VersionItem) -> Workflow:
    """The validated definition of a stored version, to compile one of its variants from.
    It was valid when it was published; an engine that no longer accepts it says why
    (:class:`InvalidDefinition`)."""
    from relayflow.validation import validate_data

    workflow, problems = validate_data(json.loads(item.definition))
    if workflow is None:
        raise InvalidDefinition.from_problems(problems)
    return workflow


class StepThrough:
    """Step-through runs of one control plane."""

    def __init__(self, control: ControlPlane) -> None:
        self.control = control

    def target(self, head: WorkflowItem, version: int) -> str:
        """The version ARN of ``version``'s step-through variant, published on first use."""
        item = self.control._version(head.tenant, head.workflow_id, version)
        if item.step_through_version_arn:
            return item.step_through_version_arn
        return self._publish(head, item)

    def _publish(self, head: WorkflowItem, item: VersionItem) -> str:
        from relayflow.compiler import compile_workflow
        from relayflow.compiler.debug import step_through_variant
        from relayflow.control.engines import compile_options
        from relayflow.control.machine_config import machine_config
        from relayflow.control.plane.common import check_compiled

        workflow = stored_workflow(item)
        # The variant is a Standard machine's: its gates are callback Tasks.
        options = replace(compile_options(head.tenant, head), express=False)
        compiled = compile_workflow(workflow, options)
        # The gates are served by the waitpoint function (step type ``step_gate``).
        variant = step_through_variant(compiled.asl, workflow.steps, options.arn("waitpoint"))
        check_compiled(variant, what="the step-through variant (a gate before every step)")
        definition = json.dumps(variant, separators=(",", ":"))
        description = (
            f"Relayflow {head.tenant}/{head.workflow_id} version {item.version} (step-through)"
        )
        if head.engine == "express":
            from relayflow.settings import get_settings

            settings = get_settings()
            # An Express machine has no callbacks: the variant runs on a Standard sibling.
            name = step_through_machine_name(settings.stage, head.tenant, head.workflow_id)
            _, arn = self.control.machines.create(
                name,
                definition,
                **machine_config(head.tenant, workflow),
                description=description,
                tags={"relayflow:tenant": head.tenant, "relayflow:workflow": head.workflow_id},
            )
        else:
            arn = self.control.machines.update(
                head.state_machine_arn,
                definition,
                **machine_config(head.tenant, workflow),
                description=description,
            )
        self.control.dal.set_step_through_version(head.tenant, head.workflow_id, item.version, arn)
        return arn

    def continue_run(self, run: RunItem, *, to_end: bool) -> ContinueResult:
        """Release the pending gate of ``run`` (see the module docstring)."""
        from relayflow.control.waits import WaitService
        from relayflow.steps.step_gate import GATE_LABEL, TO_END

        if not run.step_through:
            raise Conflict(f"run {run.run_id} is not a step-through run")
        if run.status != "running":
            raise Conflict(f"run {run.run_id} is {run.status}: there is no step to release")
        if to_end:
            self.control.dal.update_run(run.tenant, run.run_id, {"step_mode": TO_END})
        waits = WaitService(self.control.dal)
        pending = [
            view
            for view in waits.list_waitpoints(run.tenant, run_id=run.run_id)
            if view.label == GATE_LABEL and view.status == "pending"
        ]
        if not pending:
            if to_end:
                return ContinueResult(run_id=run.run_id, released=None, to_end=True)
            raise Conflict(
                f"run {run.run_id} is not waiting before a step: one is running; continue "
                "again once it waits"
            )
        if to_end:
            # Every waiting gate goes (several wait at once inside a parallel or a for_each);
            # later gates see step_mode and let the run through.
            released = [g.step for g in pending if self._release(run, g.waitpoint_id)]
            return ContinueResult(
                run_id=run.run_id, released=released[0] if released else None, to_end=True
            )
        # Several gates wait at once inside a parallel or a for_each: the one that has waited
        # longest goes first (the listing is oldest first).
        gate = pending[0]
        if not self._release(run, gate.waitpoint_id):
            raise Conflict(f"step {gate.step} of run {run.run_id} was released by another call")
        return ContinueResult(run_id=run.run_id, released=gate.step, to_end=False)

    def _release(self, run: RunItem, waitpoint_id: str) -> bool:
        """Complete one gate; ``False`` when another call completed it first."""
        from relayflow.control.waits import WaitpointCompleted, WaitService

        try:
            WaitService(self.control.dal).complete_waitpoint(run.tenant, waitpoint_id, None)
        except WaitpointCompleted:
            return False
        return True
