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

:func:`handle` is the Lambda entry point (``functions/api/app.py`` calls it). It refuses what
no route reads (:mod:`relayflow.api.precheck`) and hands the rest to the resolver, which
:mod:`relayflow.api.routing` builds on the first request: the routes are in
:mod:`relayflow.api.routes` (one ``Router`` per resource), the resolver and what they share in
:mod:`relayflow.api.resolver`.
"""

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from relayflow.api.precheck import MAX_BODY_BYTES, media_type_refusal, request_id_of
from relayflow.observability import logger

# ----------------------------------------------------------------------------- entry point


def _early_error(status: int, code: str, message: str) -> dict[str, Any]:
    """A proxy response for a request refused before routing (the same error model)."""
    from aws_lambda_powertools.event_handler import content_types

    from relayflow.api.resolver import ErrorBody

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
    request_id = request_id_of(event)
    logger.thread_safe_append_keys(request_id=request_id)
    try:
        refused = _refuse_body(event)
        if refused is None and (reason := media_type_refusal(event)) is not None:
            refused = _early_error(415, "unsupported_media_type", reason)
        if refused is not None:
            return refused
        from relayflow.api.routing import app

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
