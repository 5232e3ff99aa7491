"""A run's steps, folded from its Step Functions history.

One fold serves the local runner (``relayflow run``, from the runtime's record) and the
control plane (``GET /runs/{id}`` and the recorder, from ``GetExecutionHistory``): history
events → state runs (:func:`relayflow.executions.history.build_state_runs`, pure) → one
:class:`StepRun` per step execution (:func:`fold_steps`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from relayflow.causes import RUN_TIMEOUT_ERROR, public_cause, timeout_cause

if TYPE_CHECKING:
    from relayflow.executions.history import StateRun


@dataclass
class StepRun:
    """One step's part in a run (several ASL states may serve one step)."""

    key: str
    type: str
    status: str
    #: Calls the step's state made (Task attempts that were not refused; 1 for native states).
    attempts: int
    started_at: str | None
    ended_at: str | None
    duration_ms: float | None
    runner: str
    output: Any = None
    error: str | None = None
    cause: str | None = None
    #: In a dry run: ``{"simulated": true, "call": <the would-be call>}`` for a step that
    #: did not act, ``{"simulated": false, "read": true}`` for a ``dry_run: read`` tool.
    dry_run: Any = None
    #: Task attempts refused before any call was made (:data:`REFUSAL_ERRORS`): waits for a
    #: flow-control slot or a rate window, or an open circuit breaker. Not in ``attempts``.
    refusals: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


#: Step statuses an auxiliary state's record sets (relayflow.compiler.on_error).
AUXILIARY_STATUSES = ("fallback", "skipped")
#: The auxiliary state that writes an ``on_error: continue`` fallback (relayflow.compiler.on_error).
FALLBACK_SUFFIX = ".fallback"
#: Errors of an attempt the step's Lambda refused without making its call: flow control
#: (no slot, or the rate window is full; retried by the compiled Throttled retrier) and an
#: open circuit breaker. A timeline counts them as ``refusals``, apart from ``attempts``.
REFUSAL_ERRORS = frozenset({"Relayflow.Throttled", "Relayflow.CircuitOpen"})
#: History events that end an attempt in failure (their ``error`` says whether it was refused).
_ATTEMPT_FAILED = frozenset({"TaskFailed", "LambdaFunctionFailed", "ActivityFailed"})


def _step_output(key: str, output: Any, in_item: bool) -> Any:
    """A step's output from its main state's output: the record it wrote at
    ``$.steps.<key>``, or (as the last state of a for_each item) the record itself."""
    if not isinstance(output, dict):
        return None
    record = (output.get("steps") or {}).get(key) if "steps" in output else None
    if record is None and in_item and "status" in output:
        record = output
    return record.get("output") if isinstance(record, dict) else None


def _writes_output(key: str, output: Any) -> bool:
    """Whether a state's output holds a finished record of step ``key``."""
    steps = output.get("steps") if isinstance(output, dict) else None
    record = steps.get(key) if isinstance(steps, dict) else None
    return isinstance(record, dict) and "output" in record


def _dry_run_record(task_result: Any) -> Any:
    """The dry-run record a step Lambda answered beside its output (``ResultSelector`` keeps
    it out of the state document; the history has it)."""
    payload = task_result.get("Payload") if isinstance(task_result, dict) else None
    return payload.get("dry_run") if isinstance(payload, dict) else None


def refused_attempts(events: Iterable[Mapping[str, Any]]) -> dict[int, int]:
    """Refused attempts (:data:`REFUSAL_ERRORS`) per state entry (its ``…StateEntered`` event
    id), following each attempt's ``previousEventId`` chain back to the entry."""
    entry_of: dict[int, int] = {}
    refused: dict[int, int] = {}
    for event in events:
        event_id = int(event.get("id", 0))
        kind = str(event.get("type", ""))
        if kind.endswith("StateEntered"):
            entry_of[event_id] = event_id
            continue
        entry = entry_of.get(int(event.get("previousEventId", 0) or 0))
        if entry is None:
            continue
        entry_of[event_id] = entry
        if kind in _ATTEMPT_FAILED and _event_error(event) in REFUSAL_ERRORS:
            refused[entry] = refused.get(entry, 0) + 1
    return refused


