"""Parked runs: ``GET /runs?status=parked`` and ``POST /runs/{id}/resume``.

A run parks when a step with ``on_error: {action: park}`` fails (:mod:`relayflow.steps.park`
stores the park and marks the run ``parked``). ``resume`` answers the park's task token with
the decision, which the compiled machine (:mod:`relayflow.compiler.on_error`) acts on:

* ``retry`` runs the failed step again;
* ``skip`` goes on along the step's success route with ``output`` as the step's output;
* ``fail`` takes the step's failure route (``<key>.park.failed``), else fails the run.

``context`` is merged (shallowly) into the run's trigger data before a retry or skip. Keys the
engine owns are refused with 422 naming them; a run that is not parked is 409; another tenant's
run is 404 and stays as it was.

Order of a resume: the park is *claimed* (one conditional update, so of two racing resumes
exactly one wins), the run is marked ``running`` again, and only then is the token answered,
so a retry that parks the run again is never overwritten by this resume.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from relayflow.control.errors import (
    BadRequest,
    Conflict,
    Unprocessable,
)
from relayflow.control.lookups import find_run
from relayflow.control.models import Page, RunSummary, shared_fields
from relayflow.control.ports import Ports
from relayflow.control.waits import TokenGone, send_task
from relayflow.dal.items import TERMINAL_STATUSES
from relayflow.document import ROOTS

if TYPE_CHECKING:
    from relayflow.dal.items import RunItem

ResumeAction = Literal["retry", "skip", "fail"]
#: Keys ``context`` may not set: the state document's own fields, which the engine owns.
RESERVED_CONTEXT_KEYS = frozenset(
    {*ROOTS, "counters", "park", "run_flags", "compensation", "parent", "depth"}
)
#: Prefixes of engine-owned keys (a linear retry's counter is ``retry_<key>``).
RESERVED_CONTEXT_PREFIXES = ("retry_",)
#: Step Functions' limit on a SendTaskSuccess output.
MAX_DECISION_BYTES = 256 * 1024


class ResumeRequest(BaseModel):
    """The body of ``POST /runs/{id}/resume``."""

    model_config = ConfigDict(extra="forbid")

    action: ResumeAction = Field(
        description="retry: run the failed step again; skip: go on with output as the "
        "step's output; fail: fail the step (its on_failure route, else the run)."
    )
    output: Any = Field(None, description="skip: the step's output.")
    context: dict[str, Any] | None = Field(
        None,
        description="Merged (shallowly) into the run's trigger data before a retry or skip. "
        "Reserved keys (run, steps, error and the other engine-owned keys) are refused.",
    )


class ResumeResult(BaseModel):
    run_id: str
    action: ResumeAction
    step: str = Field(description="The parked step the decision applies to.")
    status: str = Field(description="The run's status now: running.")


def reserved_keys(context: dict[str, Any] | None) -> list[str]:
    """The keys of ``context`` that the engine owns, sorted."""
    return sorted(
        k
        for k in context or {}
        if k in RESERVED_CONTEXT_KEYS or k.startswith(RESERVED_CONTEXT_PREFIXES)
    )


class Parks:
    """Parked runs, over the control plane's ``ports``."""

    def __init__(self, ports: Ports) -> None:
        from relayflow.dal.parks import ParkDal

        self.ports = ports
        self.parks = ParkDal(ports.dal)

    def list_parked(
        self, tenant: str, *, limit: int = 20, next_token: str | None = None
    ) -> Page[RunSummary]:
        """The tenant's parked runs, longest parked first."""
        if not 1 <= limit <= 100:
            raise BadRequest("limit must be between 1 and 100")
        parks, token = self.parks.list_parked(tenant, limit=limit, next_token=next_token)
        runs: list[RunSummary] = []
        for park in parks:
            run = self.ports.dal.get_run(tenant, park.run_id)
            if run is not None and run.status == "parked" and _park_of(run) == park.park_id:
                runs.append(RunSummary.model_validate(_summary_fields(run)))
            elif run is None or run.status in TERMINAL_STATUSES:
                # The run ended while parked (timed out, cancelled): the park leaves the list.
                self.parks.expire(tenant, park.park_id)
        return Page[RunSummary](items=runs, next_token=token)

    def resume(self, tenant: str, run_id: str, request: ResumeRequest) -> ResumeResult:
        """Answer the park of a parked run (see the module docstring)."""
        from relayflow.steps.approval import iso

        run = find_run(self.ports.dal, tenant, run_id)
        _check_request(request)
        park_id = _park_of(run)
        if run.status != "parked" or park_id is None:
            raise Conflict(f"run {run_id} is {run.status}, not parked: there is nothing to resume")
        if request.context and not self._mergeable(tenant, park_id):
            raise Unprocessable(
                "the run's trigger data is not an object, so no context can be merged into it",
                [{"path": "context", "rule": "context-not-mergeable", "message": "not an object"}],
            )
        decision = {
            "action": request.action,
            "output": request.output,
            "context": request.context or None,
        }
        park = self.parks.claim(tenant, park_id, decision, iso(datetime.now(UTC)))
        if park is None:
            raise Conflict(f"run {run_id} was resumed by another call")
        self.ports.dal.update_run(
            tenant, run_id, {"status": "running", "parked": None}, if_status=("parked",)
        )
        try:
            self._send(park.task_token, decision)
        except TokenGone as exc:
            self.parks.expire(tenant, park_id)
            raise Conflict(
                f"run {run_id} no longer waits at step {park.step} (its park timed out)"
            ) from exc
        except Exception:
            # The token was not answered: the run still waits, so the same request can be
            # sent again.
            self.parks.release(tenant, park_id)
            self.ports.dal.update_run(
                tenant, run_id, {"status": "parked", "parked": park.info()}, if_status=("running",)
            )
            raise
        return ResumeResult(run_id=run_id, action=request.action, step=park.step, status="running")

    def _mergeable(self, tenant: str, park_id: str) -> bool:
        park = self.parks.get(tenant, park_id)
        return park is None or park.mergeable  # a missing park is a 409 just after

    def _send(self, token: str, decision: dict[str, Any]) -> None:
        output = json.dumps(decision, separators=(",", ":"))
        send_task(
            self.ports.machines.client,
            lambda client: client.send_task_success(taskToken=token, output=output),
        )


