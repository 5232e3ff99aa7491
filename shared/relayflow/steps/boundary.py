"""Where a step Lambda reads its event and decides, once, whether it acts.

A dry run's event (``doc.run.dry_run`` true) gets :class:`~relayflow.steps.dry_run.
DryRunEffects` and goes straight to the step: it acts on nothing, so it neither holds a
flow-control slot nor writes a step-result record. Any other event gets
:class:`~relayflow.steps.effects.RealEffects`, inside the step's flow-control guard
(:mod:`relayflow.steps.guard`) and step-result record (:mod:`relayflow.steps.idempotency`)
when the step has them. This module is the only one that asks whether a run is dry.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from relayflow.observability import Handler
from relayflow.steps import guard, idempotency
from relayflow.steps.dry_run import DryRunEffects
from relayflow.steps.effects import Effects, RealEffects

#: A step function's logic: ``(event, context, effects)`` → the Lambda's answer.
StepLogic = Callable[[dict[str, Any], Any, Effects], Any]

REAL = RealEffects()
DRY_RUN = DryRunEffects()


def is_dry_run(event: Any) -> bool:
    """Whether a step Task payload belongs to a dry run (``doc.run.dry_run`` is true; a
    malformed payload does not)."""
    doc = event.get("doc") if isinstance(event, Mapping) else None
    run = doc.get("run") if isinstance(doc, Mapping) else None
    return isinstance(run, Mapping) and run.get("dry_run") is True


def effects_for(event: Any) -> Effects:
    """The effects a step Task payload's step gets: the recorder in a dry run, else real."""
    return DRY_RUN if is_dry_run(event) else REAL


def step_boundary(
    *, recorded: bool = False, flow_controlled: bool = False
) -> Callable[[StepLogic], Handler]:
    """Decorate a step function's logic (under ``@step_handler``) into its handler: the
    effects chosen by :func:`effects_for`; a real run within the step's flow control
    (``flow_controlled``) and acting once per step execution (``recorded``)."""

    def decorate(logic: StepLogic) -> Handler:
        # A partial, not a function of this module: the way down leaves the boundary once.
        guarded: Handler = functools.partial(logic, effects=REAL)
        if flow_controlled:
            guarded = guard.flow_controlled(guarded)
        if recorded:
            guarded = idempotency.recorded_step(guarded)

        @functools.wraps(logic)
        def handler(event: dict[str, Any], context: Any) -> Any:
            if is_dry_run(event):
                return logic(event, context, DRY_RUN)
            return guarded(event, context)

        return handler

    return decorate
