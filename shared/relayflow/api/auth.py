"""The API's REQUEST authorizer: an API key in, an IAM policy and the caller's tenant out.

The key comes in ``Authorization: Bearer <secret>`` or ``X-Api-Key: <secret>``.
:meth:`ControlPlane.authenticate` resolves it to a tenant (valid, unrevoked keys only). The
answer allows every route of the API's stage (API Gateway may cache it for the key and reuse it
on other routes) and carries ``context.tenant``, which API Gateway hands to the API function in
``requestContext.authorizer.tenant``. A missing or unknown key raises :class:`Unauthorized`,
whose message ``Unauthorized`` is what makes API Gateway answer 401.

``relayflow serve`` runs this same function before each non-public local request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.observability import logger

#: Header names are case-insensitive; these are compared lower-cased.
AUTHORIZATION = "authorization"
API_KEY_HEADER = "x-api-key"
#: Longest secret looked up (real ones are ~50 characters); longer ones are refused unhashed.
MAX_SECRET_LENGTH = 512


class Unauthorized(Exception):
    """No valid API key. The message must be exactly ``Unauthorized``: API Gateway maps that
    Lambda error to a 401 response."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


def _header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    for key, value in (headers or {}).items():
        if isinstance(key, str) and key.lower() == name:
            if isinstance(value, list):
                value = value[0] if value else None
            return value if isinstance(value, str) else None
    return None


def extract_secret(headers: Mapping[str, Any] | None) -> str | None:
    """The API key a request presents: ``Authorization: Bearer <secret>`` (scheme in any case)
    first, else ``X-Api-Key``. ``None`` when neither holds a plausible secret."""
    authorization = _header(headers, AUTHORIZATION)
    if authorization:
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and credentials.strip():
            return _plausible(credentials.strip())
    api_key = _header(headers, API_KEY_HEADER)
    return _plausible(api_key.strip()) if api_key and api_key.strip() else None


def _plausible(secret: str) -> str | None:
    return secret if len(secret) <= MAX_SECRET_LENGTH else None


def tenant_for(headers: Mapping[str, Any] | None, control: Any | None = None) -> str:
    """The tenant of the request's API key; raises :class:`Unauthorized` without one."""
    return str(key_for(headers, control).tenant)


def key_for(headers: Mapping[str, Any] | None, control: Any | None = None) -> Any:
    """The request's valid API key (its item: tenant, key id, name); raises
    :class:`Unauthorized` without one."""
    secret = extract_secret(headers)
    if secret is None:
        raise Unauthorized()
    if control is None:
        from relayflow.control.service import get_control_plane

        control = get_control_plane()
    item = control.authenticated_key(secret)
    if item is None:
        raise Unauthorized()
    return item


def authorize(event: Mapping[str, Any], control: Any | None = None) -> dict[str, Any]:
    """Answer an API Gateway REQUEST authorizer event: allow the whole API stage for the key's
    tenant, with ``context.tenant`` (and the key's ``key_id`` and ``key_name``); raise
    :class:`Unauthorized` (401) otherwise."""
    from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
        APIGatewayAuthorizerResponse,
        parse_api_gateway_arn,
    )

    try:
        key = key_for(event.get("headers"), control)
    except Unauthorized:
        logger.info("request refused: no valid API key", extra={"path": event.get("path")})
        raise
    tenant = str(key.tenant)
    arn = parse_api_gateway_arn(str(event.get("methodArn") or ""))
    policy = APIGatewayAuthorizerResponse(
        principal_id=tenant,
        region=arn.region,
        aws_account_id=arn.aws_account_id,
        api_id=arn.api_id,
        stage=arn.stage,
        # The key names who answered an approval (relayflow.api.app._responder).
        context={"tenant": tenant, "key_id": key.key_id, "key_name": key.name},
    )
    policy.allow_all_routes()
    return policy.asdict()
