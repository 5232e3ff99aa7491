"""The control plane: workflows and their versions, runs, and API keys.

:class:`ControlPlane` is the use-case layer behind the HTTP API, the CLI and the recorder.
Every method takes the tenant first (except the API-key lookups, which find the tenant) and
only ever builds keys from it, so another tenant's ids raise :class:`NotFound` exactly like
ids that do not exist. DynamoDB is reached only through :mod:`relayflow.dal`, Step Functions
only through :mod:`relayflow.control.stepfunctions`; their failures become
:mod:`relayflow.control.errors`.

Versions: a PUT publishes a state machine version and records it; new runs start on the
*version ARN* of the live version read with the workflow item (the ``live`` alias is kept
pointing at the same version for callers outside Relayflow). A run therefore records exactly
the version it runs, even while a PUT or a rollback races with its start.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import math
import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from relayflow.control import stepfunctions as sfn_api
from relayflow.control.causes import public_cause
from relayflow.control.engines import (
    check_machine_type,
    compile_options,
    start_execution,
    version_info,
)
from relayflow.control.errors import (
    ApiError,
    BadRequest,
    CompilerBug,
    Conflict,
    InvalidDefinition,
    NotFound,
    PayloadTooLarge,
    ServiceUnavailable,
    TooManyRequests,
    Unprocessable,
)
from relayflow.control.express_timeline import express_steps, with_duration
from relayflow.control.machine_config import machine_config
from relayflow.control.models import (
    ApiKeyInfo,
    ContinueResult,
    NewApiKey,
    Page,
    PutWorkflowResult,
    RunDetail,
    RunSummary,
    StartRunResult,
    StepEntry,
    WorkflowDetail,
    WorkflowSummary,
)
from relayflow.control.timeline import StepRun, history_steps
from relayflow.control.timeline import failing_step as last_failing_step
from relayflow.dal import (
    RUN_STATUSES,
    ApiKeyItem,
    ConditionFailed,
    Dal,
    DataAccessError,
    InvalidPageToken,
    ItemTooLarge,
    RunItem,
    VersionItem,
    WorkflowItem,
    get_dal,
)
from relayflow.dal import Throttled as DalThrottled
from relayflow.dal.breakers import BreakerDal
from relayflow.engine import ENGINE_VERSION
from relayflow.errors import CircuitOpen
from relayflow.reliability.breakers import (
    WORKFLOW_TRIAL_LEASE_SECONDS,
    Admission,
    BreakerInfo,
    BreakerPolicy,
    Breakers,
    is_breaker_id,
    workflow_breaker_id,
)
from relayflow.settings import get_settings

if TYPE_CHECKING:
    from relayflow.control.admission import Admission as RunAdmission
    from relayflow.control.dlq import Dlq
    from relayflow.triggers.sync import TriggerPlan

P = ParamSpec("P")
R = TypeVar("R")

TENANT_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{1,30}$")
WORKFLOW_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
#: Run ids are execution names: Step Functions allows 80 characters of these.
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
KEY_ID_PATTERN = re.compile(r"^key_[0-9a-f]{12}$")

#: The submitted definition is stored on its version item (DynamoDB items stop at 400 KB).
MAX_DEFINITION_BYTES = 350_000
#: Step Functions refuses execution input over 256 KB; the run item keeps the trigger input.
MAX_INPUT_BYTES = 256 * 1024
#: A run's output is kept on the run item up to this size; larger ones are read from Step
#: Functions (DescribeExecution) when a run is fetched.
MAX_STORED_OUTPUT_BYTES = 96 * 1024
#: Run items expire this long after their run ended: Step Functions keeps the history of a
#: Standard execution (which the step timeline is built from) for 90 days.
RUN_RETENTION = timedelta(days=90)
#: A run that never reports its end still expires: the longest Standard execution (a year)
#: plus the retention.
RUN_MAX_AGE = timedelta(days=366) + RUN_RETENTION
MAX_IDEMPOTENCY_KEY = 256
MAX_PAGE = 100
CANCEL_ERROR = "Relayflow.Cancelled"
#: Step Functions' execution status → Relayflow's run status.
RUN_STATUS = {
    "RUNNING": "running",
    "SUCCEEDED": "succeeded",
    "FAILED": "failed",
    "TIMED_OUT": "timed_out",
    "ABORTED": "aborted",
}


# ------------------------------------------------------------------------------- helpers


def now_iso() -> str:
    return iso(datetime.now(UTC))


def iso(value: datetime) -> str:
    """ISO-8601 UTC to the millisecond with ``Z`` (the format of ``$.run.started_at``)."""
    value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def epoch(value: datetime) -> int:
    return int(value.timestamp())


def elapsed_ms(start: str, end: str) -> float:
    return round((parse_iso(end) - parse_iso(start)).total_seconds() * 1000.0, 3)


def idempotent_run_id(tenant: str, workflow_id: str, key: str) -> str:
    """The run id (and execution name) of an Idempotency-Key: the same key always maps to
    the same run of that tenant's workflow."""
    return hashlib.sha256(f"{tenant}\n{workflow_id}\n{key}".encode()).hexdigest()[:32]


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    """YAML gives dates and times as objects; a definition stores them as ISO text."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class BreakerOpen(Conflict):
    """409: the workflow's circuit breaker is open; ``details`` name the breaker and when it
    lets a run through (``reopens_at``), and ``Retry-After`` says the same in seconds."""

    def __init__(self, message: str, details: dict[str, Any], retry_after: int | None) -> None:
        super().__init__(message, details)
        self.retry_after = retry_after


def _check_compiled(asl: Mapping[str, Any]) -> None:
    """Refuse to deploy a compiled machine that fails :mod:`relayflow.compiler.check`: a
    compiler bug, logged in full and answered with 500 ``compiler_bug``."""
    from relayflow.compiler.check import CompiledMachineInvalid, assert_valid_machine

    try:
        assert_valid_machine(asl)
    except CompiledMachineInvalid as exc:
        from relayflow.observability import logger

        logger.error("compiled state machine failed the check", extra={"reason": str(exc)})
        raise CompilerBug.from_violations(exc.violations) from exc


def _translated(method: Callable[P, R]) -> Callable[P, R]:
    """Turn data-access and Step Functions failures into :class:`ApiError` s."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except ApiError:
            raise
        except (DalThrottled, sfn_api.Throttled) as exc:
            raise TooManyRequests("AWS is throttling requests; retry shortly") from exc
        except InvalidPageToken as exc:
            raise BadRequest(str(exc)) from exc
        except ItemTooLarge as exc:
            raise PayloadTooLarge("the item would exceed DynamoDB's 400 KB limit") from exc
        except (DataAccessError, sfn_api.StepFunctionsError) as exc:
            # The AWS error names tables and ARNs: it goes to the log, not to the caller.
            from relayflow.observability import logger

            logger.error("AWS call failed", extra={"error": type(exc).__name__, "reason": str(exc)})
            raise ServiceUnavailable(
                "the service could not reach its storage or Step Functions; retry shortly"
            ) from exc

    return wrapper


