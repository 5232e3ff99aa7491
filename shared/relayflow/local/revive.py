"""Runs that were under way when ``relayflow serve --state`` stopped, after its restart.

moto's executions die with the process; what they were doing is kept
(:mod:`relayflow.local.state_dir`): each one's history, so the state of the main flow it was
in, and the data that state was entered with. On restart each such run goes on in a new
execution of the same name (so the same execution ARN, the run's), on the *revival variant*
of the version it ran: the same machine with a Choice at the top (``_revive.at``) that sends
the execution, through a Pass (``_revive.<state>``, or ``_revive.#<digest>`` where that name
would pass 80 characters; ``InputPath: $.revive.input``) that puts back the kept data, to
that state. It is entered again:

* a run waiting (an approval, a waitpoint, ``wait_for_event``, a step-through gate, a park)
  waits again, under a new task token. Approvals, waitpoints and gates have ids of their own
  (run, step, item, pass) and are re-armed in place; a park's id comes from its token, so the
  old park is marked ``expired`` and the run parks anew. The wait's deadline starts again;
* a run in a ``delay`` waits its whole delay again;
* a run in a step's call, a ``parallel`` or a ``for_each`` runs that step again from its
  start (at least once, as a retried Lambda invocation is);
* a sub-workflow's child goes on through its parent, which enters its ``sub_workflow`` step
  again and starts the child afresh under the same run id (so the child's approvals are the
  same ones); a distributed ``for_each``'s item executions are its Map's, which runs again.

A run that cannot go on is failed, through the recorder like any run end
(``Relayflow.ServerStopped``, saying to rerun it): an Express run (its machine cannot wait),
a run whose history does not show a state of the main flow, and the children of a run that
cannot go on.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from relayflow.compiler.check import MAX_STATE_NAME
from relayflow.local.compat_archive import REVIVAL_PREFIX, Archived
from relayflow.naming import is_map_run_child

#: The Choice the revival variant starts at.
REVIVAL_CHOICE = f"{REVIVAL_PREFIX}at"
#: Where the revival's execution input names the state to enter, and what it enters it with.
AT_PATH = "$.revive.at"
INPUT_PATH = "$.revive.input"
#: The error of a run the restart could not carry on.
SERVER_STOPPED = "Relayflow.ServerStopped"


@dataclass
class Revived:
    """What the restart did with the runs that were under way."""

    revived: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Entry:
    """The main-flow state an execution was in: its ``StateEntered`` event's index in the
    history, its name and the data it was entered with (JSON)."""

    index: int
    state: str
    input: str


def active_state(events: list[dict[str, Any]], main_states: Iterable[str]) -> Entry | None:
    """The state of the main flow (``main_states``) that the execution had entered and not
    left, per its ``events``; ``None`` if there is none. States inside a ``parallel`` or a
    ``for_each`` belong to the main-flow state that holds them."""
    names = frozenset(main_states)
    current: Entry | None = None
    for index, event in enumerate(events):
        kind = str(event.get("type", ""))
        if kind.endswith("StateEntered"):
            details = event.get("stateEnteredEventDetails") or {}
            if details.get("name") in names:
                current = Entry(index, str(details["name"]), str(details.get("input") or "{}"))
        elif kind.endswith("StateExited") and current is not None:
            details = event.get("stateExitedEventDetails") or {}
            if details.get("name") == current.state:
                current = None
    return current


def door_name(state: str) -> str:
    """The revival's way in to ``state``: ``_revive.<state>``, or, where that would pass
    Step Functions' 80 characters, ``_revive.#<digest of the name>`` (unique per state)."""
    import hashlib

    door = f"{REVIVAL_PREFIX}{state}"
    if len(door) <= MAX_STATE_NAME:
        return door
    return f"{REVIVAL_PREFIX}#{hashlib.sha256(state.encode()).hexdigest()[:24]}"


def revival_variant(asl: dict[str, Any], states: Iterable[str]) -> dict[str, Any]:
    """``asl`` with a way in at each of ``states`` (top-level states) for
    ``{"revive": {"at": <state>, "input": <data>}}``; any other input starts where ``asl``
    starts. ``asl`` may be a revival variant itself (a run revived twice): its doors are
    replaced. ``asl`` is not changed."""
    import copy

    variant = copy.deepcopy(asl)
    start = str(asl["StartAt"])
    if start == REVIVAL_CHOICE:  # the variant of a run revived before: its own doors go
        start = str(asl["States"][REVIVAL_CHOICE]["Default"])
        for name in [n for n in variant["States"] if n.startswith(REVIVAL_PREFIX)]:
            del variant["States"][name]
    targets = sorted({state for state in states if not state.startswith(REVIVAL_PREFIX)})
    choices = []
    for state in targets:
        door = door_name(state)
        variant["States"][door] = {"Type": "Pass", "InputPath": INPUT_PATH, "Next": state}
        choices.append({"Variable": AT_PATH, "StringEquals": state, "Next": door})
    variant["States"][REVIVAL_CHOICE] = {
        "Type": "Choice",
        "Choices": choices,
        "Default": start,
    }
    variant["StartAt"] = REVIVAL_CHOICE
    return variant