def _event_error(event: Mapping[str, Any]) -> str | None:
    for key, value in event.items():
        if key.endswith("EventDetails") and isinstance(value, Mapping):
            error = value.get("error")
            return str(error) if error else None
    return None


def fold_steps(
    step_types: Mapping[str, str],
    step_runners: Mapping[str, str],
    states: Sequence[StateRun],
    refusals: Mapping[int, int] | None = None,
) -> list[StepRun]:
    """Fold the per-state timeline into one entry per step execution, in run order.

    ``step_types`` maps each step key to its type (states of other names are skipped);
    ``step_runners`` maps it to ``native`` or the function kind that runs it. A step's main
    state is named by its key; auxiliary states (``<key>.size``, ``<key>.route``,
    ``<key>.retry_wait`` …) add to that step's entry. Each for_each item is its own entry
    (``price[2]``). Entering a finished step's main state again starts a new entry (a cycle),
    except after the step's own linear-retry wait. Causes are the public part only
    (:func:`relayflow.causes.public_cause`). ``refusals`` (by state entry,
    :func:`refused_attempts`) are counted apart from the attempts that made their call.
    A history without execution data (an Express run's logs) still shows a fallback: its
    ``<key>.fallback`` state ran.
    """
    refusals = refusals or {}
    steps: list[StepRun] = []
    current: dict[tuple[str, int | None], StepRun] = {}
    main_done: set[int] = set()
    retrying: set[int] = set()
    for state in states:
        key = state.name.split(".", 1)[0]
        if key not in step_types:
            continue
        is_main = state.name == key
        slot = (key, state.iteration)
        entry = current.get(slot)
        if entry is None or (is_main and id(entry) in main_done and id(entry) not in retrying):
            label = key if state.iteration is None else f"{key}[{state.iteration}]"
            entry = StepRun(
                key=label,
                type=step_types[key],
                status="running",
                attempts=0,
                started_at=_iso(state.started_at),
                ended_at=None,
                duration_ms=None,
                runner=step_runners.get(key, "native"),
            )
            steps.append(entry)
            current[slot] = entry
        entry.ended_at = _iso(state.ended_at) or entry.ended_at
        if entry.started_at and entry.ended_at:
            entry.duration_ms = round(_elapsed_ms(entry.started_at, entry.ended_at), 3)
        if is_main:
            retrying.discard(id(entry))
            main_done.add(id(entry))
            refused = refusals.get(state.entered_event_id, 0)
            entry.refusals += refused
            # A native state makes one "call"; a Task whose every attempt was refused, none.
            entry.attempts += state.attempts - refused if state.attempts else 1
            entry.status = state.status
            entry.error, entry.cause = state.error, public_cause(state.cause)
            if state.error == RUN_TIMEOUT_ERROR and not entry.cause and state.timeout_seconds:
                # Step Functions gives a Task's timeout no cause: say what timed out. (Not
                # from an Express run's logs, which hold no execution data: no causes.)
                entry.cause = timeout_cause(step_types[key], key, state.timeout_seconds)
            if state.status == "succeeded" and state.error in REFUSAL_ERRORS:
                # Its last failed attempt was a refusal (counted in refusals), not an error of
                # a call it made.
                entry.error, entry.cause = None, None
            entry.output = _step_output(key, state.output, state.iteration is not None)
            entry.dry_run = _dry_run_record(state.task_result)
        elif _writes_output(key, state.output):
            # An auxiliary state wrote the step's record (an approval decided by its expiry):
            # the state document may drop it later, the timeline keeps it.
            entry.output = _step_output(key, state.output, False)
            record = state.output["steps"][key]
            if record.get("status") in AUXILIARY_STATUSES:
                # on_error: a fallback output, or a parked step skipped by a resume.
                entry.status = record["status"]
        elif state.name == key + FALLBACK_SUFFIX and state.status == "succeeded":
            # No execution data (logs): the fallback state ran, its output is not known here.
            entry.status = "fallback"
        elif state.name == f"{key}.park" and state.status == "running":
            entry.status = "parked"
        elif state.name.endswith(".retry_wait"):
            retrying.add(id(entry))
            entry.status = "retrying"
        elif (raised := _raised_error(state)) is not None:
            # A compiled failure (a for_each's items that are not a list or too many, a
            # park's timeout): the state put {Error, Cause} at $.error and takes the step's
            # error route, as a Catch would; a Fail state after it fails the step.
            entry.status = "caught"
            entry.error, entry.cause = raised
        elif state.status in ("failed", "caught") or state.type == "Fail":
            # An auxiliary state's caught failure (a sub_workflow's input check) fails the
            # step too; a later run of the main state (an agent resuming) overrides it. A
            # Fail state that re-raises the error an earlier state named keeps that name.
            entry.status = "failed"
            if state.error is not None or state.type != "Fail" or entry.error is None:
                entry.error, entry.cause = state.error, public_cause(state.cause)
    return steps


