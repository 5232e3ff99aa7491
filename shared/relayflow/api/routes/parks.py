"""The routes for parked runs (``on_error: {action: park}``): ``GET /runs?status=parked``
and ``POST /runs/{run_id}/resume``."""

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from relayflow.api.resolver import (
    Limit,
    NextToken,
    RunId,
    control_plane,
    current_tenant,
    json_reply,
    response_docs,
)
from relayflow.control.models import Page, RunSummary
from relayflow.control.resume import ResumeRequest, ResumeResult

router = Router()


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
    page = control_plane().list_parked_runs(current_tenant(), limit=limit, next_token=next_token)
    return json_reply(200, page)


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
    return json_reply(200, control_plane().resume_run(current_tenant(), run_id, request))
