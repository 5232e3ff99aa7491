"""What the control plane returns; these are also the API's response models."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, Field, model_validator

from relayflow.control.outcome import Outcome, outcome_of
from relayflow.dal.items import TERMINAL_STATUSES

T = TypeVar("T")
_View = TypeVar("_View", bound=BaseModel)


def shared_fields(
    view: type[BaseModel], item: BaseModel, *, but: AbstractSet[str] = frozenset()
) -> dict[str, Any]:
    """The fields of ``item`` (a stored item) that the API model ``view`` has too, but
    ``but``."""
    return item.model_dump(include=set(view.model_fields) - set(but))


def view_of(view: type[_View], item: BaseModel) -> _View:
    """``item`` as the API model ``view`` shows it: the fields the two share."""
    return view.model_validate(shared_fields(view, item))


class ParkInfo(BaseModel):
    """Where a parked run waits, and the error that parked it."""

    park_id: str
    step: str = Field(description="The step that failed and parked the run.")
    error: dict[str, Any] | None = Field(None, description="{Error, Cause} of the failure.")
    parked_at: str
    deadline: str | None = Field(
        None, description="When the park times out (Relayflow.ParkTimeout)."
    )


class WorkflowVersionInfo(BaseModel):
    version: int
    created_at: str
    asl_sha256: str = Field(description="sha256 of the compiled state machine definition.")
    engine_version: str | None = Field(
        None, description="The Relayflow engine version that compiled this version."
    )
    warnings: list[str] = Field(default_factory=list)
    engine: str = Field("standard", description="Step Functions engine: standard or express.")
    engine_reason: str | None = Field(None, description="Why this engine (docs/engines.md).")


class WorkflowSummary(BaseModel):
    workflow_id: str
    name: str | None = None
    enabled: bool = Field(description="False once deleted: new runs are refused.")
    live_version: int = Field(description="The version new runs start on.")
    latest_version: int
    created_at: str
    updated_at: str
    engine: str = Field(
        "standard", description="Its state machine's type: standard or express (docs/engines.md)."
    )


class WorkflowDetail(WorkflowSummary):
    definition: dict[str, Any] = Field(description="The live version's definition.")
    versions: list[WorkflowVersionInfo] = Field(description="Every version, oldest first.")


class PutWorkflowResult(BaseModel):
    workflow_id: str
    version: int = Field(description="The version this request made live.")
    live_version: int
    created: bool = Field(description="True when this request created the workflow.")
    warnings: list[str] = Field(default_factory=list)


class StepEntry(BaseModel):
    key: str = Field(description="Step key; for_each items are key[index].")
    type: str
    status: str
    attempts: int = Field(
        description="Calls the step made: Task attempts that ran (1 for a native step); "
        "refused attempts are in refusals."
    )
    refusals: int = Field(
        0,
        description="Attempts refused before any call (Relayflow.Throttled: no flow-control "
        "slot or rate window yet; Relayflow.CircuitOpen: the breaker is open).",
    )
    started_at: str | None = None
    ended_at: str | None = None
    duration_ms: float | None = None
    output: Any = None
    error: str | None = None
    cause: str | None = None
    runner: str | None = Field(None, description="'native' or the function kind that ran it.")
    dry_run: dict[str, Any] | None = Field(
        None,
        description="Dry runs only: {simulated: true, call} for a step that recorded the call it "
        "would make (AWS action and args, or HTTP method, url, headers without secrets, body) "
        "instead of acting; {simulated: false, read: true} for a dry_run: read tool.",
    )


class CompensationError(BaseModel):
    step: str = Field(description="The compensated step (for_each items: key[index]).")
    error: str | None = None
    cause: str | None = None


class Compensation(BaseModel):
    """What a failed, cancelled or timed-out run undid (saga compensation, docs/reliability.md)."""

    status: Literal["compensated", "partially_compensated"]
    steps: list[str] = Field(description="The compensated steps, in the order they were undone.")
    errors: list[CompensationError] = Field(
        default_factory=list, description="The compensations that failed."
    )


class RunSummary(BaseModel):
    run_id: str
    workflow_id: str
    version: int | None = None
    status: str = Field(
        description="queued, pending (debounced or batched), running, parked (waiting at a "
        "failed step for a resume), succeeded, failed, timed_out or aborted."
    )
    started_at: str
    ended_at: str | None = None
    duration_ms: float | None = None
    error: str | None = None
    attempt: int = Field(
        1, description="Executions of the run: more than 1 after a retry from the DLQ."
    )
    engine_version: str | None = Field(
        None, description="The Relayflow engine version that compiled the run's state machine."
    )
    dry_run: bool = Field(
        False, description="A dry run: steps that act on the world only record the call."
    )
    step_through: bool = Field(
        False, description="A step-through run: it pauses before each step until continued."
    )
    rerun_of: str | None = Field(
        None, description="A rerun from a step: the run whose trigger and outputs it reused."
    )
    rerun_from: str | None = Field(None, description="A rerun: the step it started at.")
    transitions: int | None = Field(
        None,
        description="State transitions the run's execution made (states entered plus Task "
        "retries), counted from its history when it ended; null while running.",
    )
    lambda_invocations: int | None = Field(
        None, description="Step Lambda invocations of the run (retries included)."
    )
    lambda_ms: float | None = Field(
        None, description="Step Lambda time of the run, each invocation rounded up to 1 ms."
    )
    engine: str = Field(
        "standard", description="The run's Step Functions engine: standard or express."
    )
    estimated_cost_usd: float | None = Field(
        None,
        description="Estimated AWS cost of the run at list prices (docs/cost.md). Standard: "
        "its state transitions, step Lambdas and recording; null without counts. Express: "
        "its request, duration and recording (step Lambdas when counted); null while running.",
    )

    outcome: Outcome | None = Field(
        None,
        description="A finished run's verdict: succeeded, succeeded_with_fallbacks, failed, "
        "compensated, partially_compensated, timed_out or cancelled.",
    )
    parked: ParkInfo | None = Field(None, description="While parked: where and why.")

    compensation: Compensation | None = Field(
        None,
        description="A failed, cancelled or timed-out run's saga compensation, when it undid "
        "any step.",
    )

    @model_validator(mode="after")
    def _derived(self) -> RunSummary:
        if self.estimated_cost_usd is None:
            from relayflow.cost.runs import run_cost_usd

            self.estimated_cost_usd = run_cost_usd(
                self.transitions,
                self.lambda_invocations,
                self.lambda_ms,
                duration_ms=self.duration_ms,
                engine="express" if self.engine == "express" else "standard",
            )
        # A run ended by a path that records no verdict (a cancel, a refused start) reads the
        # plain verdict of its status.
        if self.outcome is None and self.status in TERMINAL_STATUSES:
            self.outcome = outcome_of(self.status, fallbacks_used=False)  # type: ignore[assignment]
        return self


class RunDetail(RunSummary):
    input: Any = None
    output: Any = None
    cause: str | None = None
    failing_step: str | None = None
    steps: list[StepEntry] = Field(default_factory=list)
    timeline_source: str | None = Field(
        None,
        description="Where steps came from: 'history' (Standard), 'records' (an Express "
        "run's step records and final document only) or 'records+logs' (those and its state "
        "machine's CloudWatch Logs).",
    )
    timeline_note: str | None = Field(
        None,
        description="What the timeline lacks and why (logs not configured, not readable, "
        "incomplete, or not delivered yet); absent when nothing is known to be missing.",
    )


class ContinueResult(BaseModel):
    run_id: str
    released: str | None = Field(
        None, description="The step this call let start (none when to_end found no gate)."
    )
    to_end: bool = Field(description="Whether the run now runs to its end without pausing.")


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_token: str | None = Field(None, description="Pass back to get the next page.")


class StartRunResult(RunSummary):
    created: bool = Field(description="False when an Idempotency-Key repeat found the run.")
    admission: str | None = Field(
        None,
        description="What run admission did (docs/flow-control.md): queued, skipped (run_id "
        "names the running run), debounced or batched; absent when the run simply started.",
    )
    starts_at: str | None = Field(None, description="A debounced run's current start time.")
    batch_size: int | None = Field(None, description="Triggers in the batch so far.")


class ApiKeyInfo(BaseModel):
    key_id: str
    tenant: str
    name: str
    created_at: str
    revoked_at: str | None = None


class NewApiKey(ApiKeyInfo):
    secret: str = Field(description="Shown once; only its sha256 is stored.")


class DlqEntryInfo(BaseModel):
    """A DLQ entry as the API shows it."""

    run_id: str
    workflow_id: str
    version: int | None = None
    status: str = Field(description="pending, retrying, retried, exhausted or discarded.")
    run_status: str = Field(description="How the run's last execution ended: failed or timed_out.")
    error: str | None = None
    cause: str | None = None
    failing_step: str | None = None
    trigger_type: str
    input: Any = Field(None, description="The run's trigger payload.")
    outputs: dict[str, Any] | None = Field(
        None, description="Outputs of the steps that succeeded (absent when too large to keep)."
    )
    transient: bool = Field(description="Whether it is retried automatically.")
    attempts: int = Field(description="Retries started so far (automatic and manual).")
    auto_attempts: int
    max_auto_attempts: int = Field(3, description="Automatic retries at most.")
    archived_at: str
    updated_at: str
    next_retry_at: str | None = Field(None, description="When the next automatic retry is due.")
    last_retry_at: str | None = None
    last_retry_by: str | None = None
    resolved_at: str | None = None


class DlqRetryResult(BaseModel):
    run_id: str
    attempt: int = Field(description="The run's execution number: 2 for the first retry.")
    status: str = Field(description="The run's status: running.")
    entry: DlqEntryInfo


class Decision(BaseModel):
    option: str
    approved: bool
    data: Any = None
    responder: str
    responded_at: str


class ApprovalView(BaseModel):
    """An approval request as callers see it (never with its task token)."""

    approval_id: str
    workflow_id: str
    run_id: str
    step: str
    title: str
    description: str | None = None
    prompt: str | None = None
    options: list[str]
    form_schema: dict[str, Any] | None = None
    assigned_to: str | None = None
    assigned_role: str | None = None
    status: str = Field(description="pending, decided or expired.")
    created_at: str
    expires_at: str | None = Field(None, description="Decision deadline; none: never expires.")
    timeout_action: str = Field(description="What expiry does: fail, approve, reject, route.")
    decision: Decision | None = None


class WaitpointView(BaseModel):
    """A waitpoint as callers see it (never with its task token)."""

    waitpoint_id: str
    workflow_id: str
    run_id: str
    step: str
    label: str | None = None
    idempotency_key: str | None = None
    status: str = Field(description="pending, completed, failed or expired.")
    created_at: str
    expires_at: str | None = Field(None, description="Deadline; none: never expires.")
    completed_at: str | None = None
    result: Any = Field(None, description="The completion data.")
    error: dict[str, Any] | None = Field(None, description="{error, message} of a failure.")
