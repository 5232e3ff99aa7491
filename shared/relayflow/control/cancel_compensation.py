"""Compensation of a saga run that was cancelled or timed out.

Step Functions stops such a run (``StopExecution``, or the machine's ``TimeoutSeconds``)
without running any ``Catch``, so the walk compiled into the run's machine never starts.
Instead:

1. **Publish.** When a version whose machine has a compensation walk is published, its
   *compensation variant* (:mod:`relayflow.compiler.compensation_variant`) is published too,
   on a Standard sibling machine ``<workflow_id>.saga`` (:func:`compensation_machine_name`),
   and its version ARN is recorded on the version item (``compensation_version_arn``).
2. **Start.** When the recorder records a run's end as ``aborted`` or ``timed_out``, and its
   version has a variant, it reads the run's last state document from the execution history
   (the newest state input or output holding ``$.saga``) and, when that list holds a step to
   undo, starts the variant with ``{run, trigger, saga, error}`` (``error`` is
   ``Relayflow.Cancelled`` or ``States.Timeout``). The execution is named after the run's
   (``<execution name>_compensate``), so a repeated or retried recorder delivery never starts
   two: Step Functions starts a name once (a repeat gets the same execution, or is refused
   once it ended).
3. **Record.** The variant's own end comes back to the recorder (its input carries the run's
   ``$.run``), which writes the run's ``compensation`` record and turns its ``outcome`` into
   ``compensated`` / ``partially_compensated``, once. The run's status stays ``aborted`` /
   ``timed_out``.

Each compensation keeps its step key ``<key>.compensate``, hence its idempotency record: a
compensation that already ran for the run (a cancel that arrived while the run's own walk was
under way) answers from its record instead of acting again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from relayflow.causes import public_cause
from relayflow.control.compensation import PARTIALLY_COMPENSATED, compensation_record
from relayflow.executions import stepfunctions as sfn_api
from relayflow.observability import logger

if TYPE_CHECKING:
    from relayflow.control.ports import Ports
    from relayflow.dal import Dal, RunItem
    from relayflow.definition.models import Workflow

#: The sibling machine of a workflow that holds its compensation variants.
MACHINE_SUFFIX = ".saga"
#: The compensation execution of a run is named ``<the run's execution name>`` + this.
EXECUTION_SUFFIX = "_compensate"
#: The error a cancelled run's compensation is started with (timeouts: ``States.Timeout``).
CANCELLED = "Relayflow.Cancelled"
TIMEOUT = "States.Timeout"
#: Run statuses whose end starts the variant (a failed run compensated in its own machine).
STOPPED_STATUSES = ("aborted", "timed_out")
#: The ``step`` of the error recorded when the compensation execution itself did not succeed.
WALK_STEP = "_saga"


def compensation_machine_name(stage: str, tenant: str, workflow_id: str) -> str:
    """``<the workflow's machine name>.saga`` (workflow ids hold no ``.``, so it names no
    workflow's machine)."""
    from relayflow.executions.stepfunctions import state_machine_name

    return state_machine_name(stage, tenant, f"{workflow_id}{MACHINE_SUFFIX}")


def publish_variant(
    ports: Ports,
    tenant: str,
    machine_arn: str,
    workflow: Workflow,
    asl: dict[str, Any],
    version: int,
) -> str | None:
    """Publish the compensation variant of ``asl`` (version ``version`` of ``workflow``, whose
    own machine is ``machine_arn``) on the workflow's sibling machine; returns its version
    ARN, ``None`` when ``asl`` has no walk. A variant that fails the compiler's check is a
    compiler bug (500 ``compiler_bug``; over the size quota 422 ``invalid_definition``), never a
    deployed machine."""
    from relayflow.compiler.compensation_variant import compensation_variant
    from relayflow.control.compiled import check_compiled
    from relayflow.control.errors import Unprocessable
    from relayflow.control.machine_config import machine_config
    from relayflow.settings import get_settings

    variant = compensation_variant(asl)
    if variant is None:
        return None
    check_compiled(variant, what="the compensation variant")
    definition = json.dumps(variant, separators=(",", ":"))
    config = machine_config(tenant, workflow)
    # The variant's executions are not runs: they publish no step events of their own.
    config["step_events"] = False
    name = compensation_machine_name(get_settings().stage, tenant, workflow.id)
    description = f"Relayflow {tenant}/{workflow.id} version {version} (compensation)"
    # The sibling lives beside the workflow's machine: same account, region and prefix.
    arn = f"{machine_arn.rsplit(':', 1)[0]}:{name}"
    try:
        try:
            return ports.machines.update(arn, definition, **config, description=description)
        except sfn_api.ResourceMissing:  # the first saga version of this workflow
            tags = {"relayflow:tenant": tenant, "relayflow:workflow": workflow.id}
            _, version_arn = ports.machines.create(
                name, definition, **config, description=description, tags=tags
            )
            return version_arn
    except sfn_api.DefinitionRejected as exc:
        raise Unprocessable(f"Step Functions refused the compensation variant: {exc}") from exc


def is_compensation_execution(name: str) -> bool:
    """Whether the execution ``name`` is a run's compensation (see the module docstring)."""
    return name.endswith(EXECUTION_SUFFIX)


