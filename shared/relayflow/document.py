"""The state document every execution carries, and the payload a step Lambda receives.

Execution input (built only by :func:`execution_input`)::

    {"run": {"id", "workflow_id", "version", "tenant", "dry_run", "started_at", "depth"},
     "trigger": <trigger payload>, "steps": {}}

A child run's input (built in ASL by a compiled ``sub_workflow`` step) has the same shape, with
``depth`` one more than its parent's and ``run.parent = {run_id, workflow_id, step}``.

Each finished step writes ``$.steps.<key> = {"output": …, "status": "succeeded"}`` through its
own ``ResultPath``. An error route receives the error at ``$.error`` (``{Error, Cause}``).
Inside a ``for_each`` iteration the document also holds ``item`` and ``index``.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

#: Top-level names a template or expression may start from.
ROOTS = ("trigger", "steps", "run", "item", "index", "error")


class ParentRun(BaseModel):
    """Where a child run (started by a ``sub_workflow`` step) comes from."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    workflow_id: str
    step: str


class RunInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Run id; also the Step Functions execution name.")
    workflow_id: str
    version: int | None = Field(default=None, description="Workflow version the run is pinned to.")
    tenant: str = Field(default="local", description="Tenant that owns the run.")
    dry_run: bool = False
    started_at: str = Field(description="ISO-8601 UTC start time.")
    depth: int = Field(default=0, description="Sub-workflow nesting depth.")
    parent: ParentRun | None = Field(
        default=None, description="The run and step that started this run (a sub_workflow)."
    )


def new_run_id() -> str:
    return uuid.uuid4().hex


def execution_input(
    workflow_id: str,
    trigger: Any,
    *,
    run_id: str | None = None,
    version: int | None = None,
    tenant: str = "local",
    dry_run: bool = False,
    depth: int = 0,
) -> dict[str, Any]:
    """The execution input for a new run. Every starter (CLI, API, triggers) uses this."""
    run = RunInfo(
        id=run_id or new_run_id(),
        workflow_id=workflow_id,
        version=version,
        tenant=tenant,
        dry_run=dry_run,
        started_at=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        depth=depth,
    )
    # ``parent`` is set only in a child's input, which the compiled sub_workflow step builds.
    return {
        "run": run.model_dump(exclude={"parent"}),
        "trigger": trigger if trigger is not None else {},
        "steps": {},
    }


class StepRef(BaseModel):
    """What the compiler bakes into a Task's payload: which step, and its config.

    On the wire (:meth:`wire`) the config is one JSON-encoded string: user data (a mapping's
    keys, tool args, an HTTP body, a form schema) then never becomes a ``Parameters`` field
    name, so a user key ending in ``.$`` stays data instead of being read as a JSONPath.
    Parsing accepts that string (or, from Python, the object itself)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    type: str
    config: dict[str, Any] = Field(default_factory=dict)

    @field_validator("config", mode="before")
    @classmethod
    def _decode(cls, value: Any) -> Any:
        decoded = config_of({"config": value})
        return value if decoded is None else decoded

    def wire(self) -> dict[str, Any]:
        """The step as a Task payload carries it: ``config`` JSON-encoded (compact)."""
        return {"key": self.key, "type": self.type, "config": encode_config(self.config)}


def encode_config(config: dict[str, Any]) -> str:
    """A step config as the JSON string a Task payload carries (see :class:`StepRef`)."""
    return json.dumps(config, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def config_of(step: Any) -> dict[str, Any] | None:
    """The config of a payload's ``step`` object, decoded; ``None`` when it has none or it is
    malformed (the step's own parsing then reports the payload)."""
    config = step.get("config") if isinstance(step, dict) else None
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return None
    return config if isinstance(config, dict) else None


class TaskContext(BaseModel):
    model_config = ConfigDict(extra="ignore")

    execution_id: str | None = None
    state: str | None = None
    attempt: int = Field(default=0, description="Step Functions ``$$.State.RetryCount``.")


class StepTask(BaseModel):
    """The ``Payload`` of every Lambda Task the compiler emits."""

    model_config = ConfigDict(extra="ignore")

    step: StepRef
    doc: dict[str, Any] = Field(description="The state document at the time the step runs.")
    context: TaskContext = Field(default_factory=TaskContext)
    #: Size of the document as Step Functions sent it (before offloaded outputs are read).
    _doc_bytes: int | None = PrivateAttr(default=None)


class StepResult(BaseModel):
    """What a step Lambda returns; the Task's ``ResultSelector`` keeps ``output`` (and
    ``branch`` for routing steps) under ``$.steps.<key>``."""

    output: Any = None
    branch: str | None = None


def task_parameters(
    function_arn: str, step: StepRef, *, task_token: bool = False
) -> dict[str, Any]:
    """ASL ``Parameters`` for a ``lambda:invoke`` Task that runs ``step``. With
    ``task_token`` (a ``.waitForTaskToken`` Task) the payload also carries ``task_token``."""
    payload: dict[str, Any] = {
        "step": step.wire(),
        "doc.$": "$",
        "context": {
            "execution_id.$": "$$.Execution.Id",
            "state.$": "$$.State.Name",
            "attempt.$": "$$.State.RetryCount",
        },
    }
    if task_token:
        payload["task_token.$"] = "$$.Task.Token"
    return {"FunctionName": function_arn, "Payload": payload}