@contextlib.contextmanager
def _trigger_errors() -> Iterator[None]:
    """Trigger sync's failures as API errors."""
    from relayflow.definition.problems import Problem
    from relayflow.triggers.sync import InvalidTriggers, SlugConflict, SyncFailed, SyncThrottled

    try:
        yield
    except InvalidTriggers as exc:
        raise InvalidDefinition.from_problems(
            [Problem(None, p.path, p.rule, p.message) for p in exc.problems]
        ) from exc
    except SlugConflict as exc:
        raise Conflict(str(exc), {"path": exc.path, "slug": exc.slug}) from exc
    except SyncThrottled as exc:
        raise TooManyRequests("AWS is throttling requests; retry shortly") from exc
    except SyncFailed as exc:
        from relayflow.observability import logger

        logger.error("trigger sync failed", extra={"reason": str(exc)})
        raise ServiceUnavailable(
            "the service could not register the workflow's triggers; repeat the request"
        ) from exc


def _check_tenant(tenant: str) -> None:
    if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
        raise BadRequest(f"invalid tenant id {tenant!r}: allowed ^[a-z0-9][a-z0-9-]{{1,30}}$")


def _check_limit(limit: int) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE:
        raise BadRequest(f"limit must be an integer from 1 to {MAX_PAGE}")


