"""Other workflows as an agent's tools: a call of ``workflow.<id>`` is a child run (a sub-run).

No Lambda waits for the child. The agent suspends its loop (branch ``awaiting_workflow``)
with ``pending`` naming the workflow, the child's run id and its trigger (the call's
arguments); the compiled ``<key>.workflow`` state starts the child with
``startExecution.sync:2`` (same tenant: the state machine's name prefix is fixed at compile
time) and puts its result at ``steps.<key>.workflow``; the agent Task then resumes and gives
the model the child's output as the call's result (:func:`child_outcome`).

The child's run id is derived from the step execution, the turn and the call id, so a
duplicate invocation of the turn names the same child (Step Functions refuses a second
execution of one name), and the call's result is recorded like any tool call's: a replay of
the turn (a retry, a run restarted under its id) reads it back instead of starting the child
again (:func:`recorded_call`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from relayflow.ai.messages import ToolCall
from relayflow.definition.agent_tools import workflow_tool_id
from relayflow.errors import InvalidRunInput, SubWorkflowDepth, SubWorkflowFailed
from relayflow.steps.idempotency import StepIdentity


class AgentRun(Protocol):
    """What a workflow call needs of the agent's loop (:class:`relayflow.steps.agent.
    AgentLoop`)."""

    config: Mapping[str, Any]
    doc: Mapping[str, Any]
    identity: StepIdentity | None
    step_key: str

    def once(self, suffix: str, thunk: Callable[[], Any]) -> Any:
        """``thunk()``, recorded once under the step execution's identity plus ``suffix``."""
        ...


def safe_call_id(call_id: str) -> str:
    """A call id as part of a record key: short, and only characters that are safe there."""
    if call_id.replace("_", "").replace("-", "").isalnum() and len(call_id) <= 64:
        return call_id
    return hashlib.sha256(call_id.encode()).hexdigest()[:32]


class _NotRecorded(Exception):
    """Raised inside a recording to learn that nothing was recorded (and record nothing)."""


def _not_recorded() -> Any:
    raise _NotRecorded


def recorded_call(loop: AgentRun, turn: int, call: ToolCall) -> dict[str, Any] | None:
    """The recorded outcome of a workflow call, or ``None`` when it has not run yet. (A
    recording whose action raises records nothing, so this only reads.)"""
    if loop.identity is None:
        return None
    try:
        outcome = loop.once(f"turn{turn}.call.{safe_call_id(call.id)}", _not_recorded)
    except _NotRecorded:
        return None
    return outcome if isinstance(outcome, dict) else None


def refuse_child(loop: AgentRun, tool: str, call: ToolCall) -> dict[str, Any] | None:
    """An outcome for a call that must not start a child: arguments that break the child's
    ``input_schema`` (``Relayflow.InvalidInput`` naming each violation, so the model can
    correct the call), or one nested too deep (runaway recursion through agents). ``None``
    when the child may start."""
    from relayflow.compiler.asl import MAX_SUB_WORKFLOW_DEPTH
    from relayflow.definition.input_schema import describe, input_violations

    workflow_id = workflow_tool_id(tool)
    schemas = loop.config.get("workflow_schemas") or {}
    violations = input_violations(schemas.get(workflow_id), child_input(call))
    if violations:
        return {
            "ok": False,
            "error": {
                "error": InvalidRunInput.error_name,
                "message": f"the arguments do not match workflow {workflow_id!r}'s "
                f"input_schema: {describe(violations)}",
                "violations": [v.to_dict() for v in violations],
            },
        }
    depth = (loop.doc.get("run") or {}).get("depth") or 0
    if isinstance(depth, int) and depth >= MAX_SUB_WORKFLOW_DEPTH:
        return {
            "ok": False,
            "error": {
                "error": SubWorkflowDepth.error_name,
                "message": f"{tool} would run deeper than {MAX_SUB_WORKFLOW_DEPTH} levels of "
                "nested workflows",
            },
        }
    return None


def child_run_id(loop: AgentRun, turn: int, call: ToolCall) -> str:
    """32 hex digits (an API run id) derived from the step execution, turn and call id."""
    run = loop.doc.get("run") or {}
    who = (
        loop.identity.key_data()
        if loop.identity is not None
        else {"run": run.get("id"), "step": loop.step_key}
    )
    text = json.dumps({"agent": who, "turn": turn, "call": call.id}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def child_pending(
    loop: AgentRun, turn: int, call: ToolCall, tool: str, approved_by: Any
) -> dict[str, Any]:
    """What the compiled child-run state reads from ``output.pending``."""
    workflow_id = workflow_tool_id(tool)
    assert workflow_id is not None
    pending: dict[str, Any] = {
        "workflow_id": workflow_id,
        "run_id": child_run_id(loop, turn, call),
        "input": child_input(call),
    }
    if approved_by is not None:
        pending["approved_by"] = approved_by
    return pending


def child_input(call: ToolCall) -> dict[str, Any]:
    """The child's trigger: the call's arguments, which must be an object (the tool's schema
    says so; anything else is wrapped as ``{"value": ...}``)."""
    return call.input if isinstance(call.input, dict) else {"value": call.input}


def child_outcome(pending: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """The call's outcome from the child-run state's result: ``{run_id, steps}`` when the
    child succeeded (the model gets each step's output), the caught ``{Error, Cause}`` when
    it failed (the model gets ``Relayflow.SubWorkflowFailed`` with the child's error)."""
    run_id = str(pending.get("run_id") or child.get("run_id") or "")
    steps = child.get("steps")
    if "Error" not in child and isinstance(steps, Mapping):
        outputs = {
            key: value.get("output")
            for key, value in steps.items()
            if isinstance(value, Mapping) and "output" in value
        }
        return {"ok": True, "output": {"run_id": run_id, "steps": outputs}, "run_id": run_id}
    error, cause = child.get("Error"), child.get("Cause")
    detail: dict[str, Any] = {"child_error": error, "child_cause": cause}
    if error == "States.TaskFailed" and isinstance(cause, str):
        # The Cause of a failed .sync:2 child is its DescribeExecution, as JSON.
        try:
            described = json.loads(cause)
        except ValueError:
            described = None
        if isinstance(described, dict):
            detail = {
                "child_status": described.get("Status"),
                "child_error": described.get("Error"),
                "child_cause": described.get("Cause"),
            }
    return {
        "ok": False,
        "error": {
            "error": SubWorkflowFailed.error_name,
            "message": f"workflow {pending.get('workflow_id')!r} (run {run_id}) did not succeed",
            "child_run_id": run_id,
            **detail,
        },
        "run_id": run_id,
    }
