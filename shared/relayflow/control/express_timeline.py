"""The timeline of an Express run, from what its steps recorded and its machine logged.

An Express execution has no execution history (``GetExecutionHistory`` refuses it), so the
timeline that :mod:`relayflow.control.timeline` folds for a Standard run cannot be built from
it. What remains is what the run wrote itself:

* its machine's CloudWatch Logs (level ``ALL``, without execution data), when they can be read:
  the history events without their payloads, folded by the Standard fold
  (:mod:`relayflow.control.express_logs`): one entry per step execution with its status,
  attempts, refusals, times and error, as a Standard run's timeline has them;
* every acting step (tool, webhook_out, custom, code, llm_batch) records its result under its
  step identity (:class:`relayflow.steps.idempotency.StepIdentity`), an agent its answer as its
  ``result`` part, so each entry finds its own output (a for_each item by its index). The other
  records of *parts* of a step (an agent's turns and tool calls, an llm_batch submission) are
  not a step's result;
* a succeeded run's output (the state document its machine recorded on the run item) holds
  the record of every step still live at the end (``outputs:`` keeps more);
* the definition: a plain-value fallback output, the null output of a noop, delay or parallel.

An output none of them holds stays empty and the note names the entry (never a null shown as
if it were the output). Without the logs the timeline is the records and the document alone
(:func:`express_steps`), and the note says why. ``source`` says which were used: ``records``
or ``records+logs``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from relayflow.control.timeline import StepRun
from relayflow.dal import Dal, RunItem
from relayflow.dal.express import step_records

if TYPE_CHECKING:
    from relayflow.control.express_logs import ExecutionLogs
    from relayflow.dal import VersionItem

#: Powertools' status of a record whose step finished.
COMPLETED = "COMPLETED"


def _output(record: Mapping[str, Any]) -> Any:
    """The step output a result record holds: a whole step's handler answer has it at
    ``output``; a result part (``<key>#result#<hash>``) is the output itself."""
    data = record.get("data")
    try:
        result = json.loads(data) if isinstance(data, str) else data
    except ValueError:
        return None
    if str(record.get("sk", "")).count("#") == 2:
        return result
    return result.get("output") if isinstance(result, dict) else None


def _step_results(dal: Dal, run: RunItem, step_types: Mapping[str, str]) -> list[dict[str, Any]]:
    """The completed records of the results of the run's step executions, in the order they
    were completed (to the second): a step's whole result (``<key>#<hash>``), or the result
    part of a step recorded in parts (an agent: ``<key>#result#<hash>``). The other records of
    *parts* (an agent's model turns and tool calls, an llm_batch submission) are not a step's
    result."""
    from relayflow.steps.idempotency import RESULT_PART

    found = []
    for record in step_records(dal, run.tenant, run.run_id):
        parts = str(record.get("sk", "")).split("#")
        whole = len(parts) == 2 or (len(parts) == 3 and parts[1] == RESULT_PART)
        if record.get("status") == COMPLETED and whole and parts[0] in step_types:
            found.append(record)
    return sorted(found, key=lambda record: _number(record.get("expiration")))


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
    for record in _step_results(dal, run, step_types):
        key = str(record["sk"]).split("#", 1)[0]
        steps.append(_recorded_entry(key, step_types, step_runners, "succeeded", _output(record)))
    recorded = {step.key for step in steps}
    final = _document_steps(run.output)
    for key in step_types:
        entry = final.get(key)
        if key in recorded or not isinstance(entry, dict) or "output" not in entry:
            continue
        status = str(entry.get("status") or "succeeded")
        steps.append(_recorded_entry(key, step_types, step_runners, status, entry["output"]))
    order = {key: i for i, key in enumerate(step_types)}
    return sorted(steps, key=lambda step: order.get(step.key, len(order)))


#: Timeline sources (``RunDetail.timeline_source``).
SOURCE_RECORDS = "records"
SOURCE_RECORDS_AND_LOGS = "records+logs"
#: How far before a run's start and after its end the log read looks (clock skew, delivery).
LOG_WINDOW_MARGIN = timedelta(minutes=1)
#: Statuses whose step wrote its output record (the document may hold it).
_WROTE_OUTPUT = ("succeeded", "fallback")


@dataclass
class ExpressTimeline:
    """An Express run's steps, where they came from, and what is missing when the logs could
    not be (fully) read."""

    steps: list[StepRun]
    source: str
    note: str | None = None


def express_timeline(
    dal: Dal,
    run: RunItem,
    version: VersionItem,
    logs: ExecutionLogs | None = None,
    *,
    now: datetime | None = None,
) -> ExpressTimeline:
    """The run's timeline from its step records and final document, merged with its
    execution's log records when the machine's log group can be read: entries (statuses,
    attempts, refusals, times, errors) come from the logs, outputs from the records (each
    entry's by its step identity), the document and the definition; an output no log entry
    takes keeps its own entry. ``note`` names the outputs that stay unknown. Without the logs
    it is :func:`express_steps`, and ``note`` says why."""
    from relayflow.control.express_logs import ExecutionLogs, log_steps

    step_types, step_runners = version.step_types, version.step_runners
    if run.status == "queued":  # no execution yet: nothing to read
        return ExpressTimeline([], SOURCE_RECORDS)
    group = _log_group(version)
    if group is None or not run.execution_arn:
        return ExpressTimeline(
            express_steps(dal, run, step_types, step_runners),
            SOURCE_RECORDS,
            "the state machines' log group is not configured",
        )
    start, end = _window(run, now or datetime.now(UTC))
    read = (logs or ExecutionLogs()).read(group, run.execution_arn, start, end)
    if not read.records:
        note = read.problem or "the log group holds no records of this execution (yet)"
        return ExpressTimeline(
            express_steps(dal, run, step_types, step_runners), SOURCE_RECORDS, note
        )
    steps = log_steps(step_types, step_runners, read.records)
    unknown = _add_outputs(steps, dal, run, version)
    notes = [read.problem] if read.problem else []
    if not read.problem and run.status != "running" and not read.ended:
        open_ = [step.key for step in steps if step.status == "running"]
        notes.append(
            "the log group does not hold the run's end yet (delivery takes seconds)"
            + (f"; not known yet how {_named(open_)} ended" if open_ else "")
        )
    if unknown:
        notes.append(
            f"output not known for {_named(unknown)}: Express logs hold no execution data, and "
            "no step record or final state document holds it (outputs: keeps a step's record)"
        )
    return ExpressTimeline(steps, SOURCE_RECORDS_AND_LOGS, "; ".join(notes) or None)


def _named(labels: list[str]) -> str:
    """``a, b, c`` (at most :data:`UNKNOWN_NAMED`, then ``and <n> more``)."""
    named = ", ".join(labels[:UNKNOWN_NAMED])
    if len(labels) > UNKNOWN_NAMED:
        named += f" and {len(labels) - UNKNOWN_NAMED} more"
    return named


def _log_group(version: VersionItem) -> str | None:
    """The log group the version's machine logs to (``logging_configuration``)."""
    from relayflow.settings import get_settings

    settings = get_settings()
    try:
        events = json.loads(version.definition).get("events") or {}
    except (ValueError, AttributeError):
        events = {}
    if isinstance(events, dict) and events.get("steps") and settings.step_events_log_group_arn:
        return settings.step_events_log_group_arn
    return settings.state_machine_log_group_arn


def _window(run: RunItem, now: datetime) -> tuple[int, int]:
    """Epoch milliseconds the run's records can lie between: its start to its end (else its
    longest possible end, or now), each widened by :data:`LOG_WINDOW_MARGIN`."""
    from relayflow.compiler.engine import EXPRESS_MAX_SECONDS

    started = _parse(run.started_at)
    latest = started + timedelta(seconds=EXPRESS_MAX_SECONDS)
    ended = _parse(run.ended_at) if run.ended_at else min(now, latest)
    first, last = started - LOG_WINDOW_MARGIN, max(ended, started) + LOG_WINDOW_MARGIN
    return int(first.timestamp() * 1000), int(last.timestamp() * 1000)


def _parse(value: str) -> datetime:
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


#: Steps a note names at most (the rest are counted).
UNKNOWN_NAMED = 10
#: Step types whose output is null by construction: known without execution data.
NULL_OUTPUT_TYPES = frozenset({"noop", "delay", "parallel"})


def _add_outputs(steps: list[StepRun], dal: Dal, run: RunItem, version: VersionItem) -> list[str]:
    """Put the outputs the records, the final document and the definition hold on the log
    entries (see :func:`express_timeline`); the labels of succeeded or fallback entries whose
    output stays unknown, in timeline order."""
    from relayflow.steps.idempotency import RESULT_PART, StepIdentity

    step_types, step_runners = version.step_types, version.step_runners
    known: set[int] = set()
    by_record_key = {str(r["sk"]): r for r in _step_results(dal, run, step_types)}
    # A record is keyed by its step identity: each entry finds its own (a for_each item by its
    # index). A step that did not succeed (an item stopped when another failed) shows none.
    for entry in steps:
        key, index = _label(entry.key)
        identity = StepIdentity(run.tenant, run.run_id, key, index)
        record = by_record_key.pop(identity.record_key, None) or by_record_key.pop(
            identity.part(RESULT_PART).record_key, None
        )
        if record is not None and entry.status == "succeeded":
            entry.output = _output(record)
            known.add(id(entry))
    # Passes through a cycle carry a counter in their identity: in the order they ended.
    leftover: dict[str, list[Any]] = {}
    for record_key, record in by_record_key.items():
        leftover.setdefault(record_key.split("#", 1)[0], []).append(_output(record))
    for key, outputs in leftover.items():
        entries = sorted(
            (
                s
                for s in steps
                if _base(s.key) == key and s.status == "succeeded" and id(s) not in known
            ),
            key=lambda s: s.ended_at or "",
        )
        for entry, output in zip(entries, outputs, strict=False):
            entry.output = output
            known.add(id(entry))
        for output in outputs[len(entries) :]:  # logs not (fully) delivered
            extra = _recorded_entry(key, step_types, step_runners, "succeeded", output)
            steps.append(extra)
            known.add(id(extra))
    for key, record in _document_steps(run.output).items():
        if key not in step_types or not isinstance(record, dict) or "output" not in record:
            continue
        entry = next(
            (s for s in reversed(steps) if _base(s.key) == key and s.status in _WROTE_OUTPUT),
            None,
        )
        if entry is None:
            status = str(record.get("status") or "succeeded")
            entry = _recorded_entry(key, step_types, step_runners, status, record["output"])
            steps.append(entry)
        elif id(entry) not in known:
            entry.output = record["output"]
        known.add(id(entry))
    for_each = [s for s in steps if s.type == "for_each" and s.status == "succeeded"]
    for entry in for_each:
        if id(entry) not in known and _for_each_output(entry, steps, known, version):
            known.add(id(entry))
    fallbacks = _static_fallbacks(version)
    unknown: list[str] = []
    for entry in steps:
        if id(entry) in known or entry.status not in _WROTE_OUTPUT:
            continue
        if entry.type in NULL_OUTPUT_TYPES:
            continue
        if entry.status == "fallback" and _base(entry.key) in fallbacks:
            entry.output = fallbacks[_base(entry.key)]
            continue
        unknown.append(entry.key)
    return unknown


def _for_each_output(
    entry: StepRun, steps: list[StepRun], known: set[int], version: VersionItem
) -> bool:
    """Put a succeeded for_each's output on its entry when every item's is known: the list of
    its items' records (``{"output", "status"}``, docs/definitions.md). Only for a for_each
    that ran once (a cycle's passes share item labels)."""
    item_step = (_definition_steps(version).get(entry.key) or {}).get("step")
    if sum(1 for s in steps if s.key == entry.key) != 1 or not isinstance(item_step, str):
        return False
    items = {_label(s.key)[1]: s for s in steps if _base(s.key) == item_step}
    if None in items or sorted(items) != list(range(len(items))):  # type: ignore[type-var]
        return False
    ordered = [items[i] for i in range(len(items))]
    if any(s.status != "succeeded" or id(s) not in known for s in ordered):
        return False
    entry.output = [{"output": s.output, "status": "succeeded"} for s in ordered]
    return True


def _definition_steps(version: VersionItem) -> dict[str, Any]:
    """The version definition's ``steps`` (raw)."""
    try:
        definition = json.loads(version.definition)
    except (ValueError, TypeError):
        return {}
    steps = definition.get("steps") if isinstance(definition, dict) else None
    return steps if isinstance(steps, dict) else {}


def _label(label: str) -> tuple[str, int | None]:
    """``price[2]`` → ``("price", 2)``; ``price`` → ``("price", None)``."""
    key, _, rest = label.partition("[")
    index = rest.rstrip("]")
    return key, int(index) if index.isdigit() else None


def _static_fallbacks(version: VersionItem) -> dict[str, Any]:
    """The ``on_error: continue`` fallback outputs of the version's steps that are plain values
    (no template): what such a fallback wrote is known from the definition alone."""
    found: dict[str, Any] = {}
    for key, step in _definition_steps(version).items():
        on_error = step.get("on_error") if isinstance(step, dict) else None
        if not isinstance(on_error, dict) or on_error.get("action") != "continue":
            continue
        output = on_error.get("output")
        if "{{" not in json.dumps(output):
            found[key] = output
    return found


def _base(label: str) -> str:
    """``price[2]`` → ``price``."""
    return label.split("[", 1)[0]


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _recorded_entry(
    key: str,
    step_types: Mapping[str, str],
    step_runners: Mapping[str, str],
    status: str,
    output: Any,
) -> StepRun:
    """An entry known only from a record: no attempts counted, no times."""
    return StepRun(
        key=key,
        type=step_types[key],
        status=status,
        attempts=1,
        started_at=None,
        ended_at=None,
        duration_ms=None,
        runner=step_runners.get(key, step_types[key]),
        output=output,
    )


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


def with_native_verdict(run: RunItem) -> RunItem:
    """The run with the verdict its settle will store, when its Express machine recorded its
    end (``native_status``) and no settle has stored one yet. The machine writes the status,
    error, cause and output in one update but cannot work out the verdict: a saga run that
    compensated fails with a cause that carries the compensation report, a run that continued
    with a fallback carries the marker in its output. Read without this, such a run showed
    ``failed/failed`` (or ``succeeded/succeeded``) until the sweep settled it. The verdict,
    compensation and original cause come from the same rules the settle applies
    (:func:`relayflow.control.compensation.split_cause`,
    :func:`relayflow.control.outcome.outcome_of`), so the settle changes none of them."""
    from relayflow.control.compensation import split_cause
    from relayflow.control.outcome import compensation_status, fallbacks_used, outcome_of

    if run.outcome is not None or run.native_status is None or run.recorded_status is not None:
        return run
    if run.status not in ("succeeded", "failed"):
        return run  # cancelled meanwhile: the cancel's verdict stands
    cause, compensation = split_cause(run.cause)
    compensation = compensation or run.compensation
    try:
        document = json.loads(run.output) if run.output else None
    except ValueError:
        document = None
    outcome = outcome_of(
        run.status,
        fallbacks_used=fallbacks_used(document),
        compensation=compensation_status({"compensation": compensation}),
    )
    return run.model_copy(update={"outcome": outcome, "cause": cause, "compensation": compensation})
