"""The control API: API Gateway REST (v1) proxy events → :class:`ControlPlane` calls.

API Gateway runs the REQUEST authorizer (:mod:`relayflow.api.auth`) first; it puts the caller's
tenant into ``requestContext.authorizer.tenant``, and every route here acts for that tenant
only (another tenant's ids answer 404, exactly like ids that do not exist).

Every error is JSON ``{"code", "message", "details"}`` with a stable ``code``:

======  =========================  ====================================================
status  code                       when
======  =========================  ====================================================
400     ``bad_request``            malformed JSON or YAML, a bad path/query/header value
401     ``unauthorized``           no tenant from the authorizer
404     ``not_found``              unknown route, or an id the tenant does not own
409     ``conflict``               disabled workflow, cancelling a finished run, a
                                   workflow whose circuit breaker is open (details:
                                   ``breaker_id``, ``reopens_at``; ``Retry-After``)
413     ``payload_too_large``      a body over 256 KB
415     ``unsupported_media_type`` a body that is neither JSON nor (for PUT) YAML
422     ``unprocessable``          a request body that breaks its model (field paths)
422     ``invalid_definition``     a workflow definition with problems (every one)
422     ``invalid_input``          a run's input breaks the workflow's input_schema
                                   (details: every ``{pointer, rule, message}``)
429     ``too_many_requests``      throttled (API Gateway; the local server's rate limit)
500     ``internal_error``         anything unexpected: logged with the request id,
                                   never a stack trace in the response
500     ``compiler_bug``           PUT /workflows: the compiled state machine breaks an
                                   ASL rule (details: every violation); nothing deployed
503     ``service_unavailable``    an AWS service the control plane uses failed
======  =========================  ====================================================

:func:`handle` is the Lambda entry point (``functions/api/app.py`` calls it).
"""

import base64
import binascii
import dataclasses
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
    ResponseValidationError,
)
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from relayflow.api import openapi, parks
from relayflow.control.errors import ApiError, BadRequest, InvalidDefinition, Unauthorized
from relayflow.control.models import (
    ApprovalView,
    ContinueResult,
    DlqEntryInfo,
    DlqRetryResult,
    Page,
    PutWorkflowResult,
    RunDetail,
    RunSummary,
    StartRunResult,
    WaitpointView,
    WorkflowDetail,
    WorkflowSummary,
)
from relayflow.intake import UNREADABLE_RULES, IntakeError, loads
from relayflow.observability import logger
from relayflow.reliability.breakers import BREAKER_ID_PATTERN, BreakerInfo

#: API Gateway accepts 10 MB; Relayflow stores run input and definitions up to this.
MAX_BODY_BYTES = 256 * 1024
#: ``relayflow.definition.models.WORKFLOW_ID_PATTERN``, repeated so that importing the API
#: does not build the definition models (a test keeps the two equal).
WORKFLOW_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
#: Run ids are uuid4 hex, or the first 32 hex digits of a sha256 (Idempotency-Key).
RUN_ID_PATTERN = r"^[0-9a-f]{32}$"
#: ``relayflow.control.service.MAX_IDEMPOTENCY_KEY`` (a test keeps them equal). The key is
#: never the execution name itself (Step Functions allows 80 characters there): the run id
#: and execution name are 32 hex digits of its sha256, so the limit is only the stored key's.
MAX_IDEMPOTENCY_KEY = 256
#: Largest workflow version (stored as ``V#<version:010d>``).
MAX_VERSION = 9_999_999_999
#: Routes API Gateway serves without the authorizer (template.yaml: ``Auth: NONE``); every
#: other path reaches this function through the ``/{proxy+}`` resource.
PUBLIC_RESOURCES = frozenset({"/openapi.json", "/swagger"})
#: The public guest approval page (template.yaml: GET and POST, ``Auth: NONE``): the signed
#: link in its query is the credential (relayflow.approvals).
GUEST_APPROVAL_RESOURCE = "/guest/approvals/{id}"

_YAML_MEDIA_TYPES = frozenset(
    {"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"}
)


