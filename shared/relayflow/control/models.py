"""What the control plane returns; these are also the API's response models."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")


class WorkflowVersionInfo(BaseModel):
    version: int
    created_at: str
    asl_sha256: str = Field(description="sha256 of the compiled state machine definition.")
    warnings: list[str] = Field(default_factory=list)


class WorkflowSummary(BaseModel):
    workflow_id: str
    name: str | None = None
    enabled: bool = Field(description="False once deleted: new runs are refused.")
    live_version: int = Field(description="The version new runs start on.")
    latest_version: int
    created_at: str
    updated_at: str


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
    attempts: int
    started_at: str | None = None
    ended_at: str | None = None
    duration_ms: float | None = None
    output: Any = None
    error: str | None = None
    cause: str | None = None
    runner: str | None = Field(None, description="'native' or the function kind that ran it.")


class RunSummary(BaseModel):
    run_id: str
    workflow_id: str
    version: int | None = None
    status: str = Field(description="running, succeeded, failed, timed_out or aborted.")
    started_at: str
    ended_at: str | None = None
    duration_ms: float | None = None
    error: str | None = None


class RunDetail(RunSummary):
    input: Any = None
    output: Any = None
    cause: str | None = None
    failing_step: str | None = None
    steps: list[StepEntry] = Field(default_factory=list)


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_token: str | None = Field(None, description="Pass back to get the next page.")


class StartRunResult(RunSummary):
    created: bool = Field(description="False when an Idempotency-Key repeat found the run.")


class ApiKeyInfo(BaseModel):
    key_id: str
    tenant: str
    name: str
    created_at: str
    revoked_at: str | None = None


class NewApiKey(ApiKeyInfo):
    secret: str = Field(description="Shown once; only its sha256 is stored.")
