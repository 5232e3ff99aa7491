"""The control API's resolver and what every route shares: limits, path and query
parameter types, the error model and its handlers, the tenant, replies and response docs.

The routes are in :mod:`relayflow.api.routes` (one module per resource);
:mod:`relayflow.api.routing` includes them, and :mod:`relayflow.api.app` (the Lambda entry
point) loads it on the first request.
"""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
    ResponseValidationError,
)
from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query
from pydantic import BaseModel, Field

from relayflow.api import openapi
from relayflow.api.precheck import YAML_MEDIA_TYPES, request_id_of
from relayflow.control.errors import (
    ApiError,
    BadRequest,
    InvalidDefinition,
    Unauthorized,
    Unprocessable,
)
from relayflow.intake import UNREADABLE_RULES, IntakeError, loads
from relayflow.observability import logger
from relayflow.reliability.breakers import BREAKER_ID_PATTERN

#: ``relayflow.definition.models.WORKFLOW_ID_PATTERN``, repeated so that importing the API
#: does not build the definition models (a test keeps the two equal).
WORKFLOW_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
#: Run ids are uuid4 hex, or the first 32 hex digits of a sha256 (Idempotency-Key).
RUN_ID_PATTERN = r"^[0-9a-f]{32}$"
#: ``relayflow.control.limits.MAX_IDEMPOTENCY_KEY`` (a test keeps them equal). The key is
#: never the execution name itself (Step Functions allows 80 characters there): the run id
#: and execution name are 32 hex digits of its sha256, so the limit is only the stored key's.
MAX_IDEMPOTENCY_KEY = 256
#: Largest workflow version (stored as ``V#<version:010d>``).
MAX_VERSION = 9_999_999_999


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


def control_plane() -> Any:
    from relayflow.control.service import get_control_plane

    return get_control_plane()


def no_body_or(request: Any) -> Any:
    """``request`` (an optional body's model), or ``None`` when the request had no body. A body
    of JSON ``null`` reaches a route as ``None`` too, but it is not "no body": it is refused
    (422), so a ``null`` meant as data never completes a waitpoint as "no data"."""
    if request is None and (app.current_event.decoded_body or "").strip():
        raise Unprocessable(
            "the body is null: send a JSON object, or no body at all",
            [{"path": "body", "message": "Input should be an object", "type": "model_type"}],
        )
    return request


def current_tenant() -> str:
    context = app.current_event.get("requestContext") or {}
    tenant = (context.get("authorizer") or {}).get("tenant")
    if not isinstance(tenant, str) or not tenant:
        raise Unauthorized("missing or invalid API key")
    return tenant


def json_reply(status: int, model: BaseModel) -> Response:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=model.model_dump(mode="json"),
    )


def tenant_reply(
    http_status: int, use_case: Callable[..., BaseModel], /, *args: Any, **kwargs: Any
) -> Response:
    """The JSON answer ``http_status`` with what ``use_case`` returns for the caller's tenant
    (``use_case(tenant, *args, **kwargs)``; a use case's own ``status`` filter passes
    through): the one shape of most routes."""
    return json_reply(http_status, use_case(current_tenant(), *args, **kwargs))


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


def response_docs(ok: Mapping[int, str], model: type[BaseModel], *errors: int) -> dict[int, Any]:
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
    from relayflow.validation.model_errors import taught

    details = [
        {
            "path": _field_path(e.get("loc")),
            "message": taught(None, dict(e), str(e.get("msg", ""))),
            "type": e.get("type", ""),
        }
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
    request_id = request_id_of(app.current_event.raw_event)
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


def definition_body() -> dict[str, Any]:
    """The PUT body as a mapping: JSON, or YAML with a YAML Content-Type. Duplicate keys are
    reported as problems (json and YAML parsers would keep the last one silently)."""
    from relayflow.definition.loader import parse_text
    from relayflow.definition.problems import Problem

    media_type = _media_type()
    if media_type in YAML_MEDIA_TYPES:
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
        from relayflow.validation.validate import validate_data

        _, more = validate_data(document.data)
        raise InvalidDefinition.from_problems(problems + more)
    return document.data
