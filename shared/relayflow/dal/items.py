"""The items of the Relayflow table, as pydantic models.

Each model knows its own keys (built by :mod:`relayflow.dal.keys`), turns itself into the
attributes it is stored as (:meth:`to_item`) and reads itself back (:meth:`from_item`). Every
item carries ``tenant``. Attributes a model does not know are ignored when read, so a newer
writer never breaks an older reader.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from relayflow.dal import keys

RunStatus = Literal["queued", "running", "parked", "succeeded", "failed", "timed_out", "aborted"]
RUN_STATUSES: tuple[str, ...] = (
    "queued",
    "running",
    "parked",
    "succeeded",
    "failed",
    "timed_out",
    "aborted",
)
#: ``queued``: waiting for a concurrency slot (``docs/flow-control.md``); not started yet.
#: ``parked``: running, but waiting at a failed step for ``POST /runs/{id}/resume``.
TERMINAL_STATUSES: frozenset[str] = frozenset(RUN_STATUSES) - {"running", "queued", "parked"}
#: Statuses of a run whose execution runs (a parked run's waits on its park).
ACTIVE_STATUSES: tuple[str, ...] = ("running", "parked")

#: The key attributes of an item: the table's and GSI1's (a GSI1 page's last key has all four).
KEY_ATTRIBUTES = ("pk", "sk", "gsi1pk", "gsi1sk")


class ItemModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=False)

    #: The attribute that tells item kinds apart in exports and the console.
    kind: ClassVar[str] = ""

    def key(self) -> keys.Key:
        raise NotImplementedError

    def index_keys(self) -> dict[str, str]:
        """GSI1 attributes (none by default)."""
        return {}

    def to_item(self) -> dict[str, Any]:
        """The attributes stored in DynamoDB: the keys, ``type`` and the model's fields.
        Empty (``None``) fields are left out, so ``attribute_not_exists`` means "not set"."""
        return {
            **self.key(),
            **self.index_keys(),
            "type": self.kind,
            **self.model_dump(mode="json", exclude_none=True),
        }

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Any:
        return cls.model_validate(
            {k: v for k, v in item.items() if k not in KEY_ATTRIBUTES and k != "type"}
        )


class ApiKeyItem(ItemModel):
    """An API key. Only the sha256 of its secret is stored."""

    kind: ClassVar[str] = "api_key"

    key_id: str = Field(description="Public id, e.g. key_0123456789ab.")
    tenant: str
    name: str
    key_hash: str = Field(description="sha256 hex of the secret; also in the partition key.")
    created_at: str
    revoked_at: str | None = None

    def key(self) -> keys.Key:
        return keys.api_key_key(self.key_hash)

    def index_keys(self) -> dict[str, str]:
        return {
            "gsi1pk": keys.api_keys_partition(self.tenant),
            "gsi1sk": keys.api_keys_sort(self.created_at, self.key_id),
        }


class KeyIdItem(ItemModel):
    """Pointer from an API key's public id to its hash, so a key can be revoked by id."""

    kind: ClassVar[str] = "api_key_id"

    key_id: str
    tenant: str
    key_hash: str

    def key(self) -> keys.Key:
        return keys.key_id_key(self.key_id)


class WorkflowItem(ItemModel):
    """A workflow's head item: what is live, the latest version, the state machine."""

    kind: ClassVar[str] = "workflow"

    workflow_id: str
    tenant: str
    name: str | None = None
    enabled: bool = True
    live_version: int
    latest_version: int
    live_version_arn: str = Field(
        description="State machine version ARN of live_version (new runs start on it)."
    )
    state_machine_arn: str
    alias_arn: str | None = Field(None, description="The `live` alias, for callers outside.")
    created_at: str
    updated_at: str
    engine: str = Field(
        "standard", description="Type of its state machine: standard or express (fixed)."
    )
    live_engine_version: str | None = Field(
        None, description="Engine version that compiled live_version (copied onto each run)."
    )

    def key(self) -> keys.Key:
        return keys.workflow_key(self.tenant, self.workflow_id)

    def index_keys(self) -> dict[str, str]:
        return {"gsi1pk": keys.workflows_partition(self.tenant), "gsi1sk": self.workflow_id}


