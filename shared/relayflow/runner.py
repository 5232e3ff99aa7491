"""Run a workflow on the local runtime and describe the run step by step.

This is the path ``relayflow run`` and ``make demo`` take: validate → compile → create the
state machine in moto → start an execution with the standard input document → wait → build a
step timeline from the execution history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from relayflow.causes import public_cause, public_document, run_error_name
from relayflow.compiler import CompiledWorkflow, compile_workflow
from relayflow.compiler.asl import LIVE_ALIAS
from relayflow.compiler.check import assert_valid_machine
from relayflow.compiler.options import local_state_machine_name
from relayflow.compiler.quotas import assert_within_size
from relayflow.control.compensation import split_cause
from relayflow.control.timeline import StepRun, fold_steps, refused_attempts
from relayflow.cost.counts import count_history
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
#: The status of a run stopped at a wait only outside input could end (:class:`RunWaiting`).
WAITING = "waiting"


class RunWaiting(Exception):
    """Raised by an ``on_event`` callback at a wait the run cannot get past on its own
    (``relayflow run``'s :mod:`relayflow.cli.run_waits`): :func:`run_workflow` stops the
    execution and returns a run with status ``waiting`` and ``waiting`` set to
    :attr:`waiting` (``{step, type, waits_for, message, hint}``)."""

    def __init__(self, waiting: dict[str, Any]) -> None:
        super().__init__(waiting.get("message", "the run waits"))
        self.waiting = waiting


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
    #: States entered plus Task retries of the run's own execution (what Standard bills;
    #: docs/cost.md); a sub_workflow child's are its own.
    transitions: int = 0
    #: Saga compensation of a failed run: {status, steps, errors} (control/compensation.py).
    compensation: dict[str, Any] | None = None
    #: The wait a run stopped at (status ``waiting``, :class:`RunWaiting`), else ``None``.
    waiting: dict[str, Any] | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    @property
    def outcome(self) -> str | None:
        """The run's verdict (:func:`relayflow.control.outcome.outcome_of`)."""
        from relayflow.control.outcome import compensation_status, fallbacks_used, outcome_of

        if self.status not in RUN_STATUS.values():
            return None
        return outcome_of(
            self.status,
            fallbacks_used=fallbacks_used(self.output),
            compensation=compensation_status(self.output)
            or compensation_status({"compensation": self.compensation}),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "workflow_id": self.workflow_id,
            "status": self.status,
            "outcome": self.outcome,
            "duration_ms": self.duration_ms,
            "lambda_invocations": self.lambda_invocations,
            "transitions": self.transitions,
            "error": self.error,
            "cause": self.cause,
            "output": self.output,
            **({"compensation": self.compensation} if self.compensation else {}),
            **({"waiting": self.waiting} if self.waiting else {}),
            "steps": [s.to_dict() for s in self.steps],
        }


def compile_checked(
    workflow: Workflow, workflows: Mapping[str, Workflow] | None = None
) -> CompiledWorkflow:
    """Compile ``workflow`` and check the machine (:mod:`relayflow.compiler.check`) before the
    local runtime sees it. Raises ``DefinitionError`` (rule ``compiled-size``) for a machine
    over the definition size quota and ``CompiledMachineInvalid`` (a compiler bug) for any
    other machine Step Functions would refuse. ``workflows`` (by id) are the children
    whose ``input_schema`` its agents' workflow tools offer as their arguments and its
    sub_workflow steps check their child's input against."""
    from relayflow.compiler import CompileOptions
    from relayflow.settings import get_settings
    from relayflow.validation.children import child_input_schemas, sub_workflow_input_schemas

    children = workflows or {}
    # The bucket the local runtime creates: distributed for_each steps write results there.
    compiled = compile_workflow(
        workflow,
        CompileOptions(
            payload_bucket=get_settings().payload_bucket,
            workflow_input_schemas=child_input_schemas(workflow, children.get),
            # Locally every child runs the definition given (a pinned version is not kept).
            sub_workflow_input_schemas=sub_workflow_input_schemas(
                workflow, lambda workflow_id, _version: children.get(workflow_id)
            ),
        ),
    )
    # The children's input schemas add to the size validation measured.
    assert_within_size(compiled.asl)
    assert_valid_machine(compiled.asl)
    return compiled


def step_timeline(
    workflow: Workflow, compiled: CompiledWorkflow, record: ExecutionRecord
) -> list[StepRun]:
    """Fold the per-state timeline into one entry per step execution, in run order (see
    :func:`relayflow.control.timeline.fold_steps`, which the control plane shares)."""
    step_types = {key: step.type for key, step in workflow.steps.items()}
    return fold_steps(
        step_types, compiled.step_runners, record.states, refused_attempts(record.events)
    )


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
    workflows: Mapping[str, Workflow] | None = None,
    dry_run: bool = False,
    step: Callable[[str], bool] | None = None,
) -> RunResult:
    """Compile and run ``workflow`` locally. Pass a ``runtime`` to reuse one (tests do);
    otherwise a runtime is started for this run and stopped after it. ``resources`` are
    created in moto first (tables, queues, buses … that the workflow's tools use).
    ``workflows`` (by id) are the ones its sub_workflow steps may start: each, and the
    workflow itself when it has sub_workflow steps, is published as a state machine version
    with the ``live`` alias pointing at it (see :func:`publish_local`). A compiled machine
    that fails :mod:`relayflow.compiler.check` raises ``CompiledMachineInvalid`` before any
    runtime starts. A ``dry_run`` starts the run with ``run.dry_run`` set: acting steps record
    the call they would make instead (:mod:`relayflow.steps.dry_run`). With ``step`` the run
    steps through (the step-through variant, :mod:`relayflow.compiler.debug`): before each
    top-level step ``step(<step key>)`` is called, and the step starts when it returns;
    once it returns ``False`` the run goes on to its end without asking again. A ``trigger``
    that breaks the workflow's ``input_schema`` raises ``InvalidRunInput`` before anything
    runs."""
    from relayflow.definition.input_schema import describe, input_violations
    from relayflow.errors import InvalidRunInput
    from relayflow.local import LocalRuntime
    from relayflow.local.resources import provision
    from relayflow.validation.children import child_workflows

    violations = input_violations(workflow.input_schema, trigger)
    if violations:
        raise InvalidRunInput(
            f"the trigger does not match the input_schema: {describe(violations)}"
        )
    compiled = compile_checked(workflow, workflows)
    run_id = run_id or new_run_id()
    document = execution_input(workflow.id, trigger, run_id=run_id, dry_run=dry_run)
    published = dict(workflows or {})
    if child_workflows(workflow):
        published[workflow.id] = workflow
    if runtime is None:
        with LocalRuntime(time_scale=time_scale) as owned:
            if resources is not None:
                provision(resources)
            for item in published.values():
                publish_local(owned, item, published)
            return _run(owned, workflow, compiled, document, run_id, timeout, on_event, step)
    if resources is not None:
        provision(resources)
    for item in published.values():
        publish_local(runtime, item, published)
    return _run(runtime, workflow, compiled, document, run_id, timeout, on_event, step)


