"""Circuit breaker routes: list and reset."""

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from relayflow.api.resolver import (
    BreakerId,
    Limit,
    NextToken,
    control_plane,
    response_docs,
    tenant_reply,
)
from relayflow.control.models import Page
from relayflow.reliability.breakers import BreakerInfo

router = Router()


@router.get(
    "/breakers",
    summary="List circuit breakers",
    description="The tenant's tool and workflow circuit breakers (each one that has counted a "
    "failure), by id, with their state: closed, open (until reopens_at) or half_open.",
    responses=response_docs({200: "A page of breakers"}, Page[BreakerInfo]),
    tags=["breakers"],
)
def list_breakers(limit: Limit = 50, next_token: NextToken = None) -> Response[Page[BreakerInfo]]:
    return tenant_reply(200, control_plane().list_breakers, limit=limit, next_token=next_token)


@router.post(
    "/breakers/<breaker_id>/reset",
    summary="Close a circuit breaker",
    description="Closes the breaker now and forgets its failures; calls and runs go through "
    "again at once.",
    responses=response_docs({200: "The breaker, closed"}, BreakerInfo, 404),
    tags=["breakers"],
)
def reset_breaker(breaker_id: BreakerId) -> Response[BreakerInfo]:
    return tenant_reply(200, control_plane().reset_breaker, breaker_id)