class VersionItem(ItemModel):
    """One published version of a workflow. Immutable once written."""

    kind: ClassVar[str] = "workflow_version"

    tenant: str
    workflow_id: str
    version: int
    definition: str = Field(description="The submitted definition, as compact JSON.")
    asl_sha256: str
    state_machine_version_arn: str
    created_at: str
    warnings: list[str] = Field(default_factory=list)
    step_types: dict[str, str] = Field(
        default_factory=dict, description="Step key → step type (for run timelines)."
    )
    step_runners: dict[str, str] = Field(
        default_factory=dict, description="Step key → 'native' or the function kind."
    )
    engine_version: str | None = Field(
        None, description="The Relayflow engine version that compiled this state machine."
    )
    engine: str = Field("standard", description="The machine type it was compiled for.")
    engine_reason: str | None = Field(None, description="Why (relayflow.compiler.engine).")
    step_through_version_arn: str | None = Field(
        None,
        description="The step-through variant of this version (a version of the same state "
        "machine), published on the first step-through run.",
    )
    rerun_version_arn: str | None = Field(
        None,
        description="The rerun variant of this version (a Choice at the top that starts at "
        "a chosen step), published on the first rerun from a step.",
    )
    compensation_version_arn: str | None = Field(
        None,
        description="The compensation variant of this version (a version of the workflow's "
        "<id>.saga machine), started when a saga run is cancelled or times out.",
    )

    def key(self) -> keys.Key:
        return keys.version_key(self.tenant, self.workflow_id, self.version)


class RunItem(ItemModel):
    """One run (one Step Functions execution)."""

    kind: ClassVar[str] = "run"

    run_id: str
    tenant: str
    workflow_id: str
    version: int | None = None
    status: RunStatus = "running"
    execution_arn: str | None = None
    input: str | None = Field(None, description="The trigger input, as JSON (≤ 256 KB).")
    output: str | None = Field(None, description="The run's output, as JSON, when small enough.")
    error: str | None = None
    cause: str | None = None
    failing_step: str | None = None
    compensation: dict[str, Any] | None = Field(
        None,
        description="A failed, cancelled or timed-out run's saga compensation: {status, "
        "steps, errors} (relayflow.control.compensation).",
    )
    started_at: str
    ended_at: str | None = None
    duration_ms: float | None = None
    idempotency_key: str | None = None
    trigger_type: str = "api"
    expires_at: int | None = Field(None, description="TTL: epoch seconds.")
    started_event_at: str | None = Field(
        None, description="When the recorder published relayflow.run.started."
    )
    recorded_status: str | None = Field(
        None, description="The terminal status the recorder published a lifecycle event for."
    )
    attempt: int = Field(
        1,
        description="Executions of the run so far: a DLQ retry restarts it under the same run "
        "id as execution <run id>_r<attempt>.",
    )
    engine_version: str | None = Field(
        None, description="The Relayflow engine version that compiled the run's state machine."
    )
    dry_run: bool = Field(False, description="A dry run: acting steps record, never act.")
    step_through: bool = Field(False, description="Pauses before each step until continued.")
    step_mode: str | None = Field(
        None, description="'to_end' once a step-through run was told to run to its end."
    )
    rerun_of: str | None = Field(None, description="A rerun: the run it reran.")
    rerun_from: str | None = Field(None, description="A rerun: the step it started at.")
    engine: str = Field("standard", description="standard or express (its state machine's).")
    native_status: str | None = Field(
        None, description="The end an Express machine recorded itself (the sweep settles it)."
    )
    flow_key: str | None = Field(
        None,
        description="The admission gate slot the run holds or waits for: "
        "'singleton:<key id>' or 'concurrency:<key id>'.",
    )
    # What the run consumed, counted by the recorder from the execution's history at its end
    # (relayflow.cost.counts); absent while running and for runs with no history to count.
    transitions: int | None = Field(
        None, description="State transitions: states entered plus Task retries."
    )
    lambda_invocations: int | None = Field(None, description="Step Lambda invocations.")
    lambda_ms: float | None = Field(
        None, description="Step Lambda time, each invocation rounded up to 1 ms."
    )
    outcome: str | None = Field(
        None, description="The finished run's verdict (relayflow.control.outcome)."
    )
    parked: dict[str, Any] | None = Field(
        None,
        description="While parked: {park_id, step, error, parked_at, deadline} "
        "(relayflow.dal.parks).",
    )

    def key(self) -> keys.Key:
        return keys.run_key(self.tenant, self.run_id)

    def index_keys(self) -> dict[str, str]:
        return {
            "gsi1pk": keys.runs_partition(self.tenant, self.workflow_id),
            "gsi1sk": keys.runs_sort(self.started_at, self.run_id),
        }


class HookItem(ItemModel):
    """A webhook slug registration: which tenant's workflow (and which of its triggers)
    ``POST /hooks/<slug>`` starts. Written by trigger sync; read by the webhook function."""

    kind: ClassVar[str] = "hook"

    slug: str
    tenant: str
    workflow_id: str
    trigger_index: int = Field(description="Index of the webhook trigger in the definition.")
    enabled: bool = Field(description="False while the workflow is deleted (disabled).")
    created_at: str
    updated_at: str

    def key(self) -> keys.Key:
        return keys.hook_key(self.slug)

    def index_keys(self) -> dict[str, str]:
        return {"gsi1pk": keys.hooks_partition(self.tenant, self.workflow_id), "gsi1sk": self.slug}