class UnsupportedMediaType(ApiError):
    """415: a body in a format the route does not read."""

    status = 415
    code = "unsupported_media_type"


# ----------------------------------------------------------------------------- request models


class ErrorBody(BaseModel):
    """Every error response."""

    code: str = Field(description="Stable error code, e.g. not_found or invalid_definition.")
    message: str = Field(description="What went wrong, for a person.")
    details: Any = Field(
        None,
        description="Problems with their paths (400, 422), the request id (500), or null.",
    )


class RollbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1, le=MAX_VERSION, description="The version to make live again.")


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


WorkflowId = Annotated[
    str,
    Path(pattern=WORKFLOW_ID_PATTERN, max_length=64, description="The workflow's id."),
]
RunId = Annotated[str, Path(pattern=RUN_ID_PATTERN, description="The run's id.")]
BreakerId = Annotated[
    str,
    Path(
        pattern=BREAKER_ID_PATTERN,
        max_length=200,
        description="tool:<tool name> (e.g. tool:http.billing) or workflow:<workflow id>.",
    ),
]
Limit = Annotated[int, Query(ge=1, le=100, description="Page size.")]
NextToken = Annotated[
    str | None,
    Query(max_length=4096, description="The next_token of the previous page."),
]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=MAX_IDEMPOTENCY_KEY,
        pattern=r"^[\x20-\x7e]+$",
        description="A repeat with the same key returns the run the first request started "
        f"(1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters).",
    ),
]

# ----------------------------------------------------------------------------- the resolver


def _json_loads(text: str) -> Any:
    """The JSON intake policy (:mod:`relayflow.intake`) for every request body. Text that is
    not JSON raises JSONDecodeError (Powertools answers 400); JSON the policy refuses raises
    IntakeError (answered by :func:`_intake_refused`)."""
    return loads(text)


app = openapi.DocumentedResolver(
    enable_validation=True,
    # A response that breaks its own model is our bug: 500, not a 4xx blamed on the caller.
    response_validation_error_http_code=500,
    json_body_deserializer=_json_loads,
)
openapi.configure(app)


def _control() -> Any:
    from relayflow.control.service import get_control_plane

    return get_control_plane()


def _tenant() -> str:
    context = app.current_event.get("requestContext") or {}
    tenant = (context.get("authorizer") or {}).get("tenant")
    if not isinstance(tenant, str) or not tenant:
        raise Unauthorized("missing or invalid API key")
    return tenant


def _reply(status: int, model: BaseModel) -> Response:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=model.model_dump(mode="json"),
    )


def _error(
    status: int,
    code: str,
    message: str,
    details: Any = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=ErrorBody(code=code, message=message, details=details).model_dump(mode="json"),
        headers=dict(headers or {}),
    )


def _docs(ok: Mapping[int, str], model: type[BaseModel], *errors: int) -> dict[int, Any]:
    """The OpenAPI ``responses`` of a route: its successes and the errors it can answer."""
    responses: dict[int, Any] = {
        status: {"description": text, "content": {"application/json": {"model": model}}}
        for status, text in ok.items()
    }
    for status in sorted({*errors, 400, 401, 429, 500, 503}):
        responses[status] = {
            "description": openapi.ERROR_DESCRIPTIONS[status],
            "content": {"application/json": {"model": ErrorBody}},
        }
    return responses


# ----------------------------------------------------------------------------- error handlers


@app.exception_handler(ApiError)
def _api_error(exc: ApiError) -> Response:
    headers = {}
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return _error(exc.status, exc.code, exc.message, exc.details, headers)


def _field_path(loc: Any) -> str:
    parts = [str(part) for part in (loc or ())]
    return ".".join(parts)