#: Parts of a definition the compiled ASL does not hold (read from the version instead).
_OUTSIDE_ASL = (
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


def _same_triggers(stored_definition: str, definition_json: str) -> bool:
    """A definition whose parts outside the compiled ASL (``_OUTSIDE_ASL``) changed is a new
    version even when its state machine is not."""
    stored, new = json.loads(stored_definition), json.loads(definition_json)
    return all(stored.get(part) == new.get(part) for part in _OUTSIDE_ASL)


# ------------------------------------------------------------------------------- service


class ControlPlane:
    """Workflows, versions, runs and API keys, scoped by tenant.

    ``dal`` and ``sfn`` (a boto3 ``stepfunctions`` client) are created lazily when not given:
    :func:`relayflow.dal.get_dal` and ``adapters.aws.client("stepfunctions")``.
    """

    def __init__(
        self, dal: Dal | None = None, sfn: Any | None = None, breakers: Breakers | None = None
    ) -> None:
        self._dal = dal
        #: The Step Functions calls (state machines, versions, alias, executions).
        self.machines = sfn_api.StateMachines(sfn)
        #: Circuit breakers (workflow breakers refuse starts; the recorder settles them).
        self.breakers = breakers or Breakers(BreakerDal(dal))

    @property
    def dal(self) -> Dal:
        return self._dal or get_dal()

    @functools.cached_property
    def admission(self) -> RunAdmission:
        """Run admission: singleton, concurrency, debounce, batch (``docs/flow-control.md``)."""
        from relayflow.control.admission import Admission as RunAdmission

        return RunAdmission(self)

    @property
    def dlq(self) -> Dlq:
        """The run dead-letter queue (:mod:`relayflow.control.dlq`)."""
        from relayflow.control.dlq import Dlq

        return Dlq(self)

    # -- workflows ---------------------------------------------------------------------------

    @_translated
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
        from relayflow.definition import validate_data

        _check_tenant(tenant)
        definition_json = _json(definition) if isinstance(definition, Mapping) else None
        if definition_json is not None and len(definition_json.encode()) > MAX_DEFINITION_BYTES:
            raise PayloadTooLarge(
                f"a definition may hold at most {MAX_DEFINITION_BYTES} bytes as JSON"
            )
        workflow, problems = validate_data(
            json.loads(definition_json) if definition_json is not None else definition
        )
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
        _check_compiled(compiled.asl)
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
        from relayflow.definition.children import child_workflows
        from relayflow.definition.problems import Problem

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

    def _check_triggers(self, tenant: str, workflow_id: str, triggers: list[Any]) -> TriggerPlan:
        """Plan the triggers before anything is stored: a cron expression Scheduler cannot
        express is an :class:`InvalidDefinition` problem, a slug another workflow holds a
        :class:`Conflict`."""
        from relayflow.triggers.sync import TriggerSync

        with _trigger_errors():
            return TriggerSync(dal=self.dal).check(tenant, workflow_id, triggers)

    def _sync_triggers(
        self, tenant: str, workflow_id: str, triggers: list[Any], *, enabled: bool
    ) -> None:
        """Register the triggers with EventBridge Scheduler, EventBridge and the slug table
        (or remove them: ``enabled`` false). Idempotent, so a failed request is healed by
        repeating it."""
        from relayflow.triggers.sync import TriggerSync

        with _trigger_errors():
            TriggerSync(dal=self.dal).sync(tenant, workflow_id, triggers, enabled=enabled)
        if enabled:
            self._catch_up(tenant, workflow_id, triggers)

    def _catch_up(self, tenant: str, workflow_id: str, triggers: list[Any]) -> None:
        """Run the ticks cron triggers with ``catch_up`` missed (``docs/flow-control.md``).
        A failure is logged, not raised: the workflow is stored, and the next tick catches
        up again."""
        from relayflow.observability import logger
        from relayflow.triggers.catch_up import catch_up_workflow

        try:
            catch_up_workflow(self, tenant, workflow_id, triggers)
        except (ApiError, DataAccessError, sfn_api.StepFunctionsError) as exc:
            logger.warning(
                "catch-up of missed ticks failed; the next tick tries again",
                extra={"tenant": tenant, "workflow_id": workflow_id, "reason": str(exc)},
            )

    def _point_alias(self, head: WorkflowItem) -> None:
        alias_arn = self.machines.point_alias(head.state_machine_arn, head.live_version_arn)
        if alias_arn != head.alias_arn:
            self.dal.update_workflow(head.tenant, head.workflow_id, alias_arn=alias_arn)

    @_translated
    def list_workflows(
        self, tenant: str, *, limit: int = 50, next_token: str | None = None
    ) -> Page[WorkflowSummary]:
        """The tenant's workflows (deleted ones too, ``enabled`` false), by id."""
        _check_tenant(tenant)
        _check_limit(limit)
        items, token = self.dal.list_workflows(tenant, limit=limit, next_token=next_token)
        return Page[WorkflowSummary](items=[_workflow_summary(i) for i in items], next_token=token)

    @_translated
    def get_workflow(self, tenant: str, workflow_id: str) -> WorkflowDetail:
        """The workflow, the live version's definition and every version."""
        head, versions = self._workflow_and_versions(tenant, workflow_id)
        live = next((v for v in versions if v.version == head.live_version), None)
        return WorkflowDetail(
            **_workflow_summary(head).model_dump(),
            definition=json.loads(live.definition) if live else {},
            versions=[version_info(v) for v in versions],
        )

    @_translated
    def delete_workflow(self, tenant: str, workflow_id: str) -> WorkflowSummary:
        """Disable the workflow: new starts raise :class:`Conflict`, runs in flight finish.
        Versions and runs stay readable; a PUT enables it again."""
        head = self._workflow(tenant, workflow_id)
        if head.enabled:
            head = self.dal.update_workflow(
                tenant, workflow_id, enabled=False, updated_at=now_iso()
            )
        # Also when it was disabled already: a repeated DELETE heals a failed one.
        self._sync_triggers(tenant, workflow_id, [], enabled=False)
        return _workflow_summary(head)

    @_translated
    def rollback_workflow(self, tenant: str, workflow_id: str, version: int) -> PutWorkflowResult:
        """Make an earlier (or any recorded) version live again, with its triggers."""
        from relayflow.triggers.sync import triggers_of

        head = self._workflow(tenant, workflow_id)
        item = self._version(tenant, workflow_id, version)
        triggers = triggers_of(item.definition, with_subscriptions=True)
        self._check_triggers(tenant, workflow_id, triggers)
        if head.live_version != item.version:
            head = self.dal.update_workflow(
                tenant,
                workflow_id,
                live_version=item.version,
                live_version_arn=item.state_machine_version_arn,
                updated_at=now_iso(),
                **_engine_of(item),
            )
        self._point_alias(head)
        self._sync_triggers(tenant, workflow_id, triggers, enabled=head.enabled)
        return PutWorkflowResult(
            workflow_id=workflow_id,
            version=item.version,
            live_version=item.version,
            created=False,
            warnings=item.warnings,
        )

    # -- runs --------------------------------------------------------------------------------

    @_translated
    def start_run(
        self,
        tenant: str,
        workflow_id: str,
        input: Any,
        *,
        version: int | None = None,
        idempotency_key: str | None = None,
        trigger_type: str = "api",
        dry_run: bool = False,
        step_through: bool = False,
        collapse: bool = True,
        overlap: tuple[str, str] | None = None,
    ) -> StartRunResult:
        """Start a run of the live version, or of ``version``.

        A ``dry_run`` carries ``run.dry_run`` in its state document: steps that act on the
        world record the call they would make instead (``docs/run-modes.md``). A
        ``step_through`` run starts on the version's step-through variant (published on
        first use) and pauses before each step until :meth:`continue_run`. The run item
        records the engine version that compiled the state machine it starts on.

        The workflow's admission rules decide first (:mod:`relayflow.control.admission`):
        the answer may be a queued, skipped, debounced or batched run instead (its
        ``admission`` says which). ``collapse`` false skips debounce and batch (their own
        deferred starts); ``overlap`` is a schedule's ``(mode, key)``. A dry run passes no
        admission rule (it acts on nothing, so it holds no slot); a step-through run is
        never folded into a debounced or batched run (those start later without its mode),
        but takes a singleton or concurrency slot, and queues with its mode kept.

        With an ``idempotency_key`` the run id is derived from it, so a repeat returns the
        run the first request started (``created`` false) and never starts a second
        execution. The run item is written (conditionally) before the execution starts.
        While the workflow's circuit breaker is open it raises :class:`BreakerOpen` (409); a
        half-open one lets this run through as its trial.
        """
        from relayflow.control.admission import Decision
        from relayflow.control.run_input import check_run_input
        from relayflow.document import new_run_id

        head = self._workflow(tenant, workflow_id)
        if not head.enabled:
            raise Conflict(f"workflow {workflow_id} is disabled")
        if idempotency_key is not None and not (
            isinstance(idempotency_key, str) and 0 < len(idempotency_key) <= MAX_IDEMPOTENCY_KEY
        ):
            raise BadRequest(f"an Idempotency-Key has 1 to {MAX_IDEMPOTENCY_KEY} characters")
        if version is None:
            version, target_arn = head.live_version, head.live_version_arn
            engine_version = head.live_engine_version
        else:
            pinned = self._version(tenant, workflow_id, version)
            target_arn, engine_version = pinned.state_machine_version_arn, pinned.engine_version
        if collapse:  # a debounce's or batch's own start: each trigger was checked on arrival
            check_run_input(self.dal, head, version, input)  # 422 invalid_input
        if step_through:
            from relayflow.control.step_through import StepThrough

            target_arn = StepThrough(self).target(head, version)

        run_id = (
            idempotent_run_id(tenant, workflow_id, idempotency_key)
            if idempotency_key is not None
            else new_run_id()
        )
        if idempotency_key is not None:
            existing = self.dal.get_run(tenant, run_id)
            if existing is not None:
                return self._repeat(existing)
        if dry_run:
            decision = Decision()
        else:
            decision = self.admission.admit(
                head,
                version,
                run_id,
                input,
                trigger_type=trigger_type,
                collapse=collapse and not step_through,
                overlap=overlap,
                idempotency_key=idempotency_key,
                step_through=step_through,
            )
        if decision.answer is not None:
            return decision.answer
        # A dry run acts on nothing: an open breaker does not refuse it, and it is never
        # the half-open trial (the recorder does not settle dry runs on the breaker).
        try:
            admission = None if dry_run else self._admit_run(tenant, workflow_id, version, run_id)
        except Exception:
            self.admission.abandon(tenant, workflow_id, run_id, decision.flow_key)
            raise
        try:
            return self._create_and_start(
                head,
                run_id,
                input,
                version,
                target_arn,
                idempotency_key,
                trigger_type,
                _RunMode(engine_version=engine_version, dry_run=dry_run, step_through=step_through),
                flow_key=decision.flow_key,
            )
        except Exception:
            if admission is not None:
                # The trial run never started: the next start may take the trial at once.
                with contextlib.suppress(DataAccessError):
                    self.breakers.abstained(admission)
            self.admission.abandon(tenant, workflow_id, run_id, decision.flow_key)
            raise

    def _create_and_start(
        self,
        head: WorkflowItem,
        run_id: str,
        input: Any,
        version: int,
        target_arn: str,
        idempotency_key: str | None,
        trigger_type: str,
        mode: _RunMode,
        *,
        flow_key: str | None = None,
    ) -> StartRunResult:
        run, document_json = self._new_run(
            head, run_id, input, version, idempotency_key, trigger_type, "running", flow_key, mode
        )
        tenant = head.tenant
        if not self.dal.create_run(run):
            # A concurrent request with the same key wrote it first.
            existing = self.dal.get_run(tenant, run_id)
            if existing is None:
                raise Conflict(f"run {run_id} is being started by another request; retry")
            return self._repeat(existing)
        try:
            self._start_execution(run, target_arn, document_json)
        except Exception:
            # Nothing runs: forget the run so that a retry (same key) starts it afresh.
            self.dal.delete_run(tenant, run_id)
            raise
        return StartRunResult(**_run_summary(run).model_dump(), created=True)

    def _new_run(
        self,
        head: WorkflowItem,
        run_id: str,
        input: Any,
        version: int,
        idempotency_key: str | None,
        trigger_type: str,
        status: str,
        flow_key: str | None,
        mode: _RunMode,
    ) -> tuple[RunItem, str]:
        """The run item of a new run and its execution input (JSON)."""
        from relayflow.document import execution_input

        tenant, workflow_id = head.tenant, head.workflow_id
        document = execution_input(
            workflow_id, input, run_id=run_id, version=version, tenant=tenant, dry_run=mode.dry_run
        )
        document_json = _json(document)
        if len(document_json.encode()) > MAX_INPUT_BYTES:
            raise PayloadTooLarge(f"a run's input may hold at most {MAX_INPUT_BYTES} bytes")
        started_at = document["run"]["started_at"]
        run = RunItem(
            run_id=run_id,
            tenant=tenant,
            workflow_id=workflow_id,
            version=version,
            status=status,  # type: ignore[arg-type]
            execution_arn=sfn_api.execution_arn(head.state_machine_arn, run_id),
            input=_json(document["trigger"]),
            started_at=started_at,
            idempotency_key=idempotency_key,
            trigger_type=trigger_type,
            expires_at=epoch(parse_iso(started_at) + RUN_MAX_AGE),
            engine_version=mode.engine_version,
            dry_run=mode.dry_run,
            step_through=mode.step_through,
            flow_key=flow_key,
            engine="standard" if mode.step_through else head.engine,  # see step_through.py
        )
        return run, document_json

    def create_queued_run(
        self,
        head: WorkflowItem,
        run_id: str,
        input: Any,
        version: int,
        trigger_type: str,
        flow_key: str,
        idempotency_key: str | None = None,
        *,
        step_through: bool = False,
    ) -> tuple[RunItem, bool]:
        """Record a run that waits for a slot (status ``queued``): the run and ``True``; when
        a run of that id exists already (a repeated key), that run and ``False``. Its engine
        version is recorded when it starts (:meth:`start_queued_run`)."""
        mode = _RunMode(engine_version=None, dry_run=False, step_through=step_through)
        run, _ = self._new_run(
            head, run_id, input, version, idempotency_key, trigger_type, "queued", flow_key, mode
        )
        if self.dal.create_run(run):
            return run, True
        existing = self.dal.get_run(head.tenant, run_id)
        if existing is None:
            raise Conflict(f"run {run_id} is being started by another request; retry")
        return existing, False

    def start_queued_run(self, run: RunItem) -> None:
        """Start a queued run that now holds its slot, with the trigger it was queued with."""
        from relayflow.document import execution_input

        target = self._version(run.tenant, run.workflow_id, run.version or 1)
        target_arn = target.state_machine_version_arn
        if run.step_through:
            from relayflow.control.step_through import StepThrough

            head = self._workflow(run.tenant, run.workflow_id)
            target_arn = StepThrough(self).target(head, target.version)
        started_at = now_iso()
        changes: dict[str, Any] = {
            "status": "running",
            "queued_at": run.started_at,
            "started_at": started_at,
        }
        if target.engine_version:
            changes["engine_version"] = target.engine_version
        updated = self.dal.update_run(run.tenant, run.run_id, changes, if_status=("queued",))
        if updated is None:
            return  # started (or cancelled) by another caller
        document = execution_input(
            run.workflow_id,
            _loads(run.input),
            run_id=run.run_id,
            version=run.version,
            tenant=run.tenant,
        )
        document["run"]["started_at"] = started_at
        self._start_execution(updated, target_arn, _json(document))

    def fail_queued_run(self, run: RunItem, cause: str) -> None:
        """A queued run that cannot start ends as ``failed`` (its slot passes on)."""
        ended_at = now_iso()
        self.dal.update_run(
            run.tenant,
            run.run_id,
            {
                "status": "failed",
                "ended_at": ended_at,
                "error": "Relayflow.NotStarted",
                "cause": cause,
                "expires_at": epoch(parse_iso(ended_at) + RUN_RETENTION),
            },
            if_status=("queued", "running"),
        )

    def _admit_run(
        self, tenant: str, workflow_id: str, version: int, run_id: str
    ) -> Admission | None:
        """Pass the workflow's circuit breaker, or raise :class:`BreakerOpen`. A half-open
        breaker lets this run through as its trial (the admission returned). Only an open
        breaker costs a read of the version, to confirm that it still declares a breaker."""
        breaker_id = workflow_breaker_id(workflow_id)
        item = self.breakers.get(tenant, breaker_id)
        if item is None or item.state == "closed":
            return None
        if self.workflow_breaker_policy(tenant, workflow_id, version) is None:
            return None
        try:
            admission = self.breakers.admit(
                tenant,
                breaker_id,
                lease_seconds=WORKFLOW_TRIAL_LEASE_SECONDS,
                token=run_id,
                current=item,
            )
        except CircuitOpen as exc:
            chance = exc.details.get("reopens_at_epoch")
            retry_after = max(1, math.ceil(chance - self.breakers.clock())) if chance else None
            raise BreakerOpen(
                f"workflow {workflow_id}'s circuit breaker is open: no run starts until "
                f"{exc.details.get('reopens_at')}",
                {"breaker_id": breaker_id, "reopens_at": exc.details.get("reopens_at")},
                retry_after,
            ) from exc
        return admission if admission.trial_token is not None else None

    def workflow_breaker_policy(
        self, tenant: str, workflow_id: str, version: int
    ) -> BreakerPolicy | None:
        """The circuit breaker ``version`` of the workflow declares (``None``: none, or no
        such version)."""
        item = self.dal.get_version(tenant, workflow_id, version)
        if item is None:
            return None
        return BreakerPolicy.from_config(json.loads(item.definition).get("breaker"))

    def _start_execution(self, run: RunItem, target_arn: str, document_json: str) -> None:
        try:
            arn = start_execution(self, run, target_arn, document_json)
        except sfn_api.ExecutionExists:
            return  # started by a concurrent repeat of the same key
        except sfn_api.ResourceMissing as exc:
            raise Conflict(f"version {run.version} of workflow {run.workflow_id} is gone") from exc
        if arn != run.execution_arn:
            self.dal.update_run(run.tenant, run.run_id, {"execution_arn": arn})
            run.execution_arn = arn

    def _repeat(self, run: RunItem) -> StartRunResult:
        """The answer to a repeated Idempotency-Key: the stored run. If it is still marked
        running but its execution never started (the first request failed in between),
        start it now, with the same document."""
        from relayflow.document import execution_input

        never_started = (
            run.status == "running"
            and run.execution_arn is not None
            and self.machines.describe(run.execution_arn) is None
        )
        if never_started:
            head = self._workflow(run.tenant, run.workflow_id)
            version = run.version or head.live_version
            target = self._version(run.tenant, run.workflow_id, version)
            document = execution_input(
                run.workflow_id,
                _loads(run.input),
                run_id=run.run_id,
                version=version,
                tenant=run.tenant,
                dry_run=run.dry_run,
            )
            document["run"]["started_at"] = run.started_at
            self._start_execution(run, target.state_machine_version_arn, _json(document))
        return StartRunResult(**_run_summary(run).model_dump(), created=False)

    @_translated
    def continue_run(self, tenant: str, run_id: str, *, to_end: bool = False) -> ContinueResult:
        """Release the step a step-through run waits before (:class:`Conflict` while a step
        runs, so a second call releases nothing), or with ``to_end`` let it finish."""
        from relayflow.control.step_through import StepThrough

        return StepThrough(self).continue_run(self._run(tenant, run_id), to_end=to_end)

    @_translated
    def resume_run(self, tenant: str, run_id: str, request: Any) -> Any:
        """Answer a parked run's park (:meth:`relayflow.control.resume.Parks.resume`)."""
        from relayflow.control.resume import Parks

        return Parks(self).resume(tenant, run_id, request)

    @_translated
    def list_parked_runs(
        self, tenant: str, *, limit: int = 20, next_token: str | None = None
    ) -> Page[RunSummary]:
        """The tenant's parked runs (:mod:`relayflow.control.resume`)."""
        from relayflow.control.resume import Parks

        return Parks(self).list_parked(tenant, limit=limit, next_token=next_token)

    @_translated
    def get_run(self, tenant: str, run_id: str) -> RunDetail:
        """The run with its step timeline (from the execution history, all pages)."""
        run = self._run(tenant, run_id)
        steps = self.run_steps(run)
        output = _loads(run.output)
        if output is None and run.status == "succeeded" and run.execution_arn:
            # Too large for the run item: Step Functions still has it.
            described = self.machines.describe(run.execution_arn) or {}
            output = _loads(described.get("output"))
        return RunDetail(
            **_run_summary(run).model_dump(),
            input=_loads(run.input),
            output=output,
            cause=public_cause(run.cause),
            failing_step=run.failing_step,
            steps=[_step_entry(step) for step in steps],
        )

    def run_steps(self, run: RunItem) -> list[StepRun]:
        """The run's step timeline, folded from its execution history with the step types of
        the version it ran (empty for runs of no recorded version, or once the history
        expired)."""
        if not run.execution_arn or run.version is None:
            return []
        version = self.dal.get_version(run.tenant, run.workflow_id, run.version)
        if version is None:
            return []
        if run.engine == "express":  # no execution history: what the steps recorded
            return express_steps(self.dal, run, version.step_types, version.step_runners)
        events = self.machines.history(run.execution_arn)
        return history_steps(version.step_types, version.step_runners, events)

    def failing_step(self, run: RunItem) -> str | None:
        """The step a failed or timed-out run ended in."""
        return last_failing_step(self.run_steps(run))

    @_translated
    def list_runs(
        self,
        tenant: str,
        workflow_id: str,
        *,
        status: str | None = None,
        limit: int = 20,
        next_token: str | None = None,
    ) -> Page[RunSummary]:
        """The workflow's runs, newest first, optionally of one status."""
        _check_limit(limit)
        if status is not None and status not in RUN_STATUSES:
            raise BadRequest(f"status must be one of {', '.join(RUN_STATUSES)}")
        self._workflow(tenant, workflow_id)
        items, token = self.dal.list_runs(
            tenant, workflow_id, status=status, limit=limit, next_token=next_token
        )
        return Page[RunSummary](items=[_run_summary(i) for i in items], next_token=token)

    @_translated
    def cancel_run(self, tenant: str, run_id: str) -> RunSummary:
        """Stop a running run; it is ``aborted`` at once (the recorder confirms it later).
        :class:`Conflict` when the run has already finished."""
        run = self._run(tenant, run_id)
        if run.status == "queued" and self.admission.cancel_queued(run):
            ended_at = now_iso()
            values = {
                "status": "aborted",
                "ended_at": ended_at,
                "error": CANCEL_ERROR,
                "cause": "cancelled while queued",
                "expires_at": epoch(parse_iso(ended_at) + RUN_RETENTION),
            }
            cancelled = self.dal.update_run(tenant, run_id, values, if_status=("queued",))
            if cancelled is not None:
                return _run_summary(cancelled)
            run = self._run(tenant, run_id)
        if run.status not in ("running", "parked"):
            raise Conflict(f"run {run_id} has already finished ({run.status})")
        described: dict[str, Any] | None = None
        cause = "cancelled through the Relayflow control API"
        if run.execution_arn and run.engine != "express":  # Express cannot stop (engines.md)
            with contextlib.suppress(sfn_api.ExecutionMissing):
                self.machines.stop(run.execution_arn, error=CANCEL_ERROR, cause=cause)
            described = self.machines.describe(run.execution_arn)
        status = str((described or {}).get("status", "ABORTED"))
        if status in ("SUCCEEDED", "FAILED", "TIMED_OUT"):
            raise Conflict(f"run {run_id} has already finished ({RUN_STATUS[status]})")
        stop = (described or {}).get("stopDate")
        ended_at = iso(stop) if isinstance(stop, datetime) else now_iso()
        updated = self.dal.update_run(
            tenant,
            run_id,
            {
                "status": "aborted",
                "ended_at": ended_at,
                "duration_ms": elapsed_ms(run.started_at, ended_at),
                "error": CANCEL_ERROR,
                "cause": cause,
                "expires_at": epoch(parse_iso(ended_at) + RUN_RETENTION),
                "parked": None,
            },
            if_status=("running", "parked"),
        )
        if updated is None:
            current = self._run(tenant, run_id)
            if current.status != "aborted":
                raise Conflict(f"run {run_id} has already finished ({current.status})")
            updated = current
        return _run_summary(updated)

    # -- circuit breakers --------------------------------------------------------------------

    @_translated
    def list_breakers(
        self, tenant: str, *, limit: int = 50, next_token: str | None = None
    ) -> Page[BreakerInfo]:
        """The tenant's circuit breakers (every one that has counted a failure), by id."""
        _check_tenant(tenant)
        _check_limit(limit)
        items, token = self.breakers.list(tenant, limit=limit, next_token=next_token)
        return Page[BreakerInfo](items=items, next_token=token)

    @_translated
    def reset_breaker(self, tenant: str, breaker_id: str) -> BreakerInfo:
        """Close the tenant's breaker now (its failures forgotten, a running trial dropped).
        :class:`NotFound` for a breaker the tenant does not have."""
        _check_tenant(tenant)
        info = self.breakers.reset(tenant, breaker_id) if is_breaker_id(breaker_id) else None
        if info is None:
            raise NotFound(f"circuit breaker {breaker_id} not found")
        return info

    # -- API keys ----------------------------------------------------------------------------

    @_translated
    def create_api_key(self, tenant: str, name: str) -> NewApiKey:
        """A new API key for ``tenant``. The secret is in the result only: the table keeps
        its sha256."""
        _check_tenant(tenant)
        if not isinstance(name, str) or not 1 <= len(name.strip()) <= 100:
            raise BadRequest("a key name has 1 to 100 characters")
        key_id = f"key_{secrets.token_hex(6)}"
        secret = f"rf_{key_id}_{secrets.token_urlsafe(24)}"
        item = ApiKeyItem(
            key_id=key_id,
            tenant=tenant,
            name=name.strip(),
            key_hash=hash_secret(secret),
            created_at=now_iso(),
        )
        self.dal.put_api_key(item)
        return NewApiKey(**_key_info(item).model_dump(), secret=secret)

    @_translated
    def revoke_api_key(self, key_id: str, *, tenant: str | None = None) -> ApiKeyInfo:
        """Revoke a key by its public id; it stops authenticating at once. With ``tenant``,
        another tenant's key is :class:`NotFound`."""
        if tenant is not None:
            _check_tenant(tenant)
        item = self.dal.get_api_key_by_id(key_id) if KEY_ID_PATTERN.match(key_id) else None
        if item is None or (tenant is not None and item.tenant != tenant):
            raise NotFound(f"API key {key_id} not found")
        return _key_info(self.dal.revoke_api_key(item.key_hash, now_iso()))

    @_translated
    def list_api_keys(self, tenant: str) -> list[ApiKeyInfo]:
        """The tenant's keys, oldest first, revoked ones included (never a secret)."""
        _check_tenant(tenant)
        return [_key_info(item) for item in self.dal.list_api_keys(tenant)]

    @_translated
    def authenticate(self, secret: str) -> str | None:
        """The tenant of a valid, unrevoked key; ``None`` for anything else."""
        item = self.authenticated_key(secret)
        return item.tenant if item is not None else None

    def authenticated_key(self, secret: str) -> ApiKeyItem | None:
        """The valid, unrevoked key ``secret`` is; ``None`` for anything else."""
        if not isinstance(secret, str) or not secret.startswith("rf_") or len(secret) > 200:
            return None
        computed = hash_secret(secret)
        item = self.dal.get_api_key(computed)
        if item is None or not hmac.compare_digest(item.key_hash, computed):
            return None
        if item.revoked_at is not None:
            return None
        return item

    # -- lookups -----------------------------------------------------------------------------

    def _workflow(self, tenant: str, workflow_id: str) -> WorkflowItem:
        _check_tenant(tenant)
        head = (
            self.dal.get_workflow(tenant, workflow_id)
            if isinstance(workflow_id, str) and WORKFLOW_ID_PATTERN.match(workflow_id)
            else None
        )
        if head is None:
            raise NotFound(f"workflow {workflow_id} not found")
        return head

    def _workflow_and_versions(
        self, tenant: str, workflow_id: str
    ) -> tuple[WorkflowItem, list[VersionItem]]:
        _check_tenant(tenant)
        head, versions = (
            self.dal.get_workflow_with_versions(tenant, workflow_id)
            if isinstance(workflow_id, str) and WORKFLOW_ID_PATTERN.match(workflow_id)
            else (None, [])
        )
        if head is None:
            raise NotFound(f"workflow {workflow_id} not found")
        return head, versions

    def _version(self, tenant: str, workflow_id: str, version: int) -> VersionItem:
        if not isinstance(version, int) or isinstance(version, bool):
            raise BadRequest("a version is an integer")
        item = self.dal.get_version(tenant, workflow_id, version) if version >= 1 else None
        if item is None:
            raise NotFound(f"workflow {workflow_id} has no version {version}")
        return item

    def _run(self, tenant: str, run_id: str) -> RunItem:
        _check_tenant(tenant)
        run = (
            self.dal.get_run(tenant, run_id)
            if isinstance(run_id, str) and RUN_ID_PATTERN.match(run_id)
            else None
        )
        if run is None:
            raise NotFound(f"run {run_id} not found")
        return run


# ------------------------------------------------------------------------------- mapping


def _workflow_summary(item: WorkflowItem) -> WorkflowSummary:
    return WorkflowSummary.model_validate(
        item.model_dump(include=set(WorkflowSummary.model_fields))
    )


def _document_size_warnings(workflow: Any) -> list[str]:
    """``document-size`` warnings: the live state document can pass Step Functions' 256 KB."""
    from relayflow.compiler.docsize import document_size_problems

    return [f"{p.path}: {p.message} [{p.rule}]" for p in document_size_problems(workflow)]


@dataclass(frozen=True)
class _RunMode:
    """How a run is started: the engine that compiled its machine, and the dry-run flag."""

    engine_version: str | None
    dry_run: bool
    step_through: bool = False


def _engine_of(version: VersionItem) -> dict[str, str]:
    """The head attribute naming the engine of ``version`` (none for versions published
    before versions recorded it)."""
    return {"live_engine_version": version.engine_version} if version.engine_version else {}


def _run_summary(item: RunItem) -> RunSummary:
    item = with_duration(item)  # an Express machine records no duration (engines.md)
    return RunSummary.model_validate(item.model_dump(include=set(RunSummary.model_fields)))


def _step_entry(step: StepRun) -> StepEntry:
    return StepEntry(
        key=step.key,
        type=step.type,
        status=step.status,
        attempts=step.attempts,
        started_at=_z(step.started_at),
        ended_at=_z(step.ended_at),
        duration_ms=step.duration_ms,
        output=step.output,
        error=step.error,
        cause=step.cause,
        runner=step.runner,
        dry_run=step.dry_run if isinstance(step.dry_run, dict) else None,
    )


def _z(value: str | None) -> str | None:
    return iso(parse_iso(value)) if value else None


def _key_info(item: ApiKeyItem) -> ApiKeyInfo:
    return ApiKeyInfo(
        key_id=item.key_id,
        tenant=item.tenant,
        name=item.name,
        created_at=item.created_at,
        revoked_at=item.revoked_at,
    )


@lru_cache(maxsize=1)
def get_control_plane() -> ControlPlane:
    """The process's control plane (its clients are resolved at each call)."""
    return ControlPlane()
