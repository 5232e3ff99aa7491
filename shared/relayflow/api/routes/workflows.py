"""Workflow routes: create or update, list, get, disable, roll back."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body
from pydantic import BaseModel, ConfigDict, Field

from relayflow.api.resolver import (
    MAX_VERSION,
    Limit,
    NextToken,
    WorkflowId,
    control_plane,
    current_tenant,
    definition_body,
    json_reply,
    response_docs,
    tenant_reply,
)
from relayflow.control.models import Page, PutWorkflowResult, WorkflowDetail, WorkflowSummary

router = Router()


class RollbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1, le=MAX_VERSION, description="The version to make live again.")


@router.put(
    "/workflows/<workflow_id>",
    summary="Create or update a workflow",
    description="Validates the definition (JSON, or YAML with Content-Type application/yaml), "
    "compiles it, publishes a new version and makes it live. An unchanged definition publishes "
    "nothing. A disabled workflow is enabled again.",
    responses=response_docs(
        {200: "Updated (or unchanged)", 201: "Created"}, PutWorkflowResult, 404, 413, 415, 422
    ),
    tags=["workflows"],
)
def put_workflow(workflow_id: WorkflowId) -> Response[PutWorkflowResult]:
    definition = definition_body()
    result = control_plane().put_workflow(current_tenant(), workflow_id, definition)
    return json_reply(201 if result.created else 200, result)


@router.get(
    "/workflows",
    summary="List workflows",
    responses=response_docs({200: "A page of workflows"}, Page[WorkflowSummary]),
    tags=["workflows"],
)
def list_workflows(
    limit: Limit = 50, next_token: NextToken = None
) -> Response[Page[WorkflowSummary]]:
    return tenant_reply(200, control_plane().list_workflows, limit=limit, next_token=next_token)


@router.get(
    "/workflows/<workflow_id>",
    summary="Get a workflow, its live definition and its versions",
    responses=response_docs({200: "The workflow"}, WorkflowDetail, 404),
    tags=["workflows"],
)
def get_workflow(workflow_id: WorkflowId) -> Response[WorkflowDetail]:
    return tenant_reply(200, control_plane().get_workflow, workflow_id)


@router.delete(
    "/workflows/<workflow_id>",
    summary="Disable a workflow",
    description="New runs are refused (409); runs in flight finish. PUT enables it again.",
    responses=response_docs({200: "The disabled workflow"}, WorkflowSummary, 404),
    tags=["workflows"],
)
def delete_workflow(workflow_id: WorkflowId) -> Response[WorkflowSummary]:
    return tenant_reply(200, control_plane().delete_workflow, workflow_id)


@router.post(
    "/workflows/<workflow_id>/rollback",
    summary="Make an earlier version live again",
    responses=response_docs(
        {200: "The live version changed"}, PutWorkflowResult, 404, 409, 413, 422
    ),
    tags=["workflows"],
)
def rollback_workflow(
    workflow_id: WorkflowId, request: Annotated[RollbackRequest, Body()]
) -> Response[PutWorkflowResult]:
    result = control_plane().rollback_workflow(current_tenant(), workflow_id, request.version)
    return json_reply(200, result)