@app.exception_handler(RequestValidationError)
def _request_invalid(exc: RequestValidationError) -> Response:
    errors = list(exc.errors())
    if any(error.get("type") == "json_invalid" for error in errors):
        reason = next(
            (e.get("ctx", {}).get("error") for e in errors if e.get("type") == "json_invalid"), None
        )
        return _error(400, "bad_request", f"the body is not valid JSON: {reason or 'unreadable'}")
    details = [
        {"path": _field_path(e.get("loc")), "message": e.get("msg", ""), "type": e.get("type", "")}
        for e in errors
    ]
    in_body = any(tuple(e.get("loc") or ())[:1] == ("body",) for e in errors)
    if in_body:
        return _error(422, "unprocessable", f"the request has {len(details)} problem(s)", details)
    return _error(400, "bad_request", f"the request has {len(details)} bad parameter(s)", details)


@app.exception_handler(IntakeError)
def _intake_refused(exc: IntakeError) -> Response:
    refusal = exc.under("body")
    code = "bad_request" if refusal.status == 400 else "unprocessable"
    details = [{"path": refusal.path, "message": refusal.message, "type": _type(refusal.rule)}]
    return _error(refusal.status, code, refusal.message, details)


def _type(rule: str) -> str:
    return rule.replace("-", "_")


@app.exception_handler(RequestUnsupportedContentType)
def _unsupported_content_type(exc: RequestUnsupportedContentType) -> Response:
    return _error(415, "unsupported_media_type", "send the body as application/json")


@app.not_found
def _not_found(exc: NotFoundError) -> Response:
    return _error(404, "not_found", "no such route")


@app.exception_handler(ServiceError)
def _service_error(exc: ServiceError) -> Response:
    return _error(
        exc.status_code, "bad_request" if exc.status_code < 500 else "internal_error", exc.msg
    )


@app.exception_handler([ResponseValidationError, Exception])
def _unexpected(exc: Exception) -> Response:
    request_id = _request_id(app.current_event.raw_event)
    logger.exception(
        "unhandled error",
        extra={
            "request_id": request_id,
            "method": app.current_event.http_method,
            "path": app.current_event.path,
        },
    )
    return _error(
        500,
        "internal_error",
        f"internal error; quote request id {request_id} when reporting it",
        {"request_id": request_id},
    )


# ----------------------------------------------------------------------------- bodies


def _media_type() -> str:
    raw = app.current_event.headers.get("content-type") or "application/json"
    return raw.split(";", 1)[0].strip().lower()


def _definition_body() -> dict[str, Any]:
    """The PUT body as a mapping: JSON, or YAML with a YAML Content-Type. Duplicate keys are
    reported as problems (json and YAML parsers would keep the last one silently)."""
    from relayflow.definition.loader import parse_text
    from relayflow.definition.problems import Problem

    media_type = _media_type()
    if media_type in _YAML_MEDIA_TYPES:
        fmt = "yaml"
    elif media_type == "application/json" or media_type.endswith("+json"):
        fmt = "json"
    else:
        raise UnsupportedMediaType(
            f"Content-Type {media_type} is not read here: send application/json or application/yaml"
        )
    text = app.current_event.decoded_body or ""
    if not text.strip():
        raise BadRequest("the body is empty: send the workflow definition")
    # The loader applies the intake policy (relayflow.intake) first: YAML aliases, depth,
    # numbers and text come back as problems with their paths, never as exceptions.
    document = parse_text(text, "", fmt=fmt)
    problems = [dataclasses.replace(p, file=None) for p in document.problems]
    unreadable = [p for p in problems if p.rule in UNREADABLE_RULES]
    if unreadable:
        raise BadRequest(
            f"the body is not a readable definition: {unreadable[0]}",
            details=[p.to_dict() for p in unreadable],
        )
    if document.data is None and problems and not any(p.rule == "syntax" for p in problems):
        raise InvalidDefinition.from_problems(problems)
    syntax = [p for p in problems if p.rule == "syntax"]
    if syntax:
        raise BadRequest(
            f"the body is not valid {fmt.upper()}: {syntax[0].message}",
            details=[p.to_dict() for p in syntax],
        )
    if not isinstance(document.data, dict):
        raise InvalidDefinition.from_problems(
            [Problem(None, "", "type", "a definition is a mapping (YAML) or object (JSON)")]
        )
    if problems:
        from relayflow.definition.validate import validate_data

        _, more = validate_data(document.data)
        raise InvalidDefinition.from_problems(problems + more)
    return document.data