def last_saga_document(history: Iterable[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The newest state document of an execution's history that carries ``$.saga`` (a
    top-level state's input or output); ``None`` when none does."""
    for event in reversed(list(history or [])):
        for field, key in (
            ("stateExitedEventDetails", "output"),
            ("stateEnteredEventDetails", "input"),
        ):
            details = event.get(field)
            text = details.get(key) if isinstance(details, dict) else None
            if not isinstance(text, str) or '"saga"' not in text:
                continue
            try:
                document = json.loads(text)
            except ValueError:
                continue
            if (
                isinstance(document, dict)
                and isinstance(document.get("saga"), dict)
                and isinstance(document.get("run"), dict)
            ):
                return document
    return None


def compensation_input(
    history: Iterable[dict[str, Any]] | None, error: str, cause: str | None
) -> dict[str, Any] | None:
    """The variant's input for a run stopped with ``error`` (``Relayflow.Cancelled`` or
    ``States.Timeout``): ``{run, trigger, saga, error}`` from the run's last document in
    ``history``; ``None`` when nothing that declares a compensation had succeeded, or (logged)
    when no document holds ``$.saga``."""
    events = list(history or [])
    document = last_saga_document(events)
    if document is None:
        # Every run that got past _saga.init has one: the history was not read, or its
        # documents were truncated (over the event size limit).
        logger.warning(
            "no state document with $.saga in the history: the run is not compensated",
            extra={"history_events": len(events)},
        )
        return None
    saga = document["saga"]
    todo = saga.get("todo")
    if not isinstance(todo, dict) or "key" not in todo:
        return None  # nothing had succeeded that declares a compensation
    return {
        "run": document["run"],
        "trigger": document.get("trigger"),
        "saga": saga,
        "error": {"Error": error, "Cause": cause or ""},
    }


def compensates_on_stop(dal: Dal, run: RunItem) -> bool:
    """Whether a stop (cancel, ``cancel_on``, run timeout) of ``run`` may start its version's
    compensation variant: :func:`start_compensation` then needs the execution's history, and
    a stop recorded without it would leave the saga's steps undone for good."""
    if run.engine == "express" or run.version is None:
        return False
    version = dal.get_version(run.tenant, run.workflow_id, run.version)
    return bool(version is not None and version.compensation_version_arn)


def start_compensation(
    ports: Ports,
    run: RunItem,
    execution_name: str,
    history: list[dict[str, Any]] | None,
) -> str | None:
    """Start the compensation of ``run`` (just recorded ``aborted`` or ``timed_out``) when its
    version has a variant and its last document holds a step to undo; returns the execution
    ARN, or ``None`` when there is nothing to do. Starting twice is harmless (the second start
    of the same name is refused and ignored); any other Step Functions error is raised, so the
    recorder's delivery is retried."""
    if run.status not in STOPPED_STATUSES or run.version is None:
        return None
    if run.engine == "express":
        # Cannot be stopped, keeps no history, and a saga that can time out is Standard
        # (relayflow.compiler.engine): an Express end has nothing to compensate here.
        return None
    version = ports.dal.get_version(run.tenant, run.workflow_id, run.version)
    target = version.compensation_version_arn if version is not None else None
    if not target:
        return None
    payload = compensation_input(
        history, CANCELLED if run.status == "aborted" else TIMEOUT, run.cause
    )
    if payload is None:
        return None
    name = f"{execution_name}{EXECUTION_SUFFIX}"
    try:
        arn = ports.machines.start(target, name, json.dumps(payload, separators=(",", ":")))
    except sfn_api.ExecutionExists:
        logger.info("compensation already started", extra={"execution": name})
        return None
    logger.info(
        "compensation started", extra={"execution": name, "error": payload["error"]["Error"]}
    )
    return arn


def record_compensation_end(
    dal: Dal,
    tenant: str,
    run_id: str,
    *,
    execution_name: str,
    status: str,
    output: str | None,
    error: str | None,
    cause: str | None,
) -> bool:
    """Write the run's ``compensation`` and its ``outcome`` from the end of its compensation
    execution (``status``: the execution's, e.g. ``SUCCEEDED``); once: returns whether this
    call wrote it. An execution that did not succeed (stopped, timed out, broke) is recorded
    as ``partially_compensated`` with its error: what it undid before is not known."""
    from relayflow.control.outcome import outcome_of

    run = dal.get_run(tenant, run_id)
    if run is None or run.status not in STOPPED_STATUSES or not run.execution_arn:
        return False
    if f"{run.execution_arn.rsplit(':', 1)[-1]}{EXECUTION_SUFFIX}" != execution_name:
        return False  # the compensation of an execution the run has moved on from
    record: dict[str, Any] | None
    if status == "SUCCEEDED":
        try:
            done = json.loads(output or "{}").get("done")
        except (ValueError, AttributeError):
            done = None
        record = compensation_record(done)
    else:
        record = {
            "status": PARTIALLY_COMPENSATED,
            "steps": [],
            "errors": [
                {"step": WALK_STEP, "error": error or status, "cause": public_cause(cause)},
            ],
        }
    if record is None:
        return False
    outcome = outcome_of(run.status, fallbacks_used=False, compensation=record["status"])
    written = dal.update_run(
        tenant,
        run_id,
        {"compensation": record, "outcome": outcome},
        if_status=STOPPED_STATUSES,
        unless_set="compensation",
    )
    if written is not None:
        logger.info("compensation recorded", extra={"compensation": record["status"]})
    return written is not None
