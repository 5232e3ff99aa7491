"""Step-through runs: ``continue``.

A step-through run starts on the *step-through variant* of its version: the same compiled
machine with a gate before each step, parallel branches and for_each items included
(:mod:`relayflow.control.variants`). An Express workflow's step-through runs are Standard
runs (docs/engines.md).

``continue`` completes the gate the run waits at (a waitpoint labelled ``step-through``; the
oldest, when branches or items wait at several), so exactly one step starts. While that step
runs no gate is pending, and a second ``continue`` is a :class:`Conflict`; two racing calls
claim the same gate and only one wins. ``to_end`` marks the run so that later gates let it
through, and releases every pending gate.
"""

from __future__ import annotations

from relayflow.control.errors import Conflict
from relayflow.control.models import ContinueResult
from relayflow.dal import Dal, RunItem


def continue_run(dal: Dal, run: RunItem, *, to_end: bool) -> ContinueResult:
    """Release the pending gate of ``run`` (see the module docstring)."""
    from relayflow.control.waits import WaitService
    from relayflow.steps.step_gate import GATE_LABEL, TO_END

    if not run.step_through:
        raise Conflict(f"run {run.run_id} is not a step-through run")
    if run.status != "running":
        raise Conflict(f"run {run.run_id} is {run.status}: there is no step to release")
    if to_end:
        dal.update_run(run.tenant, run.run_id, {"step_mode": TO_END})
    waits = WaitService(dal)
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
        released = [g.step for g in pending if _release(dal, run, g.waitpoint_id)]
        return ContinueResult(
            run_id=run.run_id, released=released[0] if released else None, to_end=True
        )
    # Several gates wait at once inside a parallel or a for_each: the one that has waited
    # longest goes first (the listing is oldest first).
    gate = pending[0]
    if not _release(dal, run, gate.waitpoint_id):
        raise Conflict(f"step {gate.step} of run {run.run_id} was released by another call")
    return ContinueResult(run_id=run.run_id, released=gate.step, to_end=False)


def _release(dal: Dal, run: RunItem, waitpoint_id: str) -> bool:
    """Complete one gate; ``False`` when another call completed it first."""
    from relayflow.control.waits import WaitpointCompleted, WaitService

    try:
        WaitService(dal).complete_waitpoint(run.tenant, waitpoint_id, None)
    except WaitpointCompleted:
        return False
    return True
