"""Run a workflow on the local runtime and describe the run step by step.

This is the path ``relayflow run`` and ``make demo`` take: validate → compile → create the
state machine in moto → start an execution with the standard input document → wait → build a
step timeline from the execution history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from relayflow.compiler import CompiledWorkflow, compile_workflow
from relayflow.definition.models import Workflow
from relayflow.document import execution_input, new_run_id

if TYPE_CHECKING:
    from relayflow.local import ExecutionRecord, LocalRuntime
    from relayflow.local.resources import LocalResources

#: Terminal status of a run, in Relayflow's vocabulary.
RUN_STATUS = {
    "SUCCEEDED": "succeeded",
    "FAILED": "failed",
    "TIMED_OUT": "timed_out",
    "ABORTED": "aborted",
}


@dataclass
class StepRun:
    """One step's part in a run (several ASL states may serve one step)."""

    key: str
    type: str
    status: str
    attempts: int
    started_at: str | None
    ended_at: str | None
    duration_ms: float | None
    runner: str
    output: Any = None
    error: str | None = None
    cause: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RunResult:
    run_id: str
    workflow_id: str
    status: str
    output: Any
    error: str | None
    cause: str | None
    steps: list[StepRun] = field(default_factory=list)
    duration_ms: float | None = None
    lambda_invocations: int = 0

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "workflow_id": self.workflow_id,
            "status": self.status,
            "duration_ms": self.duration_ms,
            "lambda_invocations": self.lambda_invocations,
            "error": self.error,
            "cause": self.cause,
            "output": self.output,
            "steps": [s.to_dict() for s in self.steps],
        }


def _step_output(key: str, output: Any, in_item: bool) -> Any:
    """A step's output from its main state's output: the record it wrote at
    ``$.steps.<key>``, or (as the last state of a for_each item) the record itself."""
    if not isinstance(output, dict):
        return None
    record = (output.get("steps") or {}).get(key) if "steps" in output else None
    if record is None and in_item and "status" in output:
        record = output
    return record.get("output") if isinstance(record, dict) else None


def step_timeline(
    workflow: Workflow, compiled: CompiledWorkflow, record: ExecutionRecord
) -> list[StepRun]:
    """Fold the per-state timeline into one entry per step execution, in run order.

    A step's main state is named by its key; auxiliary states (``<key>.size``,
    ``<key>.route``, ``<key>.retry_wait`` …) add to that step's entry. Each for_each item is
    its own entry (``price[2]``). Entering a finished step's main state again starts a new
    entry (a cycle), except after the step's own linear-retry wait.
    """
    steps: list[StepRun] = []
    current: dict[tuple[str, int | None], StepRun] = {}
    main_done: set[int] = set()
    retrying: set[int] = set()
    for state in record.states:
        key = state.name.split(".", 1)[0]
        if key not in workflow.steps:
            continue
        is_main = state.name == key
        slot = (key, state.iteration)
        entry = current.get(slot)
        if entry is None or (is_main and id(entry) in main_done and id(entry) not in retrying):
            label = key if state.iteration is None else f"{key}[{state.iteration}]"
            entry = StepRun(
                key=label,
                type=workflow.steps[key].type,
                status="running",
                attempts=0,
                started_at=_iso(state.started_at),
                ended_at=None,
                duration_ms=None,
                runner=compiled.step_runners.get(key, "native"),
            )
            steps.append(entry)
            current[slot] = entry
        entry.ended_at = _iso(state.ended_at) or entry.ended_at
        if entry.started_at and entry.ended_at:
            entry.duration_ms = round(_elapsed_ms(entry.started_at, entry.ended_at), 3)
        if is_main:
            retrying.discard(id(entry))
            main_done.add(id(entry))
            entry.attempts += max(state.attempts, 1)
            entry.status = state.status
            entry.error, entry.cause = state.error, state.cause
            entry.output = _step_output(key, state.output, state.iteration is not None)
        elif state.name.endswith(".retry_wait"):
            retrying.add(id(entry))
            entry.status = "retrying"
        elif state.status == "failed" or state.type == "Fail":
            entry.status = "failed"
            entry.error, entry.cause = state.error, state.cause
    return steps


def _iso(value: Any) -> str | None:
    return value.isoformat() if hasattr(value, "isoformat") else value


def _elapsed_ms(start: str, end: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds() * 1000


def run_workflow(
    workflow: Workflow,
    trigger: Any,
    *,
    runtime: LocalRuntime | None = None,
    time_scale: float = 0.001,
    run_id: str | None = None,
    timeout: float = 300,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    resources: LocalResources | None = None,
) -> RunResult:
    """Compile and run ``workflow`` locally. Pass a ``runtime`` to reuse one (tests do);
    otherwise a runtime is started for this run and stopped after it. ``resources`` are
    created in moto first (tables, queues, buses … that the workflow's tools use)."""
    from relayflow.local import LocalRuntime
    from relayflow.local.resources import provision

    compiled = compile_workflow(workflow)
    run_id = run_id or new_run_id()
    document = execution_input(workflow.id, trigger, run_id=run_id)
    if runtime is None:
        with LocalRuntime(time_scale=time_scale) as owned:
            if resources is not None:
                provision(resources)
            return _run(owned, workflow, compiled, document, run_id, timeout, on_event)
    if resources is not None:
        provision(resources)
    return _run(runtime, workflow, compiled, document, run_id, timeout, on_event)


def _run(
    runtime: LocalRuntime,
    workflow: Workflow,
    compiled: CompiledWorkflow,
    document: dict[str, Any],
    run_id: str,
    timeout: float,
    on_event: Callable[[dict[str, Any]], None] | None,
) -> RunResult:
    before = len(runtime.invocations)
    record = runtime.run(
        f"relayflow-{workflow.id}",
        compiled.asl,
        document,
        execution_name=run_id,
        timeout=timeout,
        on_event=on_event,
    )
    duration = None
    if record.started_at and record.stopped_at:
        duration = (record.stopped_at - record.started_at).total_seconds() * 1000
    return RunResult(
        run_id=run_id,
        workflow_id=workflow.id,
        status=RUN_STATUS.get(record.status, record.status.lower()),
        output=record.output,
        error=record.error,
        cause=record.cause,
        steps=step_timeline(workflow, compiled, record),
        duration_ms=duration,
        lambda_invocations=len(runtime.invocations) - before,
    )