def _step_through(
    runtime: LocalRuntime,
    workflow: Workflow,
    compiled: CompiledWorkflow,
    document: dict[str, Any],
    run_id: str,
    timeout: float,
    step: Callable[[str], bool],
) -> ExecutionRecord:
    """Run the step-through variant, asking ``step`` before releasing each gate."""
    import time

    from relayflow.compiler import CompileOptions
    from relayflow.compiler.debug import step_through_variant
    from relayflow.control.waits import WaitService
    from relayflow.dal.waits import WaitDal
    from relayflow.steps.step_gate import GATE_LABEL

    variant = step_through_variant(compiled.asl, workflow.steps, CompileOptions().arn("waitpoint"))
    assert_within_size(variant, what="the step-through variant (a gate before every step)")
    assert_valid_machine(variant)
    arn = runtime.create_state_machine(local_state_machine_name(workflow.id), variant)
    execution_arn = runtime.start_execution(arn, document, name=run_id)
    tenant = str(document["run"]["tenant"])
    asking, released = True, set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and runtime.describe(execution_arn).status == "RUNNING":
        for gate in WaitDal().list_run_waitpoints(tenant, run_id):
            if gate.label != GATE_LABEL or gate.status != "pending":
                continue
            if gate.waitpoint_id in released:
                continue
            asking = asking and step(gate.step)
            WaitService().complete_waitpoint(tenant, gate.waitpoint_id, None)
            released.add(gate.waitpoint_id)
        time.sleep(0.02)
    return runtime.wait(execution_arn, timeout=max(deadline - time.monotonic(), 1))


