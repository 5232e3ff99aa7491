"""A finished run's verdict (``outcome``), beside its status.

One rule, :func:`outcome_of`, used by the recorder (stored on the run item and carried in the
``relayflow.run.*`` events) and by the run views (for runs that ended without a recorded
verdict, such as a cancelled queued run).
"""

from __future__ import annotations

from typing import Literal, get_args

Outcome = Literal[
    "succeeded",
    "succeeded_with_fallbacks",
    "failed",
    "compensated",
    "partially_compensated",
    "timed_out",
    "cancelled",
]
OUTCOMES: tuple[str, ...] = get_args(Outcome)
#: ``compensation.status`` values (saga compensation) that name the verdict of a failed run.
COMPENSATION_OUTCOMES = ("compensated", "partially_compensated")


def outcome_of(status: str, *, fallbacks_used: bool, compensation: str | None = None) -> str:
    """The verdict of a run that ended in ``status`` (``succeeded``, ``failed``,
    ``timed_out`` or ``aborted``).

    * succeeded: ``succeeded_with_fallbacks`` when a step continued with its fallback
      (``$.run_flags.fallbacks``), else ``succeeded``;
    * failed or timed out after compensation ran: ``compensation`` (``compensated`` or
      ``partially_compensated``, the run's ``compensation.status``);
    * aborted (cancelled) after compensation ran: ``compensation`` too;
    * otherwise ``failed`` / ``timed_out``; ``aborted`` is ``cancelled``.

    Raises ``ValueError`` for a status that is not an end (``running``, ``parked``, …) or a
    compensation status it does not know."""
    if compensation is not None and compensation not in COMPENSATION_OUTCOMES:
        raise ValueError(
            f"compensation must be one of {', '.join(COMPENSATION_OUTCOMES)}, got {compensation!r}"
        )
    if status == "succeeded":
        return "succeeded_with_fallbacks" if fallbacks_used else "succeeded"
    if status in ("failed", "timed_out"):
        return compensation or status
    if status == "aborted":
        # A cancelled saga run is compensated after it stopped (cancel_compensation).
        return compensation or "cancelled"
    raise ValueError(f"a run in status {status!r} has not ended, so it has no outcome")


def fallbacks_used(document: object) -> bool:
    """Whether a run's final state document carries the fallback marker that a step's
    ``on_error: continue`` sets (``$.run_flags.fallbacks``)."""
    flags = document.get("run_flags") if isinstance(document, dict) else None
    return isinstance(flags, dict) and flags.get("fallbacks") is True


def compensation_status(document: object) -> str | None:
    """``compensation.status`` of a final state document or a run item, when it names a
    verdict (``compensated`` or ``partially_compensated``)."""
    compensation = document.get("compensation") if isinstance(document, dict) else None
    status = compensation.get("status") if isinstance(compensation, dict) else None
    return status if status in COMPENSATION_OUTCOMES else None
