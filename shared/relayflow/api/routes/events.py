"""``POST /events``: publish an event to the tenant's event triggers."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body
from pydantic import BaseModel, ConfigDict, Field

from relayflow.api.resolver import current_tenant, json_reply, response_docs

router = Router()


class PublishEventRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(
        min_length=1,
        max_length=256,
        pattern=r"^[\x21-\x7e]+$",
        description="Who the event is from, e.g. shop.orders (not aws.* or relayflow*).",
    )
    detail_type: str = Field(
        min_length=1,
        max_length=128,
        pattern=r"^[\x20-\x7e]+$",
        description="What happened, e.g. order.created; event triggers match on it.",
    )
    detail: dict[str, Any] = Field(
        default_factory=dict,
        description="The payload (the run's trigger.detail). relayflow_tenant is set to the "
        "caller's tenant.",
    )


class PublishedEvent(BaseModel):
    event_id: str = Field(description="The EventBridge event id (runs it starts derive from it).")


@router.post(
    "/events",
    summary="Publish an event",
    description="Puts the event on the Relayflow event bus for the caller's tenant: it starts "
    "the tenant's workflows whose event triggers match it (and whose filters accept it), and "
    "never another tenant's.",
    responses=response_docs({202: "Published"}, PublishedEvent, 413, 415, 422),
    tags=["events"],
)
def publish_event(request: Annotated[PublishEventRequest, Body()]) -> Response[PublishedEvent]:
    from relayflow.control.publish import publish_event as publish

    tenant = current_tenant()
    event_id = publish(tenant, request.source, request.detail_type, request.detail)
    return json_reply(202, PublishedEvent(event_id=event_id))