# ----------------------------------------------------------------------------- routes


@app.put(
    "/workflows/<workflow_id>",
    summary="Create or update a workflow",
    description="Validates the definition (JSON, or YAML with Content-Type application/yaml), "
    "compiles it, publishes a new version and makes it live. An unchanged definition publishes "
    "nothing. A disabled workflow is enabled again.",
    responses=_docs(
        {200: "Updated (or unchanged)", 201: "Created"}, PutWorkflowResult, 404, 413, 415, 422
    ),
    tags=["workflows"],
)
def put_workflow(workflow_id: WorkflowId) -> Response[PutWorkflowResult]:
    definition = _definition_body()
    result = _control().put_workflow(_tenant(), workflow_id, definition)
    return _reply(201 if result.created else 200, result)


@app.get(
    "/workflows",
    summary="List workflows",
    responses=_docs({200: "A page of workflows"}, Page[WorkflowSummary]),
    tags=["workflows"],
)
def list_workflows(
    limit: Limit = 50, next_token: NextToken = None
) -> Response[Page[WorkflowSummary]]:
    page = _control().list_workflows(_tenant(), limit=limit, next_token=next_token)
    return _reply(200, page)


@app.get(
    "/workflows/<workflow_id>",
    summary="Get a workflow, its live definition and its versions",
    responses=_docs({200: "The workflow"}, WorkflowDetail, 404),
    tags=["workflows"],
)
def get_workflow(workflow_id: WorkflowId) -> Response[WorkflowDetail]:
    return _reply(200, _control().get_workflow(_tenant(), workflow_id))


@app.delete(
    "/workflows/<workflow_id>",
    summary="Disable a workflow",
    description="New runs are refused (409); runs in flight finish. PUT enables it again.",
    responses=_docs({200: "The disabled workflow"}, WorkflowSummary, 404),
    tags=["workflows"],
)
def delete_workflow(workflow_id: WorkflowId) -> Response[WorkflowSummary]:
    return _reply(200, _control().delete_workflow(_tenant(), workflow_id))


@app.post(
    "/workflows/<workflow_id>/rollback",
    summary="Make an earlier version live again",
    responses=_docs({200: "The live version changed"}, PutWorkflowResult, 404, 409, 413, 422),
    tags=["workflows"],
)
def rollback_workflow(
    workflow_id: WorkflowId, request: Annotated[RollbackRequest, Body()]
) -> Response[PutWorkflowResult]:
    result = _control().rollback_workflow(_tenant(), workflow_id, request.version)
    return _reply(200, result)


