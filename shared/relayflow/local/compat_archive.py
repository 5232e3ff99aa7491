"""Compatibility fixes: executions kept from before a restart (``relayflow serve --state``).

moto forgets every execution when it stops. ``relayflow serve --state DIR``
(:mod:`relayflow.local.state_dir`) saves each execution's description and history, and on
the next start hands them to :func:`archive`. The Step Functions API then answers for them as
AWS answers for any execution it still knows: ``DescribeExecution``,
``GetExecutionHistory`` (paged as :mod:`relayflow.local.compat_api` pages it) and
``DescribeStateMachineForExecution``.

A run that was waiting when the server stopped goes on in a new execution of the same name
(:mod:`relayflow.local.revive`), started at the state it waited in. Its history is the kept
one up to that state, then the new execution's from that state on (the revival's own entry
states left out, the event ids renumbered): one timeline, as if the server had never stopped.

Registered through :mod:`relayflow.local.compat_registry` on import; applied in the order
:data:`relayflow.local.compat.FAMILIES` gives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from relayflow.local.compat_registry import Patches, fix, history_page

#: What the revival variant's own states are called (:mod:`relayflow.local.revive`).
REVIVAL_PREFIX = "_revive."


@dataclass
class Archived:
    """One execution kept from before a restart: boto3's ``DescribeExecution`` answer, its
    history events (oldest first) and ``DescribeStateMachineForExecution``'s answer."""

    description: dict[str, Any]
    events: list[dict[str, Any]]
    machine: dict[str, Any] | None = None
    #: Set once the execution goes on in a new one: its history keeps ``events[:cut]``.
    cut: int | None = None


_archive: dict[str, Archived] = {}
_lock = threading.Lock()


def archive(executions: Mapping[str, Archived]) -> None:
    """Answer for ``executions`` (execution ARN → what was kept) from now on."""
    with _lock:
        _archive.update(executions)


def archived(execution_arn: str) -> Archived | None:
    with _lock:
        return _archive.get(execution_arn)


def archived_arns() -> list[str]:
    with _lock:
        return list(_archive)


def forget() -> None:
    """Forget every kept execution (the runtime closes)."""
    with _lock:
        _archive.clear()


def joined_history(kept: Archived, live: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history of an execution that went on after a restart: the kept events before the
    state it waited in, then the live execution's events from its first entry into a state
    that is not the revival's own, with ids (and previous-event ids) renumbered to follow."""
    head = kept.events[: kept.cut]
    start = next(
        (
            index
            for index, event in enumerate(live)
            if str(event.get("type", "")).endswith("StateEntered")
            and not str((event.get("stateEnteredEventDetails") or {}).get("name", "")).startswith(
                REVIVAL_PREFIX
            )
        ),
        len(live),
    )
    dropped, offset = start, len(head)
    joined = list(head)
    for event in live[start:]:
        moved = dict(event)
        moved["id"] = int(event["id"]) - dropped + offset
        previous = int(event.get("previousEventId") or 0)
        moved["previousEventId"] = previous - dropped + offset if previous > dropped else offset
        joined.append(moved)
    return joined


@fix("archived_executions", "local runtime: serve --state")
def _archived_executions(patches: Patches) -> None:
    """``DescribeExecution``, ``GetExecutionHistory`` and ``DescribeStateMachineForExecution``
    answer for the executions kept from before a restart (see the module docstring). moto
    knows only the executions it ran itself."""
    from moto.core.responses import ActionResult
    from moto.stepfunctions.exceptions import ExecutionDoesNotExist
    from moto.stepfunctions.responses import StepFunctionResponse

    original_describe = StepFunctionResponse.describe_execution
    original_history = StepFunctionResponse.get_execution_history
    original_machine = StepFunctionResponse.describe_state_machine_for_execution

    def kept_or(original: Callable[[Any], Any], answer: Callable[[Any, Archived], Any]) -> Any:
        def serve(self: Any) -> Any:
            arn = self._get_param("executionArn")
            try:
                return original(self)
            except ExecutionDoesNotExist:
                kept = archived(arn)
                if kept is None:
                    raise
                return answer(self, kept)

        return serve

    def describe(self: Any, kept: Archived) -> Any:
        return ActionResult(dict(kept.description))

    def machine(self: Any, kept: Archived) -> Any:
        if kept.machine is None:
            arn = kept.description.get("executionArn")
            raise ExecutionDoesNotExist(f"Execution Does Not Exist: '{arn}'")
        return ActionResult(dict(kept.machine))

    def history(self: Any) -> Any:
        arn = self._get_param("executionArn")
        kept = archived(arn)
        if kept is None:
            return original_history(self)
        try:
            live = self.stepfunction_backend.get_execution_history(arn)["events"]
        except ExecutionDoesNotExist:
            return history_page(self, list(kept.events))
        if kept.cut is None:  # a new execution of a reused name: only its own events
            return original_history(self)
        return history_page(self, joined_history(kept, [dict(event) for event in live]))

    patches.set(StepFunctionResponse, "describe_execution", kept_or(original_describe, describe))
    patches.set(StepFunctionResponse, "get_execution_history", history)
    patches.set(
        StepFunctionResponse,
        "describe_state_machine_for_execution",
        kept_or(original_machine, machine),
    )
