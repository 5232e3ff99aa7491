"""Limits, helpers and mappings shared by the parts of the control plane
(:mod:`relayflow.control.service`)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ParamSpec, TypeVar

from relayflow.control.errors import (
    ApiError,
    BadRequest,
    CompilerBug,
    Conflict,
    InvalidDefinition,
    PayloadTooLarge,
    ServiceUnavailable,
    TooManyRequests,
)
from relayflow.control.express_timeline import with_duration, with_native_verdict
from relayflow.control.models import ApiKeyInfo, RunSummary, StepEntry, WorkflowSummary
from relayflow.control.timeline import StepRun
from relayflow.dal import (
    ApiKeyItem,
    DataAccessError,
    InvalidPageToken,
    ItemTooLarge,
    RunItem,
    VersionItem,
    WorkflowItem,
)
from relayflow.dal import Throttled as DalThrottled
from relayflow.executions import stepfunctions as sfn_api

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


def to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    """YAML gives dates and times as objects; a definition stores them as ISO text."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def loads_optional(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class BreakerOpen(Conflict):
    """409: the workflow's circuit breaker is open; ``details`` name the breaker and when it
    lets a run through (``reopens_at``), and ``Retry-After`` says the same in seconds."""

    def __init__(self, message: str, details: dict[str, Any], retry_after: int | None) -> None:
        super().__init__(message, details)
        self.retry_after = retry_after


def check_quotas(workflow: Any, asl: Mapping[str, Any], engine: str) -> None:
    """Refuse a compiled machine past a Step Functions quota its definition reaches
    (:mod:`relayflow.compiler.quotas`: the definition size with the child schemas and engine
    wrapper this deployment adds, the execution history of a Standard machine): the
    definition's problem, 422 ``invalid_definition``, before anything is deployed."""
    from relayflow.compiler.quotas import history_problems, size_problem

    problems = [p for p in (size_problem(asl),) if p is not None]
    if engine == "standard":
        problems += history_problems(workflow, asl)
    if problems:
        raise InvalidDefinition.from_problems(problems)


def check_compiled(asl: Mapping[str, Any], *, what: str = "the compiled state machine") -> None:
    """Refuse to deploy a compiled machine that fails :mod:`relayflow.compiler.check`. Over
    the definition size quota it is the definition's problem (422 ``invalid_definition``,
    rule ``compiled-size``; ``what`` names the machine); any other violation is a compiler
    bug, logged in full and answered with 500 ``compiler_bug``."""
    from relayflow.compiler.check import CompiledMachineInvalid, assert_valid_machine
    from relayflow.compiler.quotas import size_problem

    too_large = size_problem(asl, what=what)
    if too_large is not None:
        raise InvalidDefinition.from_problems([too_large])
    try:
        assert_valid_machine(asl)
    except CompiledMachineInvalid as exc:
        from relayflow.observability import logger

        logger.error("compiled state machine failed the check", extra={"reason": str(exc)})
        raise CompilerBug.from_violations(exc.violations) from exc


def translated(method: Callable[P, R]) -> Callable[P, R]:
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


def check_tenant(tenant: str) -> None:
    if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
        raise BadRequest(f"invalid tenant id {tenant!r}: allowed ^[a-z0-9][a-z0-9-]{{1,30}}$")


def check_limit(limit: int) -> None:
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


def _workflow_summary(item: WorkflowItem) -> WorkflowSummary:
    return WorkflowSummary.model_validate(
        item.model_dump(include=set(WorkflowSummary.model_fields))
    )


def _document_size_warnings(workflow: Any) -> list[str]:
    """A saved workflow's warnings: ``document-size`` (the live state document can pass Step
    Functions' 256 KB) and the definition's own (:mod:`relayflow.validation.advisories`)."""
    from relayflow.compiler.docsize import document_size_problems
    from relayflow.validation.advisories import definition_warnings

    found = definition_warnings(workflow) + document_size_problems(workflow)
    return [f"{p.path}: {p.message} [{p.rule}]" for p in found]


@dataclass(frozen=True)
class RunMode:
    """How a run is started: the engine that compiled its machine, and the dry-run flag."""

    engine_version: str | None
    dry_run: bool
    step_through: bool = False
    #: A rerun from a step (:mod:`relayflow.control.rerun`): where and what it starts with.
    rerun: RerunSeed | None = None


@dataclass(frozen=True)
class RerunSeed:
    """What a rerun's execution input carries besides the trigger: the run it reruns, the
    main-flow step it starts at, and the earlier run's step outputs (``$.steps``)."""

    of: str
    from_step: str
    steps: dict[str, Any]


def _engine_of(version: VersionItem) -> dict[str, str]:
    """The head attribute naming the engine of ``version`` (none for versions published
    before versions recorded it)."""
    return {"live_engine_version": version.engine_version} if version.engine_version else {}


def _run_summary(item: RunItem) -> RunSummary:
    # An Express machine records no duration and no verdict (engines.md).
    item = with_native_verdict(with_duration(item))
    return RunSummary.model_validate(item.model_dump(include=set(RunSummary.model_fields)))


def _step_entry(step: StepRun) -> StepEntry:
    from relayflow.causes import public_document

    return StepEntry(
        key=step.key,
        type=step.type,
        status=step.status,
        attempts=step.attempts,
        refusals=step.refusals,
        started_at=_z(step.started_at),
        ended_at=_z(step.ended_at),
        duration_ms=step.duration_ms,
        # A fallback's or a failed item's record holds the caught error: its public form.
        output=public_document(step.output),
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
