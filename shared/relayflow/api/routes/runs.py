"""Run routes: start, list, get, cancel, release a step-through run's next step, rerun;
list and resume parked runs."""

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from pydantic import BaseModel, ConfigDict, Field

from relayflow.api.resolver import (
    MAX_VERSION,
    IdempotencyKey,
    Limit,
    NextToken,
    RunId,
    WorkflowId,
    control_plane,
    current_tenant,
    json_reply,
    no_body_or,
    response_docs,
    tenant_reply,
)
from relayflow.control.models import ContinueResult, Page, RunDetail, RunSummary, StartRunResult
from relayflow.control.rerun import RerunRequest
from relayflow.control.resume import ResumeRequest, ResumeResult

router = Router()


class StartRunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: Any = Field(
        default_factory=dict, description="The trigger payload (``trigger`` in expressions)."
    )
    version: int | None = Field(
        None,
        ge=1,
        le=MAX_VERSION,
        description="Run this version instead of the live one (the run stays on it).",
    )
    dry_run: bool = Field(
        False,
        description="A dry run: steps that act on the world (tool, webhook_out, custom) record "
        "the call they would make and return their dry_run_output instead; waits and "
        "approvals still wait, code steps run, and child runs are dry too.",
    )
    step_through: bool = Field(
        False,
        description="Step through: the run pauses before each step until POST "
        "/runs/{run_id}/continue (it runs on a separately compiled variant of the version).",
    )


class ContinueRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to_end: bool = Field(
        False, description="Let the run finish without pausing again (and release its gate)."
    )


@router.post(
    "/workflows/<workflow_id>/runs",
    summary="Start a run",
    description="Runs the live version, or `version`. With an Idempotency-Key header, a repeat "
    "returns the run the first request started (200) instead of starting another. An input "
    "that breaks the version's `input_schema` is 422 `invalid_input` (details: each JSON "
    "pointer, rule and message); nothing starts.",
    responses=response_docs(
        {
            201: "Started",
            200: "An idempotent repeat, or a singleton skip: the existing (running) run",
            202: "Accepted: queued, debounced or batched; the run starts later",
        },
        StartRunResult,
        404,
        409,
        413,
        415,
        422,
    ),
    tags=["runs"],
)
def start_run(
    workflow_id: WorkflowId,
    request: Annotated[StartRunRequest | None, Body()] = None,
    idempotency_key: IdempotencyKey = None,
) -> Response[StartRunResult]:
    request = no_body_or(request) or StartRunRequest()
    result = control_plane().start_run(
        current_tenant(),
        workflow_id,
        request.input,
        version=request.version,
        idempotency_key=idempotency_key,
        dry_run=request.dry_run,
        step_through=request.step_through,
    )
    if result.admission in ("queued", "debounced", "batched"):
        return json_reply(202, result)  # accepted: the run starts later (docs/flow-control.md)
    return json_reply(201 if result.created else 200, result)


@router.get(
    "/workflows/<workflow_id>/runs",
    summary="List a workflow's runs, newest first",
    responses=response_docs({200: "A page of runs"}, Page[RunSummary], 404),
    tags=["runs"],
)
def list_runs(
    workflow_id: WorkflowId,
    status: Annotated[
        Literal["queued", "running", "parked", "succeeded", "failed", "timed_out", "aborted"]
        | None,
        Query(description="Only runs in this status."),
    ] = None,
    limit: Limit = 20,
    next_token: NextToken = None,
) -> Response[Page[RunSummary]]:
    return tenant_reply(
        200,
        control_plane().list_runs,
        workflow_id,
        status=status,
        limit=limit,
        next_token=next_token,
    )


@router.get(
    "/runs/<run_id>",
    summary="Get a run and its step timeline",
    responses=response_docs({200: "The run"}, RunDetail, 404),
    tags=["runs"],
)
def get_run(run_id: RunId) -> Response[RunDetail]:
    return tenant_reply(200, control_plane().get_run, run_id)


@router.post(
    "/runs/<run_id>/cancel",
    summary="Cancel a running run",
    responses=response_docs({200: "The run, aborted"}, RunSummary, 404, 409),
    tags=["runs"],
)
def cancel_run(run_id: RunId) -> Response[RunSummary]:
    return tenant_reply(200, control_plane().cancel_run, run_id)


@router.post(
    "/runs/<run_id>/continue",
    summary="Release the next step of a step-through run",
    description="A step-through run waits before each step; this lets exactly one step start. "
    "409 while a step runs (a second call releases nothing), and for a run that is not a "
    "running step-through run. With to_end the run finishes without pausing again.",
    responses=response_docs({200: "Released"}, ContinueResult, 404, 409),
    tags=["runs"],
)
def continue_run(
    run_id: RunId, request: Annotated[ContinueRequest | None, Body()] = None
) -> Response[ContinueResult]:
    request = no_body_or(request) or ContinueRequest()
    return tenant_reply(200, control_plane().continue_run, run_id, to_end=request.to_end)


@router.post(
    "/runs/<run_id>/rerun",
    summary="Rerun from a step",
    description="Starts a new run with this run's trigger that begins at from_step (a step of "
    "the main flow): the steps before it are not run again, their outputs come from this run "
    "(and the runs it reran). version pinned (default) runs this run's version, current the "
    "live one. The run's modes are kept unless dry_run / step_through say otherwise (a rerun "
    "of a dry run is a dry run). 409 for a run still queued, running or parked, "
    "outputs_not_recorded (an Express run's native outputs); 422 unknown_step (details: the "
    "steps a rerun may start at), mode_not_carried (a step-through rerun: send "
    "step_through false) or invalid_input (the live version's input_schema).",
    responses=response_docs({201: "The new run, started"}, StartRunResult, 404, 409, 413, 415, 422),
    tags=["runs"],
)
def rerun_run(run_id: RunId, request: Annotated[RerunRequest, Body()]) -> Response[StartRunResult]:
    result = control_plane().rerun(
        current_tenant(),
        run_id,
        request.from_step,
        version=request.version,
        dry_run=request.dry_run,
        step_through=request.step_through,
    )
    return json_reply(201 if result.created else 200, result)


# ----------------------------------------------------------------------------- parked runs
# (on_error: {action: park}): GET /runs?status=parked, POST /runs/{run_id}/resume.


@router.get(
    "/runs",
    summary="List the tenant's parked runs",
    description="Runs waiting at a step that failed with on_error park, longest parked "
    "first, each with the step and the error (parked). status=parked is required: it is "
    "the one tenant-wide run listing.",
    responses=response_docs({200: "A page of parked runs"}, Page[RunSummary]),
    tags=["runs"],
)
def list_parked_runs(
    status: Annotated[Literal["parked"], Query(description="Only parked runs.")],
    limit: Limit = 20,
    next_token: NextToken = None,
) -> Response[Page[RunSummary]]:
    return tenant_reply(200, control_plane().list_parked_runs, limit=limit, next_token=next_token)


@router.post(
    "/runs/<run_id>/resume",
    summary="Resume a parked run",
    description="retry runs the failed step again; skip goes on along its success route "
    "with output as its output; fail takes its failure route (else fails the run). context "
    "is merged into the run's trigger data first; engine-owned keys (run, steps, error, "
    "…) are 422. 409 for a run that is not parked (or whose park timed out).",
    responses=response_docs({200: "Resumed"}, ResumeResult, 404, 409, 413, 415, 422),
    tags=["runs"],
)
def resume_run(run_id: RunId, request: Annotated[ResumeRequest, Body()]) -> Response[ResumeResult]:
    return tenant_reply(200, control_plane().resume_run, run_id, request)