def _raised_error(state: StateRun) -> tuple[str, str | None] | None:
    """``(error, public cause)`` when ``state`` is a Pass that raised a compiled failure: it
    put an ``{Error, Cause}`` at ``$.error`` its input did not hold."""
    if state.type != "Pass" or state.status != "succeeded":
        return None
    after = state.output.get("error") if isinstance(state.output, Mapping) else None
    before = state.input.get("error") if isinstance(state.input, Mapping) else None
    if not isinstance(after, Mapping) or after == before or not after.get("Error"):
        return None
    cause = after.get("Cause")
    return str(after["Error"]), public_cause(cause if isinstance(cause, str) else None)


#: History events that end an execution, and the run status each means.
EXECUTION_END = {
    "ExecutionSucceeded": "SUCCEEDED",
    "ExecutionFailed": "FAILED",
    "ExecutionTimedOut": "TIMED_OUT",
    "ExecutionAborted": "ABORTED",
}


def history_steps(
    step_types: Mapping[str, str],
    step_runners: Mapping[str, str],
    events: Iterable[Mapping[str, Any]],
) -> list[StepRun]:
    """The step timeline of an execution from its history events (as ``GetExecutionHistory``
    returns them, oldest first, all pages)."""
    from relayflow.executions.history import build_state_runs

    events = list(events)
    status, ended_at = "RUNNING", None
    for event in reversed(events):
        if str(event.get("type", "")) in EXECUTION_END:
            status, ended_at = EXECUTION_END[str(event["type"])], _iso(event.get("timestamp"))
            break
    states = build_state_runs(events, status)
    steps = fold_steps(step_types, step_runners, states, refused_attempts(events))
    for step in steps:
        # A step the run ended in never exited its state: it ended with the execution.
        if step.ended_at is None and step.status != "running" and ended_at and step.started_at:
            step.ended_at = ended_at
            step.duration_ms = round(_elapsed_ms(step.started_at, ended_at), 3)
    return steps


#: Statuses of a step a run ended in (it never left its state).
ENDED_IN = ("failed", "timed_out", "aborted", "running")


def failing_step(steps: Sequence[StepRun]) -> str | None:
    """The key of the step of the run's own flow that a failed or timed-out run ended in: the
    first one (in start order) that never finished. A ``parallel`` or ``for_each`` starts
    before the steps inside it, so a failure inside one names the ``parallel`` or the
    ``for_each`` (``fan``), not whichever branch or item happened to be open last. A run that
    compensated before failing caught its step's error to walk the compensations: then it is
    the last step whose error was caught."""
    for step in steps:
        if step.status in ENDED_IN:
            return step.key.split("[", 1)[0]
    for step in reversed(steps):
        if step.status == "caught":
            return step.key.split("[", 1)[0]
    return None


def _iso(value: Any) -> str | None:
    return value.isoformat() if hasattr(value, "isoformat") else value


def _elapsed_ms(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds() * 1000
