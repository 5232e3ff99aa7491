"""The compensation variant of a saga machine: the ``_saga.*`` walk alone.

A run that is cancelled (``POST /runs/{id}/cancel``, ``cancel_on``) or times out
(``run_timeout_seconds``) is stopped by Step Functions, which runs no ``Catch``: the walk
compiled into the run's own machine (:mod:`relayflow.compiler.compensation`) never starts.
The *compensation variant* is a separate, small machine holding only that walk, which the
recorder starts with the run's last ``$.saga`` (:mod:`relayflow.control.cancel_compensation`).

It is the walk's states as compiled, so a compensation runs exactly as on a failure (same
Lambda, same step key ``<key>.compensate`` and so the same idempotency record, same retries),
with two changes:

* ``StartAt`` is ``_saga.next``; the input is ``{run, trigger, saga, error}``;
* the end is ``_saga.end``, a ``Pass`` that keeps ``{"done": <the walk's done list>}`` and
  succeeds: the run's own status (aborted or timed out) stays what it was, and the recorder
  reads the verdict from this output. ``_saga.raise`` / ``_saga.report`` / ``_saga.fail``
  (which fail the *run*) are not part of it.
"""

from __future__ import annotations

import copy
from typing import Any

from relayflow.compiler.compensation import INIT, NEXT, SAGA

#: What every state of the walk is named with (step keys never start with ``_``).
WALK_PREFIX = "_saga."
#: The walk's end in the variant.
END = "_saga.end"
_DROPPED = frozenset({INIT, "_saga.raise", "_saga.report", "_saga.fail"})


def compensation_variant(asl: dict[str, Any]) -> dict[str, Any] | None:
    """The compensation variant of the compiled machine ``asl`` (see the module docstring);
    ``None`` when ``asl`` has no walk (no compensated step, or no way to fail). ``asl`` is not
    changed."""
    states: dict[str, Any] = asl.get("States") or {}
    if NEXT not in states:
        return None
    walk = {
        name: copy.deepcopy(state)
        for name, state in states.items()
        if name.startswith(WALK_PREFIX) and name not in _DROPPED
    }
    walk[END] = {"Type": "Pass", "Parameters": {"done.$": f"{SAGA}.done"}, "End": True}
    variant: dict[str, Any] = {
        "Comment": "Relayflow compensation of a cancelled or timed-out run",
        "StartAt": NEXT,
        "States": walk,
    }
    if "QueryLanguage" in asl:
        variant["QueryLanguage"] = asl["QueryLanguage"]
    return variant