def parks_of(tables: list[dict[str, Any]], runs: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """(tenant, park id) of every park still ``parked`` of one of ``runs``."""
    parks = []
    for table in tables:
        for item in table["items"]:
            place = (item.get("tenant", {}).get("S"), item.get("run_id", {}).get("S"))
            parked = item.get("status", {}).get("S") == "parked"
            if "park_id" in item and parked and place in runs:
                parks.append((str(place[0]), str(item["park_id"]["S"])))
    return parks


def revive_runs(
    runtime: Any,
    kept: Mapping[str, Archived],
    tables: list[dict[str, Any]],
    record: Callable[[dict[str, Any]], None],
    *,
    settle_timeout: float = 30.0,
) -> Revived:
    """Carry on, or fail, every kept execution that was still running (see the module
    docstring). ``record``: tells the recorder of an execution's end (its description).

    A sub-workflow's child run goes on through its parent, which enters its ``sub_workflow``
    step again and so starts the child afresh under the same run id; it is failed only when
    no ancestor goes on. A distributed ``for_each``'s item executions are its Map's, which
    runs again. Returns once every revived run is back at its state (:func:`_settle`)."""
    from relayflow.dal.parks import ParkDal

    running = {arn: k for arn, k in kept.items() if k.description.get("status") == "RUNNING"}
    plans: dict[str, Entry] = {}
    outcome = Revived()
    covered: set[tuple[str, str]] = set()
    children: list[tuple[str, Archived, dict[str, Any]]] = []
    #: Execution ARN → the state it goes on at (a child's: its parent starts it again).
    started: dict[str, str] = {}

    def fail(arn: str, k: Archived, why: str) -> None:
        _fail(k, why)
        record(k.description)
        outcome.failed.append(arn)

    for arn, k in running.items():
        run = _run_of(k)
        if is_map_run_child(str(k.description.get("stateMachineArn", ""))):
            continue  # an item of a distributed for_each: its Map runs again
        if isinstance(run.get("parent"), dict):
            children.append((arn, k, run))
            continue
        try:
            why, entry = _entry(runtime, k)
        except Exception as exc:  # e.g. its workflow was deleted while it ran
            why, entry = f"its state machine could not be read: {exc}", None
        if entry is None:
            fail(arn, k, why)
        else:
            plans[arn] = entry
            covered.add((str(run.get("tenant")), str(run.get("id"))))
    for arn, k, run in sorted(children, key=lambda child: int(child[2].get("depth") or 0)):
        tenant = str(run.get("tenant"))
        if (tenant, str(run["parent"].get("run_id"))) in covered:
            covered.add((tenant, str(run.get("id"))))
            outcome.revived.append(arn)
            definition = json.loads(str(k.machine["definition"])) if k.machine else {}
            entry = active_state(k.events, definition.get("States", {}))
            if entry is not None:  # its parent starts it again: settle waits for it too
                started[arn] = entry.state
        else:
            fail(arn, k, "the run that started it as a sub-workflow could not go on")
    for tenant, park_id in parks_of(tables, covered):
        ParkDal().expire(tenant, park_id)
    variants: dict[str, str] = {}
    for arn, entry in plans.items():
        k = running[arn]
        try:
            version_arn = _variant(runtime, k, [e.state for e in plans.values()], variants)
            data = json.loads(entry.input)
            # ``$.run`` names the run to the recorder, as in every execution's input.
            run = data.get("run") if isinstance(data, dict) else None
            k.cut = entry.index
            runtime.sfn_client.start_execution(
                stateMachineArn=version_arn,
                name=str(k.description["name"]),
                input=json.dumps({"run": run, "revive": {"at": entry.state, "input": data}}),
            )
        except Exception as exc:  # one run that cannot be started again fails alone
            k.cut = None
            fail(arn, k, f"it could not be started again: {exc}")
            continue
        outcome.revived.append(arn)
        started[arn] = entry.state
    _settle(runtime, started, {arn: running[arn] for arn in started}, settle_timeout)
    return outcome


def _settle(
    runtime: Any, started: dict[str, str], kept: Mapping[str, Archived], timeout: float
) -> None:
    """Wait until each revived execution (and each child its parent starts again) is back in
    its state, and one that waits for a callback has stored its wait under the new token (the
    Task's ``TaskSubmitted``): until
    then its approval, waitpoint or park still holds the dead token, and an answer given to it
    would be lost. The server answers requests only after this. ``timeout`` (seconds) bounds
    the wait; a run not back by then goes on anyway."""
    import time

    pending = {arn: _waits_for_callback(kept[arn], state) for arn, state in started.items()}
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        live = set(runtime.list_executions())  # a child appears once its parent starts it
        for arn, callback in list(pending.items()):
            if arn in live and _back_at(runtime, arn, callback):
                del pending[arn]
        if pending:
            time.sleep(0.02)


def _waits_for_callback(k: Archived, state: str) -> bool:
    """Whether ``state`` of the machine ``k`` ran is a ``.waitForTaskToken`` Task."""
    definition = json.loads(str(k.machine["definition"])) if k.machine else {}
    resource = definition.get("States", {}).get(state, {}).get("Resource", "")
    return str(resource).endswith(".waitForTaskToken")


def _back_at(runtime: Any, arn: str, callback: bool) -> bool:
    """Whether the revived execution ``arn`` entered a state again (and, for a callback Task,
    stored its wait), or ended."""
    from relayflow.local.compat_archive import archived

    kept = archived(arn)
    cut = (kept.cut or 0) if kept is not None else 0
    history = runtime.sfn_client.get_execution_history(
        executionArn=arn, maxResults=1000, reverseOrder=True
    )["events"]
    for event in history:  # newest first, down to the events kept from before the restart
        if int(event.get("id", 0)) <= cut:
            break
        kind = str(event.get("type", ""))
        if kind.startswith("Execution") and kind != "ExecutionStarted":
            return True
        if not callback and kind.endswith("StateEntered"):
            return True
        if callback and kind in ("TaskSubmitted", "TaskFailed", "TaskTimedOut"):
            return True
    return False


def _run_of(k: Archived) -> dict[str, Any]:
    """``$.run`` of the kept execution's input (``{}`` when there is none)."""
    try:
        document = json.loads(str(k.description.get("input") or "{}"))
    except ValueError:
        return {}
    run = document.get("run") if isinstance(document, dict) else None
    return run if isinstance(run, dict) else {}


def _base_arn(k: Archived) -> str:
    """The state machine ARN (no version or alias) of the kept execution."""
    assert k.machine is not None
    return ":".join(str(k.machine["stateMachineArn"]).split(":")[:7])


def _entry(runtime: Any, k: Archived) -> tuple[str, Entry | None]:
    """Where the kept execution goes on, or why it cannot."""
    if k.machine is None:
        return "the definition it ran was not kept", None
    described = runtime.sfn_client.describe_state_machine(stateMachineArn=_base_arn(k))
    if described.get("type") == "EXPRESS":
        return "an Express run cannot wait across a restart", None
    entry = active_state(k.events, json.loads(k.machine["definition"]).get("States", {}))
    if entry is None:
        return "its history shows no step of the main flow under way", None
    return "", entry


def _fail(k: Archived, why: str) -> None:
    """Mark the kept execution failed (what the recorder is then told)."""
    k.description = {
        **k.description,
        "status": "FAILED",
        "stopDate": datetime.datetime.now(datetime.UTC),
        "error": SERVER_STOPPED,
        "cause": (
            f"the local server stopped while this run was under way and it could not go on "
            f"({why}): rerun it from the step it was at (POST /runs/{{id}}/rerun)"
        ),
    }


def _variant(runtime: Any, k: Archived, states: list[str], made: dict[str, str]) -> str:
    """The version ARN of the revival variant of the version ``k`` ran, published (once per
    restart and version) as one more version of its state machine."""
    assert k.machine is not None
    source = str(k.description.get("stateMachineVersionArn") or k.machine["stateMachineArn"])
    if source in made:
        return made[source]
    asl = json.loads(k.machine["definition"])
    present = [state for state in states if state in asl.get("States", {})]
    variant = revival_variant(asl, present)
    base = _base_arn(k)
    sfn = runtime.sfn_client
    current = sfn.describe_state_machine(stateMachineArn=base)["definition"]
    published = sfn.update_state_machine(
        stateMachineArn=base,
        definition=json.dumps(variant, separators=(",", ":")),
        publish=True,
        versionDescription="revival of the runs under way at a restart",
    )["stateMachineVersionArn"]
    sfn.update_state_machine(stateMachineArn=base, definition=current)
    made[source] = str(published)
    return made[source]