def _park_of(run: RunItem) -> str | None:
    parked = run.parked or {}
    park_id = parked.get("park_id")
    return park_id if isinstance(park_id, str) else None


def _summary_fields(run: RunItem) -> dict[str, Any]:
    return shared_fields(RunSummary, run)


def _check_request(request: ResumeRequest) -> None:
    """422 for engine-owned context keys, and for a decision Step Functions cannot carry."""
    from relayflow.intake import IntakeError, check_value

    reserved = reserved_keys(request.context)
    if reserved:
        raise Unprocessable(
            f"context may not set engine-owned keys: {', '.join(reserved)}",
            [
                {"path": f"context.{k}", "rule": "reserved-context-key", "message": f"{k!r}"}
                for k in reserved
            ],
        )
    for name in ("output", "context"):
        try:
            check_value(getattr(request, name), name, level=1)
        except IntakeError as exc:
            detail = {"path": exc.path, "rule": exc.rule, "message": exc.message}
            raise Unprocessable(f"the {name} cannot be used: {exc.message}", [detail]) from None
    size = len(json.dumps(request.model_dump(mode="json"), separators=(",", ":")).encode())
    if size > MAX_DECISION_BYTES - 1024:
        raise Unprocessable(
            "output and context together exceed what Step Functions carries (256 KB)",
            [{"path": "output", "rule": "size", "message": f"{size} bytes"}],
        )
