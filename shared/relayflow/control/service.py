"""The control plane: workflows and their versions, runs, and API keys.

:class:`ControlPlane` is the use-case layer behind the HTTP API, the CLI and the recorder.
Every method takes the tenant first (except the API-key lookups, which find the tenant) and
only ever builds keys from it, so another tenant's ids raise :class:`NotFound` exactly like
ids that do not exist. DynamoDB is reached only through :mod:`relayflow.dal`, Step Functions
only through :mod:`relayflow.executions.stepfunctions`; their failures become
:mod:`relayflow.control.errors`.

Versions: a PUT publishes a state machine version and records it; new runs start on the
*version ARN* of the live version read with the workflow item (the ``live`` alias is kept
pointing at the same version for callers outside Relayflow). A run therefore records exactly
the version it runs, even while a PUT or a rollback races with its start.

:class:`ControlPlane` is composed of one part per resource (:mod:`relayflow.control.plane`:
workflows, runs, breakers and keys); publishing a definition (:meth:`ControlPlane.put_workflow`)
stays here. Every name the parts share stays importable from this module.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from relayflow.control.engines import check_machine_type, compile_options
from relayflow.control.errors import Conflict, InvalidDefinition, PayloadTooLarge, Unprocessable
from relayflow.control.machine_config import machine_config
from relayflow.control.models import PutWorkflowResult
from relayflow.control.plane.access import Access
from relayflow.control.plane.common import (
    _OUTSIDE_ASL,
    CANCEL_ERROR,
    KEY_ID_PATTERN,
    MAX_DEFINITION_BYTES,
    MAX_IDEMPOTENCY_KEY,
    MAX_INPUT_BYTES,
    MAX_PAGE,
    MAX_STORED_OUTPUT_BYTES,
    RUN_ID_PATTERN,
    RUN_MAX_AGE,
    RUN_RETENTION,
    RUN_STATUS,
    TENANT_PATTERN,
    WORKFLOW_ID_PATTERN,
    BreakerOpen,
    RunMode,
    _document_size_warnings,
    _engine_of,
    _json_default,
    _key_info,
    _run_summary,
    _same_triggers,
    _step_entry,
    _trigger_errors,
    _workflow_summary,
    _z,
    check_compiled,
    check_limit,
    check_quotas,
    check_tenant,
    elapsed_ms,
    epoch,
    hash_secret,
    idempotent_run_id,
    iso,
    loads_optional,
    now_iso,
    parse_iso,
    subscriptions,
    to_json,
    translated,
)
from relayflow.control.plane.runs import Runs
from relayflow.control.plane.workflows import Workflows
from relayflow.dal import ConditionFailed, VersionItem, WorkflowItem
from relayflow.engine import ENGINE_VERSION
from relayflow.executions import stepfunctions as sfn_api
from relayflow.settings import get_settings

#: Kept importable from here: the code and tests import these from this module.
__all__ = [
    "CANCEL_ERROR",
    "ENGINE_VERSION",
    "KEY_ID_PATTERN",
    "MAX_DEFINITION_BYTES",
    "MAX_IDEMPOTENCY_KEY",
    "MAX_INPUT_BYTES",
    "MAX_PAGE",
    "MAX_STORED_OUTPUT_BYTES",
    "RUN_ID_PATTERN",
    "RUN_MAX_AGE",
    "RUN_RETENTION",
    "RUN_STATUS",
    "TENANT_PATTERN",
    "WORKFLOW_ID_PATTERN",
    "_OUTSIDE_ASL",
    "BreakerOpen",
    "ControlPlane",
    "RunMode",
    "_document_size_warnings",
    "_engine_of",
    "_json_default",
    "_key_info",
    "_run_summary",
    "_same_triggers",
    "_step_entry",
    "_trigger_errors",
    "_workflow_summary",
    "_z",
    "check_compiled",
    "check_limit",
    "check_tenant",
    "compile_options",
    "elapsed_ms",
    "epoch",
    "get_control_plane",
    "hash_secret",
    "idempotent_run_id",
    "iso",
    "loads_optional",
    "now_iso",
    "parse_iso",
    "subscriptions",
    "to_json",
    "translated",
]


class ControlPlane(Workflows, Runs, Access):
    """Workflows, versions, runs and API keys, scoped by tenant.

    ``dal`` and ``sfn`` (a boto3 ``stepfunctions`` client) are created lazily when not given:
    :func:`relayflow.dal.get_dal` and ``adapters.aws.client("stepfunctions")``.
    """

    @translated
    def put_workflow(
        self, tenant: str, workflow_id: str, definition: Mapping[str, Any]
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
        from relayflow.control.run_input import with_child_schemas
        from relayflow.validation import validate_data

        check_tenant(tenant)
        definition_json = to_json(definition) if isinstance(definition, Mapping) else None
        if definition_json is not None and len(definition_json.encode()) > MAX_DEFINITION_BYTES:
            raise PayloadTooLarge(
                f"a definition may hold at most {MAX_DEFINITION_BYTES} bytes as JSON"
            )
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
        self._check_sub_workflows(tenant, workflow)
        head = self.dal.get_workflow(tenant, workflow_id)
        options = with_child_schemas(compile_options(tenant, head), self.dal, tenant, workflow)
        compiled = compile_workflow(workflow, options)
        engine = check_machine_type(workflow, compiled, head)
        # What validation could not see: child schemas, the engine's wrapper, the machine type.
        check_quotas(workflow, compiled.asl, engine)
        check_compiled(compiled.asl)
        asl_json = json.dumps(compiled.asl, separators=(",", ":"))
        asl_sha256 = hashlib.sha256(asl_json.encode()).hexdigest()
        now = now_iso()
        trigger_plan = self._check_triggers(tenant, workflow_id, subscriptions(workflow))

        if head is not None:
            latest = self.dal.get_version(tenant, workflow_id, head.latest_version)
            if (
                latest is not None
                and latest.asl_sha256 == asl_sha256
                and _same_triggers(latest.definition, definition_json)
            ):
                result = self._make_live_again(head, latest, workflow.name, now)
                self._sync_triggers(tenant, workflow_id, subscriptions(workflow), enabled=True)
                return result

        version = 1 if head is None else head.latest_version + 1
        description = f"Relayflow {tenant}/{workflow_id} version {version}"
        try:
            if head is None:
                machine_arn, version_arn = self.machines.create(
                    sfn_api.state_machine_name(settings.stage, tenant, workflow_id),
                    asl_json,
                    **machine_config(tenant, workflow),
                    description=description,
                    tags={"relayflow:tenant": tenant, "relayflow:workflow": workflow_id},
                    express=engine == "express",
                )
            else:
                machine_arn = head.state_machine_arn
                version_arn = self.machines.update(
                    machine_arn,
                    asl_json,
                    **machine_config(tenant, workflow),
                    description=description,
                    express=engine == "express",
                )
        except sfn_api.DefinitionRejected as exc:
            raise Unprocessable(f"Step Functions refused the compiled definition: {exc}") from exc
        from relayflow.control.cancel_compensation import publish_variant as saga_variant

        variant_arn = saga_variant(self, tenant, machine_arn, workflow, compiled.asl, version)
        item = VersionItem(
            tenant=tenant,
            workflow_id=workflow_id,
            version=version,
            definition=definition_json,
            asl_sha256=asl_sha256,
            state_machine_version_arn=version_arn,
            created_at=now,
            warnings=[*trigger_plan.skipped, *_document_size_warnings(workflow)],
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
            self.dal.save_workflow(
                new_head, expected_latest=head.latest_version if head else None, version=item
            )
        except ConditionFailed as exc:
            raise Conflict(
                f"workflow {workflow_id} was changed by another request; read it and retry"
            ) from exc
        self._point_alias(new_head)
        self._sync_triggers(tenant, workflow_id, subscriptions(workflow), enabled=True)
        return PutWorkflowResult(
            workflow_id=workflow_id,
            version=version,
            live_version=version,
            created=head is None,
            warnings=item.warnings,
        )

    def _check_sub_workflows(self, tenant: str, workflow: Any) -> None:
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
            if self.dal.get_workflow(tenant, child.workflow_id) is None:
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
                and self.dal.get_version(tenant, child.workflow_id, child.version) is None
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
        self, head: WorkflowItem, latest: VersionItem, name: str | None, now: str
    ) -> PutWorkflowResult:
        changes: dict[str, Any] = {}
        if not head.enabled:
            changes["enabled"] = True
        if head.live_version != latest.version:
            changes["live_version"] = latest.version
            changes["live_version_arn"] = latest.state_machine_version_arn
            changes.update(_engine_of(latest))
        if head.name != name:
            changes["name"] = name
        if changes:
            head = self.dal.update_workflow(
                head.tenant, head.workflow_id, **changes, updated_at=now
            )
        # Always re-assert the alias: it heals one a failed request left behind.
        self._point_alias(head)
        return PutWorkflowResult(
            workflow_id=head.workflow_id,
            version=latest.version,
            live_version=latest.version,
            created=False,
            warnings=latest.warnings,
        )


@lru_cache(maxsize=1)
def get_control_plane() -> ControlPlane:
    """The process's control plane (its clients are resolved at each call)."""
    return ControlPlane()
