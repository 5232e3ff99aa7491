"""Dead-letter queue routes: list, get, retry, discard."""

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from relayflow.api.resolver import (
    Limit,
    NextToken,
    RunId,
    control_plane,
    response_docs,
    tenant_reply,
)
from relayflow.control.models import DlqEntryInfo, DlqRetryResult, Page

router = Router()


@router.get(
    "/dlq",
    summary="List the dead-letter queue",
    description="Failed and timed-out runs of the tenant, newest first: why each failed, where, "
    "the outputs of the steps that succeeded, and its retry state (pending, retrying, retried, "
    "exhausted, discarded). Transient failures are retried automatically after 2, 4 and 8 "
    "minutes.",
    responses=response_docs({200: "A page of DLQ entries"}, Page[DlqEntryInfo]),
    tags=["dlq"],
)
def list_dlq(
    status: Annotated[
        Literal["pending", "retrying", "retried", "exhausted", "discarded"] | None,
        Query(description="Only entries in this status."),
    ] = None,
    limit: Limit = 20,
    next_token: NextToken = None,
) -> Response[Page[DlqEntryInfo]]:
    return tenant_reply(
        200, control_plane().dlq.list_entries, status=status, limit=limit, next_token=next_token
    )


@router.get(
    "/dlq/<run_id>",
    summary="Get a DLQ entry",
    responses=response_docs({200: "The entry"}, DlqEntryInfo, 404),
    tags=["dlq"],
)
def get_dlq_entry(run_id: RunId) -> Response[DlqEntryInfo]:
    return tenant_reply(200, control_plane().dlq.get_entry, run_id)


@router.post(
    "/dlq/<run_id>/retry",
    summary="Retry a run from the DLQ",
    description="Restarts the run under the same run id (a new execution of the same version "
    "with the same trigger payload). Steps that already succeeded return their recorded "
    "results instead of acting again, so the run resumes at the step that failed.",
    responses=response_docs({202: "The retry started"}, DlqRetryResult, 404, 409),
    tags=["dlq"],
)
def retry_dlq_entry(run_id: RunId) -> Response[DlqRetryResult]:
    return tenant_reply(202, control_plane().dlq.retry, run_id)


@router.delete(
    "/dlq/<run_id>",
    summary="Discard a DLQ entry",
    description="No more retries, automatic or manual; the entry stays readable as discarded.",
    responses=response_docs({200: "The entry, discarded"}, DlqEntryInfo, 404, 409),
    tags=["dlq"],
)
def discard_dlq_entry(run_id: RunId) -> Response[DlqEntryInfo]:
    return tenant_reply(200, control_plane().dlq.discard, run_id)
