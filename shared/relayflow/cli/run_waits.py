"""``relayflow run`` on a workflow that waits: say so at once, and on a terminal ask.

A local run has no API for anyone to answer its waits with, so without this it would sit
silently until ``--timeout``. When a run enters a step that waits (``approval``,
``waitpoint``, ``wait_for_event``, or a park after a failed step with ``on_error: park``),
the progress output says what it waits for and how to continue it. On a terminal, an
approval is asked for there (one of its options) and a waitpoint's completion data too (JSON;
Enter: none); the answer goes through the same wait service the API uses, and the run goes on.
Elsewhere (a pipe, CI) the note names ``relayflow serve`` and the console, where such runs
are answered.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

#: What each waiting step type waits for.
WAITS_FOR = {
    "approval": "a decision",
    "waitpoint": "a completion",
    "wait_for_event": "a matching event",
}
#: How long to look for the wait's record once its state is entered (its Lambda writes it).
_RECORD_WAIT = 10.0


def waiting_progress(
    workflow: Any,
    progress: Callable[[dict[str, Any]], None],
    *,
    timeout: float,
    ask: Callable[[str], str] | None,
) -> Callable[[dict[str, Any]], None]:
    """``progress`` plus the note (and on a terminal, the prompt) for each waiting step."""
    told: set[str] = set()
    run: dict[str, str] = {}

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
            where = _failed_item(event)
            _note(
                f"step '{key}' failed{where} and parked the run: `relayflow run` cannot "
                "resume it. "
                "Run the workflow under `relayflow serve` and resume it in the console "
                "(/console, the run's page) or with `relayflow runs resume RUN_ID --action "
                f"retry|skip|fail`; this run waits until --timeout ({timeout:g} s)."
            )
            return
        if suffix or step.type not in WAITS_FOR:
            return
        told.add(name)
        answerable = ask is not None and run and step.type in ("approval", "waitpoint")
        if answerable and _answer(step.type, key, run["id"], run["tenant"], ask):
            return
        _note(
            f"step '{key}' ({step.type}) waits for {WAITS_FOR[step.type]}, which "
            f"`relayflow run` cannot give it: this run waits until --timeout ({timeout:g} s). "
            "Run the workflow under `relayflow serve` and answer it in the console (/console) "
            "or with `relayflow approvals respond` / `relayflow waitpoints complete` "
            "(events: POST /events)."
        )

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
