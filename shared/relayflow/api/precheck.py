"""What the API decides about a request before routing: its size and media type, and the
limits and public resources that decision (and the resolver) share.

Nothing heavy is imported here: :func:`relayflow.api.app.handle` refuses a body before the
resolver (Powertools' validation and the route modules, most of the function's import time)
is loaded at all.
"""

from collections.abc import Mapping
from typing import Any

#: API Gateway accepts 10 MB; Relayflow stores run input and definitions up to this.
MAX_BODY_BYTES = 256 * 1024
#: Routes API Gateway serves without the authorizer (template.yaml: ``Auth: NONE``); every
#: other path reaches this function through the ``/{proxy+}`` resource.
PUBLIC_RESOURCES = frozenset({"/openapi.json", "/swagger"})
#: The public guest approval page (template.yaml: GET and POST, ``Auth: NONE``): the signed
#: link in its query is the credential (relayflow.approvals).
GUEST_APPROVAL_RESOURCE = "/guest/approvals/{id}"

YAML_MEDIA_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"})

#: Methods whose body a route reads.
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def media_type_refusal(event: Mapping[str, Any]) -> str | None:
    """Why the body of ``event`` is in a format no route here reads (a 415), or ``None``.

    Every route reads JSON (and ``PUT /workflows/{id}`` YAML too); the guest approval page reads
    its HTML form. Powertools would parse a form or multipart body into fields, so a route whose
    fields all have defaults would act on an empty request (a run started without its input),
    and a multipart type without a boundary would fail inside the parser. A request without a
    body or without a Content-Type is read as JSON, as before."""
    if str(event.get("httpMethod") or "").upper() not in _BODY_METHODS:
        return None
    if event.get("resource") == GUEST_APPROVAL_RESOURCE:
        return None
    headers = {str(k).lower(): v for k, v in (event.get("headers") or {}).items()}
    raw = str(headers.get("content-type") or "").strip()
    if not raw or not event.get("body"):
        return None
    media_type = raw.split(";", 1)[0].strip().lower()
    if media_type == "application/json" or media_type.endswith("+json"):
        return None
    if media_type in YAML_MEDIA_TYPES and str(event.get("httpMethod")).upper() == "PUT":
        return None
    return f"Content-Type {media_type or raw} is not read here: send the body as application/json"


def request_id_of(event: Mapping[str, Any]) -> str:
    """API Gateway's id of the request (``-`` when there is none)."""
    context = event.get("requestContext") or {}
    return str(context.get("requestId") or "-")
