"""The control API's routes for parked runs (``on_error: {action: park}``):
``GET /runs?status=parked`` and ``POST /runs/{run_id}/resume``.

Registered on the resolver by :func:`register`, which :mod:`relayflow.api.app` calls once its
helpers (tenant, replies, response docs) exist, so the route module shares them instead of
repeating them.

No ``from __future__ import annotations`` here: the resolver reads the route parameters'
annotations at registration time.
"""

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from relayflow.control.models import Page, RunSummary
from relayflow.control.resume import ResumeRequest, ResumeResult


def register(app: Any) -> None:
    """Add the parked-run routes to ``app`` (the control API's resolver)."""
    from relayflow.api import app as api

    limit_type, token_type, run_id_type = api.Limit, api.NextToken, api.RunId

    @app.get(
        "/runs",
        summary="List the tenant's parked runs",
        description="Runs waiting at a step that failed with on_error park, longest parked "
        "first, each with the step and the error (parked). status=parked is required: it is "
        "the one tenant-wide run listing.",
        responses=api.response_docs({200: "A page of parked runs"}, Page[RunSummary]),
        tags=["runs"],
    )
    def list_parked_runs(
        status: Annotated[Literal["parked"], Query(description="Only parked runs.")],
        limit: limit_type = 20,  # type: ignore[valid-type]
        next_token: token_type = None,  # type: ignore[valid-type]
    ) -> Response[Page[RunSummary]]:
        page = api.control_plane().list_parked_runs(
            api.current_tenant(), limit=limit, next_token=next_token
        )
        return api.json_reply(200, page)

    @app.post(
        "/runs/<run_id>/resume",
        summary="Resume a parked run",
        description="retry runs the failed step again; skip goes on along its success route "
        "with output as its output; fail takes its failure route (else fails the run). context "
        "is merged into the run's trigger data first; engine-owned keys (run, steps, error, "
        "…) are 422. 409 for a run that is not parked (or whose park timed out).",
        responses=api.response_docs({200: "Resumed"}, ResumeResult, 404, 409, 413, 415, 422),
        tags=["runs"],
    )
    def resume_run(
        run_id: run_id_type,  # type: ignore[valid-type]
        request: Annotated[ResumeRequest, Body()],
    ) -> Response[ResumeResult]:
        return api.json_reply(
            200, api.control_plane().resume_run(api.current_tenant(), run_id, request)
        )
