"""``relayflow run`` on a workflow that waits: say so at once, ask on a terminal, and stop
the run when only outside input could end the wait.

A local run has no API for anyone to answer its waits with. When a run enters a step that
waits (``approval``, ``waitpoint``, ``wait_for_event``, or a park after a failed step with
``on_error: park``), the progress output says what it waits for and how to continue it under
``relayflow serve``, in words that fit the kind of wait. On a terminal, an approval is asked
for there (one of its options) and a waitpoint's completion data too (JSON; Enter: none);
the answer goes through the same wait service the API uses, and the run goes on.

A wait nobody answers here, and whose own timeout (a step's ``timeout_seconds``, a park's
scaled ``park_timeout``, the run's ``run_timeout_seconds``) would not end it within what is
left of ``--timeout``, cannot end: :class:`relayflow.runner.RunWaiting` stops the run at
once and ``relayflow run`` exits with :data:`relayflow.cli.output.EXIT_WAITING` and the
command to continue with, instead of sleeping until ``--timeout``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from relayflow.runner import RunWaiting

#: What each waiting step type waits for.
WAITS_FOR = {
    "approval": "a decision",
    "waitpoint": "a completion",
    "wait_for_event": "a matching event",
    "park": "a resume (retry, skip or fail)",
}
#: How long to look for the wait's record once its state is entered (its Lambda writes it).
_RECORD_WAIT = 10.0
#: A scaled park timeout lasts at least this long (relayflow.local.timescale.task_timeout).
_PARK_FLOOR_SECONDS = 1.0


def continue_hint(workflow: Any, key: str, kind: str) -> str:
    """How to give the wait at step ``key`` what it waits for, under ``relayflow serve``."""
    start = f"`relayflow runs start {workflow.id} --input …`"
    step = workflow.steps[key]
    if kind == "approval":
        options = "|".join(step.options)
        how = (
            "decide it in the console (/console, Approvals) or with `relayflow approvals "
            f"respond APPROVAL_ID --option {options}` (`relayflow approvals list` gives the id)"
        )
    elif kind == "waitpoint":
        how = (
            "complete it with `relayflow waitpoints complete WAITPOINT_ID --data JSON` "
            "(`relayflow waitpoints list --run RUN_ID` gives the id; or POST "
            "/waitpoints/{id}/complete)"
        )
    elif kind == "wait_for_event":
        source = step.source or "my.app"
        matching = f" whose detail matches `{step.match}`" if step.match else ""
        how = (
            f'publish the event with POST /events {{"source": "{source}", '
            f'"detail_type": "{step.event}", "detail": {{…}}}}{matching}'
        )
    else:
        how = (
            "resume it in the console (/console, the run's page) or with `relayflow runs "
            "resume RUN_ID --action retry|skip|fail`"
        )
    return f"run it under `relayflow serve` ({start}) and {how}"


def _ends_within(workflow: Any, step: Any, kind: str, time_scale: float) -> float | None:
    """Real seconds after which the wait ends by itself (its own timeout or the run's), or
    ``None`` when nothing ends it."""
    if kind == "park":
        from relayflow.definition.errors_model import DEFAULT_PARK_TIMEOUT

        park = float(getattr(step.on_error, "park_timeout", DEFAULT_PARK_TIMEOUT))
        own: float | None = max(park * time_scale, min(park, _PARK_FLOOR_SECONDS))
    else:
        own = float(step.timeout_seconds) if step.timeout_seconds else None
    run = float(workflow.run_timeout_seconds)
    return run if own is None else min(own, run)


def waiting_progress(
    workflow: Any,
    progress: Callable[[dict[str, Any]], None],
    *,
    timeout: float,
    ask: Callable[[str], str] | None,
    time_scale: float = 0.001,
    quiet: bool = False,
) -> Callable[[dict[str, Any]], None]:
    """``progress`` plus the note (and on a terminal, the prompt) for each waiting step;
    raises :class:`RunWaiting` at a wait that nothing would end within ``timeout`` seconds
    from now. ``quiet`` (``--json``) prints no note."""
    told: set[str] = set()
    run: dict[str, str] = {}
    deadline = time.monotonic() + timeout

    def waits(key: str, kind: str, what: str) -> None:
        what = f"{what}, which `relayflow run` cannot give it"
        hint = continue_hint(workflow, key, kind)
        ends = _ends_within(workflow, workflow.steps[key], kind, time_scale)
        if ends is not None and ends < deadline - time.monotonic():
            if not quiet:
                _note(f"{what}; its timeout ends the wait within {ends:g} s. To answer it, {hint}.")
            return
        raise RunWaiting(
            {
                "step": key,
                "type": kind,
                "waits_for": WAITS_FOR[kind],
                "message": what,
                "hint": hint,
            }
        )

    def on_event(event: dict[str, Any]) -> None:
        progress(event)
        started = event.get("executionStartedEventDetails")
        if started and not run:
            try:
                document = json.loads(started.get("input") or "{}")
                run.update(id=document["run"]["id"], tenant=document["run"]["tenant"])
            except (ValueError, KeyError, TypeError):
                pass
        if not str(event.get("type", "")).endswith("StateEntered"):
            return
        name = str((event.get("stateEnteredEventDetails") or {}).get("name") or "")
        key, _, suffix = name.partition(".")
        step = workflow.steps.get(key)
        if step is None or name in told:
            return
        if suffix == "park":
            told.add(name)
            parked = f"step '{key}' failed{_failed_item(event)} and parked the run"
            waits(key, "park", f"{parked}: it waits for {WAITS_FOR['park']}")
            return
        if suffix or step.type not in WAITS_FOR:
            return
        told.add(name)
        answerable = ask is not None and run and step.type in ("approval", "waitpoint")
        if answerable and _answer(step.type, key, run["id"], run["tenant"], ask):
            return
        waits(key, step.type, f"step '{key}' ({step.type}) waits for {WAITS_FOR[step.type]}")

    return on_event


def _note(text: str) -> None:
    print(f"    ⏸ {text}", file=sys.stderr, flush=True)


def _answer(kind: str, key: str, run_id: str, tenant: str, ask: Callable[[str], str]) -> bool:
    """Ask on the terminal and answer the wait; ``False`` when nothing was answered."""
    from relayflow.control.waits import WaitService

    waits = WaitService()
    deadline = time.monotonic() + _RECORD_WAIT
    while time.monotonic() < deadline:
        if kind == "approval":
            pending = [
                a
                for a in waits.list_approvals(tenant, limit=100).items
                if a.run_id == run_id and a.step == key
            ]
            if pending:
                return _decide(waits, tenant, pending[0], ask)
        else:
            found = _pending_waitpoint(tenant, run_id, key)
            if found is not None:
                return _complete(waits, tenant, found, ask)
        time.sleep(0.05)
    return False


def _decide(waits: Any, tenant: str, approval: Any, ask: Callable[[str], str]) -> bool:
    options = "/".join(approval.options)
    print(f"    ⏸ approval '{approval.title}': {approval.prompt or ''}".rstrip(), file=sys.stderr)
    while True:
        try:
            choice = ask(f"    decide ({options}): ").strip()
        except EOFError:
            return False
        if choice in approval.options:
            waits.respond(tenant, approval.approval_id, choice, responder="relayflow run")
            return True
        print(f"    one of: {options}", file=sys.stderr)


def _pending_waitpoint(tenant: str, run_id: str, key: str) -> Any:
    from relayflow.dal.waits import WaitDal

    for item in WaitDal().list_run_waitpoints(tenant, run_id):
        if item.step == key and item.status == "pending":
            return item
    return None


def _complete(waits: Any, tenant: str, waitpoint: Any, ask: Callable[[str], str]) -> bool:
    while True:
        try:
            text = ask(f"    complete waitpoint '{waitpoint.step}' with data (JSON, Enter: none): ")
        except EOFError:
            return False
        try:
            data = json.loads(text) if text.strip() else None
        except json.JSONDecodeError as exc:
            print(f"    not JSON: {exc.msg}", file=sys.stderr)
            continue
        waits.complete_waitpoint(tenant, waitpoint.waitpoint_id, data)
        return True


def _failed_item(event: dict[str, Any]) -> str:
    """`` at item N`` when the park's error names the for_each item that failed, else ``""``."""
    from relayflow.causes import public_error

    try:
        document = json.loads((event.get("stateEnteredEventDetails") or {}).get("input") or "{}")
    except ValueError:
        return ""
    error = public_error(document.get("error")) if isinstance(document, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    index = details.get("item_index") if isinstance(details, dict) else None
    return f" at item {index}" if isinstance(index, int) else ""
