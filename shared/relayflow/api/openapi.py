"""The OpenAPI document of the control API, served at ``/openapi.json`` and ``/swagger``.

Powertools generates it from the routes and their models. :class:`DocumentedResolver` then
finishes it where generation cannot: the PUT body of a workflow is read by hand (JSON, or YAML
text), so its request body is declared here, with the JSON Schema of the definition format
generated from :class:`relayflow.definition.models.Workflow`; and the validation errors that
Powertools documents with its own models answer with the API's error model instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response

if TYPE_CHECKING:
    # Powertools' OpenAPI models (a third of import boto3) are built only for the document.
    from aws_lambda_powertools.event_handler.openapi.models import OpenAPI

TITLE = "Relayflow control API"
API_VERSION = "1"
DESCRIPTION = (
    "Register workflows (each PUT publishes a version), start and inspect runs. Every route "
    "except this document needs an API key: `Authorization: Bearer <key>` or `X-Api-Key: <key>`."
    " Errors are JSON `{code, message, details}`."
)
ERROR_DESCRIPTIONS = {
    400: "bad_request: malformed JSON or YAML, or a bad path, query or header value",
    401: "unauthorized: no API key, or an invalid or revoked one",
    403: "forbidden",
    404: "not_found: no such route, or an id this tenant does not own",
    409: "conflict: the workflow is disabled, or the run has already finished",
    413: "payload_too_large: the body is over 256 KB",
    415: "unsupported_media_type: the body is neither JSON nor (for PUT) YAML",
    422: "unprocessable (a body that breaks its model), invalid_definition (every problem) or "
    "invalid_input (a run's input breaks the workflow's input_schema: every pointer and rule)",
    429: "too_many_requests: throttled; retry after the Retry-After header",
    500: "internal_error: logged with the request id, which details carries; compiler_bug: "
    "the compiled state machine breaks an ASL rule (details: every violation)",
    503: "service_unavailable: an AWS service the control plane uses failed; retry later",
}
YAML_MEDIA_TYPE = "application/yaml"
_ERROR_REF = "#/components/schemas/ErrorBody"
_DROPPED = ("HTTPValidationError", "ValidationError", "ResponseValidationError")


def _per_thread(name: str, default: Callable[[], Any] | None = None) -> Any:
    """A resolver attribute kept per thread (in its ``_request_state``, as ``name``): ``None``
    until set, or a new ``default()`` on a thread's first read."""

    def read(resolver: Any) -> Any:
        state = resolver._request_state
        if default is not None and not hasattr(state, name):
            setattr(state, name, default())
        return getattr(state, name, None)

    def write(resolver: Any, value: Any) -> None:
        setattr(resolver._request_state, name, value)

    return property(read, write)


