"""How the control plane stores and answers its records: JSON as it is stored, the API's
summaries of stored items, and how a run is started (:class:`RunMode`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relayflow.control.express_timeline import with_duration, with_native_verdict
from relayflow.control.models import (
    ApiKeyInfo,
    RunSummary,
    StepEntry,
    WorkflowSummary,
    view_of,
)
from relayflow.control.stored_json import json_default as json_default
from relayflow.control.stored_json import loads_optional as loads_optional
from relayflow.control.stored_json import loads_or_none as loads_or_none
from relayflow.control.stored_json import to_json as to_json
from relayflow.control.timeline import StepRun
from relayflow.control.times import normalized_iso
from relayflow.dal import ApiKeyItem, RunItem, VersionItem, WorkflowItem


@dataclass(frozen=True)
class RerunSeed:
    """What a rerun's execution input carries besides the trigger: the run it reruns, the
    main-flow step it starts at, and the earlier run's step outputs (``$.steps``)."""

    of: str
    from_step: str
    steps: dict[str, Any]


@dataclass(frozen=True)
class RunMode:
    """How a run is started: the engine that compiled its machine, and the dry-run flag."""

    engine_version: str | None
    dry_run: bool
    step_through: bool = False
    #: A rerun from a step (:mod:`relayflow.control.rerun`): where and what it starts with.
    rerun: RerunSeed | None = None


def live_engine_of(version: VersionItem) -> dict[str, str]:
    """The head attribute naming the engine of ``version`` (none for versions published
    before versions recorded it)."""
    return {"live_engine_version": version.engine_version} if version.engine_version else {}


def workflow_summary(item: WorkflowItem) -> WorkflowSummary:
    """A workflow head as the API lists it."""
    return view_of(WorkflowSummary, item)


def run_summary(item: RunItem) -> RunSummary:
    """A run item as the API lists it."""
    # An Express machine records no duration and no verdict (engines.md).
    item = with_native_verdict(with_duration(item))
    return view_of(RunSummary, item)


def step_entry(step: StepRun) -> StepEntry:
    """A step of a run's timeline as the API answers it."""
    from relayflow.causes import public_document

    return StepEntry(
        key=step.key,
        type=step.type,
        status=step.status,
        attempts=step.attempts,
        refusals=step.refusals,
        started_at=normalized_iso(step.started_at),
        ended_at=normalized_iso(step.ended_at),
        duration_ms=step.duration_ms,
        # A fallback's or a failed item's record holds the caught error: its public form.
        output=public_document(step.output),
        error=step.error,
        cause=step.cause,
        runner=step.runner,
        dry_run=step.dry_run if isinstance(step.dry_run, dict) else None,
    )


def key_info(item: ApiKeyItem) -> ApiKeyInfo:
    """An API key as the API lists it (never its hash)."""
    return view_of(ApiKeyInfo, item)
