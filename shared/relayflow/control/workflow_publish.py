"""Publishing a workflow definition (``PUT /workflows/{id}``).

Versions: a PUT publishes a state machine version and records it; new runs start on the
*version ARN* of the live version read with the workflow item (the ``live`` alias is kept
pointing at the same version for callers outside Relayflow). A run therefore records exactly
the version it runs, even while a PUT or a rollback races with its start.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from relayflow.control.cancel_compensation import publish_variant
from relayflow.control.compiled import check_compiled, check_quotas
from relayflow.control.engines import check_machine_type, compile_options
from relayflow.control.errors import Conflict, InvalidDefinition, PayloadTooLarge, Unprocessable
from relayflow.control.limits import MAX_DEFINITION_BYTES, check_tenant
from relayflow.control.machine_config import machine_config
from relayflow.control.models import PutWorkflowResult
from relayflow.control.ports import Ports
from relayflow.control.records import live_engine_of, to_json
from relayflow.control.run_input import with_child_schemas
from relayflow.control.times import now_iso
from relayflow.control.workflow_triggers import CatchUp, check_triggers, point_alias, sync_triggers
from relayflow.dal import ConditionFailed, Dal, VersionItem, WorkflowItem
from relayflow.engine import ENGINE_VERSION
from relayflow.executions import stepfunctions as sfn_api
from relayflow.settings import get_settings

#: Parts of a definition the compiled ASL does not hold (read from the version instead).
OUTSIDE_ASL = (
    "triggers",
    "breaker",
    "notifications",
    # Run admission, cancel_on (docs/flow-control.md) and step events act outside it too.
    "singleton",
    "concurrency",
    "debounce",
    "batch",
    "cancel_on",
    "events",
    "input_schema",  # checked by the control plane at each start (control/run_input.py)
)


def subscriptions(workflow: Any) -> list[Any]:
    """What trigger sync registers for a workflow: its triggers, then the subscriptions of
    its ``cancel_on`` and ``wait_for_event`` steps (docs/flow-control.md)."""
    from relayflow.definition.admission import subscriptions_of

    return [*workflow.triggers, *subscriptions_of(workflow)]


def same_triggers(stored_definition: str, definition_json: str) -> bool:
    """A definition whose parts outside the compiled ASL (``OUTSIDE_ASL``) changed is a new
    version even when its state machine is not."""
    stored, new = json.loads(stored_definition), json.loads(definition_json)
    return all(stored.get(part) == new.get(part) for part in OUTSIDE_ASL)


def document_size_warnings(workflow: Any) -> list[str]:
    """A saved workflow's warnings: ``document-size`` (the live state document can pass Step
    Functions' 256 KB) and the definition's own (:mod:`relayflow.validation.advisories`)."""
    from relayflow.compiler.docsize import document_size_problems
    from relayflow.validation.advisories import definition_warnings

    found = definition_warnings(workflow) + document_size_problems(workflow)
    return [f"{p.path}: {p.message} [{p.rule}]" for p in found]


def put_workflow(
    ports: Ports,
    tenant: str,
    workflow_id: str,
    definition: Mapping[str, Any],
    *,
    catch_up: CatchUp,
) -> PutWorkflowResult:
    """Validate and compile ``definition`` and make it the live version.

    A definition whose compiled state machine equals the latest version's makes that
    version live again (and re-enables a deleted workflow) without publishing a new one.
    Otherwise the state machine is created or updated, a version published and recorded,
    and the ``live`` alias pointed at it. Raises :class:`InvalidDefinition` with every
    problem, :class:`Unprocessable` when the definition's id is not ``workflow_id``,
    :class:`PayloadTooLarge` over :data:`MAX_DEFINITION_BYTES`, :class:`Conflict` when a
    concurrent PUT won.
    """
    from relayflow.compiler import compile_workflow
    from relayflow.validation import validate_data

    check_tenant(tenant)
    definition_json = to_json(definition) if isinstance(definition, Mapping) else None
    if definition_json is not None and len(definition_json.encode()) > MAX_DEFINITION_BYTES:
        raise PayloadTooLarge(f"a definition may hold at most {MAX_DEFINITION_BYTES} bytes as JSON")
    workflow, problems = validate_data(
        json.loads(definition_json) if definition_json is not None else definition
    )
    if workflow is not None:
        from relayflow.tools.secrets import tenant_secret_problems

        problems = [*problems, *tenant_secret_problems(workflow, tenant)]
    if problems or workflow is None:
        raise InvalidDefinition.from_problems(problems)
    if workflow.id != workflow_id:
        raise Unprocessable(
            f"the definition's id {workflow.id!r} differs from the workflow id "
            f"{workflow_id!r} it is stored under",
            {"path": "id", "expected": workflow_id, "found": workflow.id},
        )
    assert definition_json is not None
    settings = get_settings()
    dal = ports.dal
    _check_sub_workflows(dal, tenant, workflow)
    head = dal.get_workflow(tenant, workflow_id)
    options = with_child_schemas(compile_options(tenant, head), dal, tenant, workflow)
    compiled = compile_workflow(workflow, options)
    engine = check_machine_type(workflow, compiled, head)
    # What validation could not see: child schemas, the engine's wrapper, the machine type.
    check_quotas(workflow, compiled.asl, engine)
    check_compiled(compiled.asl)
    asl_json = json.dumps(compiled.asl, separators=(",", ":"))
    asl_sha256 = hashlib.sha256(asl_json.encode()).hexdigest()
    now = now_iso()
    trigger_plan = check_triggers(dal, tenant, workflow_id, subscriptions(workflow))

    if head is not None:
        latest = dal.get_version(tenant, workflow_id, head.latest_version)
        if (
            latest is not None
            and latest.asl_sha256 == asl_sha256
            and same_triggers(latest.definition, definition_json)
        ):
            result = _make_live_again(ports, head, latest, workflow.name, now)
            sync_triggers(
                dal, tenant, workflow_id, subscriptions(workflow), enabled=True, catch_up=catch_up
            )
            return result

    version = 1 if head is None else head.latest_version + 1
    description = f"Relayflow {tenant}/{workflow_id} version {version}"
    try:
        if head is None:
            machine_arn, version_arn = ports.machines.create(
                sfn_api.state_machine_name(settings.stage, tenant, workflow_id),
                asl_json,
                **machine_config(tenant, workflow),
                description=description,
                tags={"relayflow:tenant": tenant, "relayflow:workflow": workflow_id},
                express=engine == "express",
            )
        else:
            machine_arn = head.state_machine_arn
            version_arn = ports.machines.update(
                machine_arn,
                asl_json,
                **machine_config(tenant, workflow),
                description=description,
                express=engine == "express",
            )
    except sfn_api.DefinitionRejected as exc:
        raise Unprocessable(f"Step Functions refused the compiled definition: {exc}") from exc
    variant_arn = publish_variant(ports, tenant, machine_arn, workflow, compiled.asl, version)
    item = VersionItem(
        tenant=tenant,
        workflow_id=workflow_id,
        version=version,
        definition=definition_json,
        asl_sha256=asl_sha256,
        state_machine_version_arn=version_arn,
        created_at=now,
        warnings=[*trigger_plan.skipped, *document_size_warnings(workflow)],
        step_types={key: step.type for key, step in workflow.steps.items()},
        step_runners=dict(compiled.step_runners),
        engine_version=ENGINE_VERSION,
        engine=engine,
        engine_reason=compiled.engine.reason if compiled.engine else None,
        compensation_version_arn=variant_arn,
    )
    new_head = WorkflowItem(
        workflow_id=workflow_id,
        tenant=tenant,
        name=workflow.name,
        enabled=True,
        live_version=version,
        latest_version=version,
        live_version_arn=version_arn,
        state_machine_arn=machine_arn,
        alias_arn=head.alias_arn if head else None,
        created_at=head.created_at if head else now,
        updated_at=now,
        live_engine_version=ENGINE_VERSION,
        engine=engine,
    )
    try:
        dal.save_workflow(
            new_head, expected_latest=head.latest_version if head else None, version=item
        )
    except ConditionFailed as exc:
        raise Conflict(
            f"workflow {workflow_id} was changed by another request; read it and retry"
        ) from exc
    point_alias(ports, new_head)
    sync_triggers(
        dal, tenant, workflow_id, subscriptions(workflow), enabled=True, catch_up=catch_up
    )
    return PutWorkflowResult(
        workflow_id=workflow_id,
        version=version,
        live_version=version,
        created=head is None,
        warnings=item.warnings,
    )


def _check_sub_workflows(dal: Dal, tenant: str, workflow: Any) -> None:
    """Every workflow (and pinned version) a sub_workflow step or an agent's workflow tool
    starts must be the tenant's; a workflow may start itself (the compiled depth guard
    bounds recursion). Raises :class:`InvalidDefinition` naming each missing one."""
    from relayflow.definition.problems import Problem
    from relayflow.validation.children import child_workflows

    problems = []
    for child in child_workflows(workflow):
        # A templated target is resolved at run time (Relayflow.WorkflowNotFound).
        if child.workflow_id == workflow.id or child.templated:
            continue
        if dal.get_workflow(tenant, child.workflow_id) is None:
            problems.append(
                Problem(
                    None,
                    child.path,
                    "unknown-workflow",
                    f"workflow '{child.workflow_id}' does not exist; create it first",
                )
            )
        elif (
            child.version is not None
            and dal.get_version(tenant, child.workflow_id, child.version) is None
        ):
            problems.append(
                Problem(
                    None,
                    f"steps.{child.step_key}.version",
                    "unknown-workflow-version",
                    f"workflow '{child.workflow_id}' has no version {child.version}",
                )
            )
    if problems:
        raise InvalidDefinition.from_problems(problems)


def _make_live_again(
    ports: Ports, head: WorkflowItem, latest: VersionItem, name: str | None, now: str
) -> PutWorkflowResult:
    changes: dict[str, Any] = {}
    if not head.enabled:
        changes["enabled"] = True
    if head.live_version != latest.version:
        changes["live_version"] = latest.version
        changes["live_version_arn"] = latest.state_machine_version_arn
        changes.update(live_engine_of(latest))
    if head.name != name:
        changes["name"] = name
    if changes:
        head = ports.dal.update_workflow(head.tenant, head.workflow_id, **changes, updated_at=now)
    # Always re-assert the alias: it heals one a failed request left behind.
    point_alias(ports, head)
    return PutWorkflowResult(
        workflow_id=head.workflow_id,
        version=latest.version,
        live_version=latest.version,
        created=False,
        warnings=latest.warnings,
    )