class DocumentedResolver(APIGatewayRestResolver):
    """The REST resolver whose OpenAPI document is finished by :func:`finish`, and which can
    answer requests from several threads at once.

    Powertools keeps the request being answered on the resolver (and ``current_event`` on its
    base class), which is right for one Lambda execution environment and wrong for the local
    server, which answers concurrent requests in threads of one process. Here the event, the
    Lambda context and the routing context are per thread, and every route's middleware stack
    is built once, under a lock, before the first request."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._request_state = threading.local()
        self._stack_lock = threading.Lock()
        self._stacks_built = False
        super().__init__(*args, **kwargs)

    current_event = _per_thread("event")
    lambda_context = _per_thread("lambda_context")
    context = _per_thread("context", dict)
    processed_stack_frames = _per_thread("frames", list)

    def _build_stacks(self) -> None:
        with self._stack_lock:
            if self._stacks_built:
                return
            for route in [*self._static_routes, *self._dynamic_routes]:
                if not route._middleware_stack_built:
                    route._build_middleware_stack(
                        router_middlewares=self._router_middlewares, app=self
                    )
            self._stacks_built = True

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        """Answer one proxy event (what ``APIGatewayRestResolver.resolve`` does, with the
        request's state kept in this thread)."""
        if not self._stacks_built:
            self._build_stacks()
        self.current_event = self._to_proxy_event(dict(event))
        self.lambda_context = context
        try:
            return self._build_response(self._resolve())
        finally:
            self.clear_context()
            self.current_event = None
            self.lambda_context = None

    def get_openapi_schema(self, **kwargs: Any) -> OpenAPI:  # type: ignore[override]
        schemes, requirement = security()
        if kwargs.get("security_schemes") is None:
            kwargs["security_schemes"] = schemes
        if kwargs.get("security") is None:
            kwargs["security"] = requirement
        return finish(super().get_openapi_schema(**kwargs))


def configure(app: APIGatewayRestResolver) -> None:
    """Title, version and description of the control API's document. Its auth schemes are
    added when the document is built (:meth:`DocumentedResolver.get_openapi_schema`) and the
    Swagger UI is :func:`swagger_page`: both need Powertools' OpenAPI models, which no other
    request does."""
    app.configure_openapi(title=TITLE, version=API_VERSION, description=DESCRIPTION)


def security() -> tuple[dict[str, Any], list[dict[str, list[str]]]]:
    """The document's auth schemes, and the requirement that a request meets one of them."""
    from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn, HTTPBearer

    schemes: dict[str, Any] = {
        "bearer": HTTPBearer(description="`Authorization: Bearer <API key>`"),
        "apiKey": APIKey(
            name="X-Api-Key", in_=APIKeyIn.header, description="`X-Api-Key: <API key>`"
        ),
    }
    return schemes, [{"bearer": []}, {"apiKey": []}]


def swagger_page(
    app: APIGatewayRestResolver, base_path: str, query: Mapping[str, str]
) -> Response[str]:
    """``GET /swagger``: the Swagger UI page with the document inlined (``?format=json``: the
    document alone), as Powertools' ``enable_swagger`` serves it, without its models loaded
    at start-up."""
    from aws_lambda_powertools.event_handler.openapi import swagger_ui
    from aws_lambda_powertools.event_handler.openapi.models import Server

    if query.get("format") == "oauth2-redirect":
        html = swagger_ui.generate_oauth2_redirect_html()
        return Response(status_code=200, content_type="text/html", body=html)
    # The .replace keeps a "</script>" inside the document from closing the page's script.
    spec = app.get_openapi_json_schema(servers=[Server(url=base_path or "/")])
    spec = spec.replace("</", "<\\/")
    if query.get("format") == "json":
        return Response(status_code=200, content_type="application/json", body=spec)
    assets = Path(str(swagger_ui.__file__)).parent
    js = (assets / "swagger-ui-bundle.min.js").read_text(encoding="utf-8")
    css = (assets / "swagger-ui.min.css").read_text(encoding="utf-8")
    html = swagger_ui.generate_swagger_html(spec, js, css, "", None, False)
    return Response(status_code=200, content_type="text/html", body=html)


def finish(schema: OpenAPI) -> OpenAPI:
    """The generated document with the definition body declared and one error model."""
    from aws_lambda_powertools.event_handler.openapi.models import OpenAPI

    document = schema.model_dump(by_alias=True, exclude_none=True, mode="json")
    components = document.setdefault("components", {}).setdefault("schemas", {})
    for path_item in (document.get("paths") or {}).values():
        for operation in path_item.values():
            if isinstance(operation, dict) and "responses" in operation:
                _use_error_body(operation["responses"])
    for name in _DROPPED:
        components.pop(name, None)
    put = ((document.get("paths") or {}).get("/workflows/{workflow_id}") or {}).get("put")
    if put is not None:
        put["requestBody"] = _definition_body(components)
    return OpenAPI.model_validate(document)


def _use_error_body(responses: dict[str, Any]) -> None:
    for status, response in responses.items():
        if not str(status).startswith(("4", "5")):
            continue
        response["content"] = {"application/json": {"schema": {"$ref": _ERROR_REF}}}
        if status == "422" and response.get("description") == "Validation Error":
            response["description"] = ERROR_DESCRIPTIONS[422]
        if status == "500":
            response["description"] = ERROR_DESCRIPTIONS[500]


def _definition_body(components: dict[str, Any]) -> dict[str, Any]:
    """The PUT body: the definition format's JSON Schema, or the same document as YAML text."""
    from relayflow.definition.models import Workflow

    workflow = Workflow.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in workflow.pop("$defs", {}).items():
        components.setdefault(name, definition)
    components.setdefault("WorkflowDefinition", workflow)
    return {
        "required": True,
        "description": "The workflow definition (docs/definitions.md); its `id` is the path's.",
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/WorkflowDefinition"}},
            YAML_MEDIA_TYPE: {
                "schema": {"type": "string", "description": "The definition as YAML text."}
            },
        },
    }