def run_workflow_within(
    seconds: float, workflow: Workflow, trigger: Any, **options: Any
) -> RunResult:
    """:func:`run_workflow` with a budget of ``seconds`` for all of it: starting the local
    runtime, the run, and stopping the runtime. The run waits for what is left of the budget
    once the runtime is up; whatever is still going when the budget is spent is abandoned in
    a daemon thread and :class:`TimeoutError` is raised at once (``relayflow run
    --timeout``: a slow start on a loaded machine must not stretch the caller's limit)."""
    import threading
    import time

    deadline = time.monotonic() + seconds
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = run_workflow(
                workflow, trigger, timeout=max(0.0, deadline - time.monotonic()), **options
            )
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="relayflow-run", daemon=True).start()
    if not done.wait(max(0.0, deadline - time.monotonic())):
        raise TimeoutError(f"the run did not finish within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    result: RunResult = outcome["result"]
    return result


def publish_local(
    runtime: LocalRuntime, workflow: Workflow, workflows: Mapping[str, Workflow] | None = None
) -> str:
    """Create or update ``workflow``'s local state machine, publish its definition as a
    version (an unchanged definition keeps its version) and point the ``live`` alias at it;
    returns the version ARN. A sub_workflow step without a pinned version starts ``live``.
    ``workflows`` (by id) resolve its agents' workflow tools' schemas."""
    import json

    from relayflow.local.runtime import LOCAL_ROLE_ARN

    definition = json.dumps(compile_checked(workflow, workflows).asl)
    name = local_state_machine_name(workflow.id)
    sfn = runtime.sfn_client
    arn = f"arn:aws:states:{runtime.region}:{runtime.account}:stateMachine:{name}"
    existing = {m["stateMachineArn"] for m in sfn.list_state_machines()["stateMachines"]}
    if arn in existing:
        response = sfn.update_state_machine(
            stateMachineArn=arn, definition=definition, roleArn=LOCAL_ROLE_ARN, publish=True
        )
    else:
        response = sfn.create_state_machine(
            name=name, definition=definition, roleArn=LOCAL_ROLE_ARN, publish=True
        )
    version_arn = str(response["stateMachineVersionArn"])
    routing = [{"stateMachineVersionArn": version_arn, "weight": 100}]
    aliases = sfn.list_state_machine_aliases(stateMachineArn=arn)["stateMachineAliases"]
    if any(a["stateMachineAliasArn"] == f"{arn}:{LIVE_ALIAS}" for a in aliases):
        sfn.update_state_machine_alias(
            stateMachineAliasArn=f"{arn}:{LIVE_ALIAS}", routingConfiguration=routing
        )
    else:
        sfn.create_state_machine_alias(name=LIVE_ALIAS, routingConfiguration=routing)
    return version_arn


def _compensate_timed_out(
    runtime: LocalRuntime,
    workflow: Workflow,
    compiled: CompiledWorkflow,
    record: ExecutionRecord,
    timeout: float,
) -> dict[str, Any] | None:
    """Compensate a run that reached its ``run_timeout_seconds`` as the recorder does on AWS
    (:mod:`relayflow.control.cancel_compensation`): the compensation variant, started with the
    run's last ``$.saga``. Its ``compensation`` record, or ``None`` when nothing was undone."""
    from relayflow.compiler.compensation_variant import compensation_variant
    from relayflow.control.cancel_compensation import (
        EXECUTION_SUFFIX,
        MACHINE_SUFFIX,
        TIMEOUT,
        compensation_input,
    )
    from relayflow.control.compensation import compensation_record

    variant = compensation_variant(compiled.asl)
    payload = compensation_input(record.events, TIMEOUT, record.cause) if variant else None
    if variant is None or payload is None:
        return None
    ended = runtime.run(
        local_state_machine_name(f"{workflow.id}{MACHINE_SUFFIX}"),
        variant,
        payload,
        execution_name=f"{record.name}{EXECUTION_SUFFIX}",
        timeout=timeout,
    )
    output = ended.output if isinstance(ended.output, dict) else {}
    return compensation_record(output.get("done")) if ended.succeeded else None


def _run(
    runtime: LocalRuntime,
    workflow: Workflow,
    compiled: CompiledWorkflow,
    document: dict[str, Any],
    run_id: str,
    timeout: float,
    on_event: Callable[[dict[str, Any]], None] | None,
    step: Callable[[str], bool] | None = None,
) -> RunResult:
    before = len(runtime.invocations)
    waiting: dict[str, Any] | None = None
    if step is None:
        arn = runtime.create_state_machine(local_state_machine_name(workflow.id), compiled.asl)
        execution_arn = runtime.start_execution(arn, document, name=run_id)
        try:
            record = runtime.wait(execution_arn, timeout=timeout, on_event=on_event)
        except RunWaiting as stopped:
            # Nothing here can end the wait: the run as it stands, then stopped.
            waiting, record = stopped.waiting, runtime.describe(execution_arn)
            runtime.stop_execution(
                execution_arn, error="Relayflow.Waiting", cause=stopped.waiting["message"]
            )
    else:
        record = _step_through(runtime, workflow, compiled, document, run_id, timeout, step)
    duration = None
    if record.started_at and record.stopped_at:
        duration = (record.stopped_at - record.started_at).total_seconds() * 1000
    # A run that compensated carries its compensation report in the cause.
    cause, compensation = split_cause(record.cause)
    if record.status == "TIMED_OUT":
        compensation = _compensate_timed_out(runtime, workflow, compiled, record, timeout)
    steps = step_timeline(workflow, compiled, record)
    for entry in steps:
        if waiting and entry.status == "running" and entry.key == waiting["step"]:
            entry.status = WAITING
    return RunResult(
        run_id=run_id,
        workflow_id=workflow.id,
        status=WAITING if waiting else RUN_STATUS.get(record.status, record.status.lower()),
        output=public_document(record.output),
        error=None if waiting else run_error_name(record.status, record.error),
        cause=public_cause(cause),
        steps=steps,
        duration_ms=duration,
        lambda_invocations=len(runtime.invocations) - before,
        transitions=count_history(record.events).transitions,
        compensation=compensation,
        waiting=waiting,
    )