@app.post(
    "/workflows/<workflow_id>/runs",
    summary="Start a run",
    description="Runs the live version, or `version`. With an Idempotency-Key header, a repeat "
    "returns the run the first request started (200) instead of starting another. An input "
    "that breaks the version's `input_schema` is 422 `invalid_input` (details: each JSON "
    "pointer, rule and message); nothing starts.",
    responses=_docs(
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
    request = request or StartRunRequest()
    result = _control().start_run(
        _tenant(),
        workflow_id,
        request.input,
        version=request.version,
        idempotency_key=idempotency_key,
        dry_run=request.dry_run,
        step_through=request.step_through,
    )
    if result.admission in ("queued", "debounced", "batched"):
        return _reply(202, result)  # accepted: the run starts later (docs/flow-control.md)
    return _reply(201 if result.created else 200, result)


@app.get(
    "/workflows/<workflow_id>/runs",
    summary="List a workflow's runs, newest first",
    responses=_docs({200: "A page of runs"}, Page[RunSummary], 404),
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
    page = _control().list_runs(
        _tenant(), workflow_id, status=status, limit=limit, next_token=next_token
    )
    return _reply(200, page)


@app.get(
    "/runs/<run_id>",
    summary="Get a run and its step timeline",
    responses=_docs({200: "The run"}, RunDetail, 404),
    tags=["runs"],
)
def get_run(run_id: RunId) -> Response[RunDetail]:
    return _reply(200, _control().get_run(_tenant(), run_id))


@app.post(
    "/runs/<run_id>/cancel",
    summary="Cancel a running run",
    responses=_docs({200: "The run, aborted"}, RunSummary, 404, 409),
    tags=["runs"],
)
def cancel_run(run_id: RunId) -> Response[RunSummary]:
    return _reply(200, _control().cancel_run(_tenant(), run_id))


@app.post(
    "/runs/<run_id>/continue",
    summary="Release the next step of a step-through run",
    description="A step-through run waits before each step; this lets exactly one step start. "
    "409 while a step runs (a second call releases nothing), and for a run that is not a "
    "running step-through run. With to_end the run finishes without pausing again.",
    responses=_docs({200: "Released"}, ContinueResult, 404, 409),
    tags=["runs"],
)
def continue_run(
    run_id: RunId, request: Annotated[ContinueRequest | None, Body()] = None
) -> Response[ContinueResult]:
    request = request or ContinueRequest()
    return _reply(200, _control().continue_run(_tenant(), run_id, to_end=request.to_end))


# Parked runs: GET /runs?status=parked, POST /runs/{run_id}/resume.
parks.register(app)


@app.post(
    "/events",
    summary="Publish an event",
    description="Puts the event on the Relayflow event bus for the caller's tenant: it starts "
    "the tenant's workflows whose event triggers match it (and whose filters accept it), and "
    "never another tenant's.",
    responses=_docs({202: "Published"}, PublishedEvent, 413, 415, 422),
    tags=["events"],
)
def publish_event(request: Annotated[PublishEventRequest, Body()]) -> Response[PublishedEvent]:
    from relayflow.triggers.publish import publish_event as publish

    tenant = _tenant()
    event_id = publish(tenant, request.source, request.detail_type, request.detail)
    return _reply(202, PublishedEvent(event_id=event_id))


@app.get(
    "/breakers",
    summary="List circuit breakers",
    description="The tenant's tool and workflow circuit breakers (each one that has counted a "
    "failure), by id, with their state: closed, open (until reopens_at) or half_open.",
    responses=_docs({200: "A page of breakers"}, Page[BreakerInfo]),
    tags=["breakers"],
)
def list_breakers(limit: Limit = 50, next_token: NextToken = None) -> Response[Page[BreakerInfo]]:
    page = _control().list_breakers(_tenant(), limit=limit, next_token=next_token)
    return _reply(200, page)


@app.post(
    "/breakers/<breaker_id>/reset",
    summary="Close a circuit breaker",
    description="Closes the breaker now and forgets its failures; calls and runs go through "
    "again at once.",
    responses=_docs({200: "The breaker, closed"}, BreakerInfo, 404),
    tags=["breakers"],
)
def reset_breaker(breaker_id: BreakerId) -> Response[BreakerInfo]:
    return _reply(200, _control().reset_breaker(_tenant(), breaker_id))


@app.get(
    "/dlq",
    summary="List the dead-letter queue",
    description="Failed and timed-out runs of the tenant, newest first: why each failed, where, "
    "the outputs of the steps that succeeded, and its retry state (pending, retrying, retried, "
    "exhausted, discarded). Transient failures are retried automatically after 2, 4 and 8 "
    "minutes.",
    responses=_docs({200: "A page of DLQ entries"}, Page[DlqEntryInfo]),
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
    page = _control().dlq.list_entries(_tenant(), status=status, limit=limit, next_token=next_token)
    return _reply(200, page)


@app.get(
    "/dlq/<run_id>",
    summary="Get a DLQ entry",
    responses=_docs({200: "The entry"}, DlqEntryInfo, 404),
    tags=["dlq"],
)
def get_dlq_entry(run_id: RunId) -> Response[DlqEntryInfo]:
    return _reply(200, _control().dlq.get_entry(_tenant(), run_id))


@app.post(
    "/dlq/<run_id>/retry",
    summary="Retry a run from the DLQ",
    description="Restarts the run under the same run id (a new execution of the same version "
    "with the same trigger payload). Steps that already succeeded return their recorded "
    "results instead of acting again, so the run resumes at the step that failed.",
    responses=_docs({202: "The retry started"}, DlqRetryResult, 404, 409),
    tags=["dlq"],
)
def retry_dlq_entry(run_id: RunId) -> Response[DlqRetryResult]:
    return _reply(202, _control().dlq.retry(_tenant(), run_id))


@app.delete(
    "/dlq/<run_id>",
    summary="Discard a DLQ entry",
    description="No more retries, automatic or manual; the entry stays readable as discarded.",
    responses=_docs({200: "The entry, discarded"}, DlqEntryInfo, 404, 409),
    tags=["dlq"],
)
def discard_dlq_entry(run_id: RunId) -> Response[DlqEntryInfo]:
    return _reply(200, _control().dlq.discard(_tenant(), run_id))


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
        from relayflow.control.service import hash_secret

        secret = extract_secret(app.current_event.headers)
        item = _control().dal.get_api_key(hash_secret(secret)) if secret else None
        key_id, name = (item.key_id, item.name) if item is not None else (None, None)
    if not key_id:
        return f"api:{_tenant()}"
    return f"{key_id} ({name})" if name else str(key_id)


@app.get(
    "/approvals",
    summary="List approval requests",
    description="The tenant's approval requests, oldest first; by default those still waiting "
    "for a decision.",
    responses=_docs({200: "A page of approval requests"}, Page[ApprovalView]),
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
    page = _waits().list_approvals(_tenant(), status=status, limit=limit, next_token=next_token)
    return _reply(200, page)


@app.get(
    "/approvals/<approval_id>",
    summary="Get an approval request",
    responses=_docs({200: "The approval request"}, ApprovalView, 404),
    tags=["approvals"],
)
def get_approval(approval_id: WaitId) -> Response[ApprovalView]:
    return _reply(200, _waits().get_approval(_tenant(), approval_id))


@app.post(
    "/approvals/<approval_id>/respond",
    summary="Decide an approval request",
    description="Records the decision (the option, and form data checked against the "
    "request's form_schema) and resumes the run. 409 approval_decided when it was decided "
    "already (by whom and when), 409 approval_expired after its expiry.",
    responses=_docs({200: "Decided; the run resumes"}, ApprovalView, 404, 409, 413, 415, 422),
    tags=["approvals"],
)
def respond_approval(
    approval_id: WaitId, request: Annotated[RespondRequest, Body()]
) -> Response[ApprovalView]:
    tenant = _tenant()
    view = _waits().respond(
        tenant, approval_id, request.option, request.data, responder=_responder()
    )
    return _reply(200, view)


@app.get(
    "/waitpoints",
    summary="Find waitpoints",
    description="The waitpoints of a run (run_id), or the one an idempotency key names.",
    responses=_docs({200: "The waitpoints"}, Page[WaitpointView]),
    tags=["waitpoints"],
)
def list_waitpoints(
    run_id: Annotated[str | None, Query(max_length=80, description="A run's id.")] = None,
    idempotency_key: Annotated[
        str | None, Query(max_length=512, description="The waitpoint's rendered key.")
    ] = None,
) -> Response[Page[WaitpointView]]:
    items = _waits().list_waitpoints(_tenant(), run_id=run_id, idempotency_key=idempotency_key)
    return _reply(200, Page[WaitpointView](items=items))


@app.get(
    "/waitpoints/<waitpoint_id>",
    summary="Get a waitpoint",
    responses=_docs({200: "The waitpoint"}, WaitpointView, 404),
    tags=["waitpoints"],
)
def get_waitpoint(waitpoint_id: WaitId) -> Response[WaitpointView]:
    return _reply(200, _waits().get_waitpoint(_tenant(), waitpoint_id))


@app.post(
    "/waitpoints/<waitpoint_id>/complete",
    summary="Complete a waitpoint",
    description="Resumes the run; data becomes the waitpoint step's output. 409 "
    "waitpoint_completed when it was completed or failed already, 409 waitpoint_expired after "
    "its expiry.",
    responses=_docs({200: "Completed; the run resumes"}, WaitpointView, 404, 409, 413, 415, 422),
    tags=["waitpoints"],
)
def complete_waitpoint(
    waitpoint_id: WaitId, request: Annotated[CompleteWaitpointRequest | None, Body()] = None
) -> Response[WaitpointView]:
    data = request.data if request is not None else None
    return _reply(200, _waits().complete_waitpoint(_tenant(), waitpoint_id, data))


@app.post(
    "/waitpoints/<waitpoint_id>/fail",
    summary="Fail a waitpoint",
    description="The waitpoint step fails with Relayflow.WaitpointFailed (cause: error and "
    "message) and the run takes its failure route.",
    responses=_docs({200: "Failed; the run goes on"}, WaitpointView, 404, 409, 413, 415, 422),
    tags=["waitpoints"],
)
def fail_waitpoint(
    waitpoint_id: WaitId, request: Annotated[FailWaitpointRequest | None, Body()] = None
) -> Response[WaitpointView]:
    request = request or FailWaitpointRequest()
    view = _waits().fail_waitpoint(_tenant(), waitpoint_id, request.message, error=request.error)
    return _reply(200, view)


@app.route("/guest/approvals/<approval_id>", method=["GET", "POST"], include_in_schema=False)
def guest_approval(approval_id: str) -> Response[str]:
    """The guest approval page (text/html, no API key; see relayflow.approvals.page)."""
    from relayflow.approvals.page import handle_guest

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


@app.get("/openapi.json", include_in_schema=False)
def openapi_document() -> Response[str]:
    from aws_lambda_powertools.event_handler.openapi.models import Server

    # Behind the execute-api URL every path starts with the stage (/prod/workflows).
    context = app.current_event.get("requestContext") or {}
    stage, path = str(context.get("stage") or ""), str(context.get("path") or "")
    base = f"/{stage}" if stage and stage != "$default" and path.startswith(f"/{stage}/") else "/"
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body=app.get_openapi_json_schema(servers=[Server(url=base)]),
    )


# ----------------------------------------------------------------------------- entry point


def _request_id(event: Mapping[str, Any]) -> str:
    context = event.get("requestContext") or {}
    return str(context.get("requestId") or "-")


def _early_error(status: int, code: str, message: str) -> dict[str, Any]:
    """A proxy response for a request refused before routing (the same error model)."""
    body = ErrorBody(code=code, message=message).model_dump_json()
    return {
        "statusCode": status,
        "headers": {"Content-Type": content_types.APPLICATION_JSON},
        "multiValueHeaders": {},
        "body": body,
        "isBase64Encoded": False,
    }


def _refuse_body(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """413 for a body over :data:`MAX_BODY_BYTES`, 400 for a body that is not UTF-8 text."""
    body = event.get("body")
    if not body:
        return None
    if not isinstance(body, str):
        return _early_error(400, "bad_request", "the body is not text")
    if event.get("isBase64Encoded"):
        if len(body) * 3 // 4 > MAX_BODY_BYTES + 3:
            return _too_large()
        try:
            raw = base64.b64decode(body.encode("ascii"), validate=True)
            raw.decode("utf-8")
        except (binascii.Error, ValueError):
            return _early_error(400, "bad_request", "the body is not UTF-8 text")
        size = len(raw)
    else:
        size = len(body.encode("utf-8", errors="surrogatepass"))
    return _too_large() if size > MAX_BODY_BYTES else None


def _too_large() -> dict[str, Any]:
    return _early_error(
        413, "payload_too_large", f"the body is larger than {MAX_BODY_BYTES // 1024} KB"
    )


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Answer one API Gateway REST proxy event (the API function's whole work)."""
    request_id = _request_id(event)
    logger.thread_safe_append_keys(request_id=request_id)
    try:
        refused = _refuse_body(event)
        if refused is not None:
            return refused
        return app.resolve(event, context)
    except Exception:
        logger.exception("unhandled error outside a route", extra={"request_id": request_id})
        return _early_error(
            500,
            "internal_error",
            f"internal error; quote request id {request_id} when reporting it",
        )
    finally:
        logger.thread_safe_remove_keys(["request_id"])
