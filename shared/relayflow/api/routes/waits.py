"""Approval and waitpoint routes, and the guest approval page (no API key)."""

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from relayflow.api.resolver import (
    Limit,
    NextToken,
    app,
    control_plane,
    current_tenant,
    json_reply,
    no_body_or,
    response_docs,
    tenant_reply,
)
from relayflow.control.models import ApprovalView, Page, WaitpointView

router = Router()


class RespondRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    option: str = Field(min_length=1, max_length=200, description="One of the request's options.")
    data: Any = Field(None, description="Form data; checked against the request's form_schema.")


class CompleteWaitpointRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    data: Any = Field(None, description="The waitpoint step's output.")


class FailWaitpointRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    error: str | None = Field(None, max_length=256, description="A short error code.")
    message: str | None = Field(None, max_length=8192, description="What went wrong.")


WaitId = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$", description="The request's id.")]


def _waits() -> Any:
    from relayflow.control.waits import get_wait_service

    return get_wait_service()


def _responder() -> str:
    """Who answers an authenticated request: the API key's id and name (from the authorizer's
    context when it passes them, else looked up from the key the request presents)."""
    context = (app.current_event.get("requestContext") or {}).get("authorizer") or {}
    key_id, name = context.get("key_id"), context.get("key_name")
    if not key_id:
        from relayflow.api.auth import extract_secret
        from relayflow.control.limits import hash_secret

        secret = extract_secret(app.current_event.headers)
        item = control_plane().dal.get_api_key(hash_secret(secret)) if secret else None
        key_id, name = (item.key_id, item.name) if item is not None else (None, None)
    if not key_id:
        return f"api:{current_tenant()}"
    return f"{key_id} ({name})" if name else str(key_id)


@router.get(
    "/approvals",
    summary="List approval requests",
    description="The tenant's approval requests, oldest first; by default those still waiting "
    "for a decision.",
    responses=response_docs({200: "A page of approval requests"}, Page[ApprovalView]),
    tags=["approvals"],
)
def list_approvals(
    status: Annotated[
        Literal["pending", "decided", "expired"] | None,
        Query(description="Only requests in this status (default: pending)."),
    ] = "pending",
    limit: Limit = 20,
    next_token: NextToken = None,
) -> Response[Page[ApprovalView]]:
    return tenant_reply(
        200, _waits().list_approvals, status=status, limit=limit, next_token=next_token
    )


@router.get(
    "/approvals/<approval_id>",
    summary="Get an approval request",
    responses=response_docs({200: "The approval request"}, ApprovalView, 404),
    tags=["approvals"],
)
def get_approval(approval_id: WaitId) -> Response[ApprovalView]:
    return tenant_reply(200, _waits().get_approval, approval_id)


@router.post(
    "/approvals/<approval_id>/respond",
    summary="Decide an approval request",
    description="Records the decision (the option, and form data checked against the "
    "request's form_schema) and resumes the run. 409 approval_decided when it was decided "
    "already (by whom and when), 409 approval_expired after its expiry.",
    responses=response_docs(
        {200: "Decided; the run resumes"}, ApprovalView, 404, 409, 413, 415, 422
    ),
    tags=["approvals"],
)
def respond_approval(
    approval_id: WaitId, request: Annotated[RespondRequest, Body()]
) -> Response[ApprovalView]:
    tenant = current_tenant()
    view = _waits().respond(
        tenant, approval_id, request.option, request.data, responder=_responder()
    )
    return json_reply(200, view)


@router.get(
    "/waitpoints",
    summary="Find waitpoints",
    description="The waitpoints of a run (run_id), or the one an idempotency key names.",
    responses=response_docs({200: "The waitpoints"}, Page[WaitpointView]),
    tags=["waitpoints"],
)
def list_waitpoints(
    run_id: Annotated[str | None, Query(max_length=80, description="A run's id.")] = None,
    idempotency_key: Annotated[
        str | None, Query(max_length=512, description="The waitpoint's rendered key.")
    ] = None,
) -> Response[Page[WaitpointView]]:
    items = _waits().list_waitpoints(
        current_tenant(), run_id=run_id, idempotency_key=idempotency_key
    )
    return json_reply(200, Page[WaitpointView](items=items))


@router.get(
    "/waitpoints/<waitpoint_id>",
    summary="Get a waitpoint",
    responses=response_docs({200: "The waitpoint"}, WaitpointView, 404),
    tags=["waitpoints"],
)
def get_waitpoint(waitpoint_id: WaitId) -> Response[WaitpointView]:
    return tenant_reply(200, _waits().get_waitpoint, waitpoint_id)


@router.post(
    "/waitpoints/<waitpoint_id>/complete",
    summary="Complete a waitpoint",
    description="Resumes the run; data becomes the waitpoint step's output. 409 "
    "waitpoint_completed when it was completed or failed already, 409 waitpoint_expired after "
    "its expiry.",
    responses=response_docs(
        {200: "Completed; the run resumes"}, WaitpointView, 404, 409, 413, 415, 422
    ),
    tags=["waitpoints"],
)
def complete_waitpoint(
    waitpoint_id: WaitId, request: Annotated[CompleteWaitpointRequest | None, Body()] = None
) -> Response[WaitpointView]:
    request = no_body_or(request)
    data = request.data if request is not None else None
    return tenant_reply(200, _waits().complete_waitpoint, waitpoint_id, data)


@router.post(
    "/waitpoints/<waitpoint_id>/fail",
    summary="Fail a waitpoint",
    description="The waitpoint step fails with Relayflow.WaitpointFailed (cause: error and "
    "message) and the run takes its failure route.",
    responses=response_docs(
        {200: "Failed; the run goes on"}, WaitpointView, 404, 409, 413, 415, 422
    ),
    tags=["waitpoints"],
)
def fail_waitpoint(
    waitpoint_id: WaitId, request: Annotated[FailWaitpointRequest | None, Body()] = None
) -> Response[WaitpointView]:
    request = no_body_or(request) or FailWaitpointRequest()
    view = _waits().fail_waitpoint(
        current_tenant(), waitpoint_id, request.message, error=request.error
    )
    return json_reply(200, view)


@router.route("/guest/approvals/<approval_id>", method=["GET", "POST"], include_in_schema=False)
def guest_approval(approval_id: str) -> Response[str]:
    """The guest approval page (text/html, no API key; see relayflow.api.approval_page)."""
    from relayflow.api.approval_page import handle_guest

    event = app.current_event
    page = handle_guest(
        event.http_method,
        approval_id,
        event.query_string_parameters or {},
        body=event.decoded_body,
        content_type=event.headers.get("content-type"),
    )
    headers = {k: v for k, v in page.headers.items() if k.lower() != "content-type"}
    return Response(
        status_code=page.status,
        content_type=page.headers["Content-Type"],
        body=page.body,
        headers=headers,
    )
