"""Secrets for outbound calls (HTTP tool auth, webhook signing), read through Powertools
parameters from Secrets Manager or SSM Parameter Store (``SecureString``, decrypted).

Values are cached in memory for :data:`SECRET_MAX_AGE_SECONDS` per warm Lambda, so a step
that runs a thousand times reads its secret a handful of times, and a rotated secret is
picked up within that window. Providers use the client from
:func:`relayflow.adapters.aws.client`; when that client changes (another endpoint, a reset
in tests) the provider and its cache are replaced.

A secret value never appears in an error message, a log line or a step output: errors name
the secret (and field), never its content.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from relayflow.adapters.aws import client
from relayflow.errors import InvalidArgsError, TransientError

#: How long a secret value is reused before it is read again.
SECRET_MAX_AGE_SECONDS = 300

_lock = threading.Lock()
_providers: dict[str, Any] = {}


def _provider(source: str) -> Any:
    service = "secretsmanager" if source == "secretsmanager" else "ssm"
    current = client(service)
    with _lock:
        provider = _providers.get(source)
        if provider is None or provider.client is not current:
            from aws_lambda_powertools.utilities.parameters import SecretsProvider, SSMProvider

            factory = SecretsProvider if source == "secretsmanager" else SSMProvider
            provider = factory(boto3_client=current)
            _providers[source] = provider
    return provider


def clear_secret_cache() -> None:
    """Forget every cached secret value (tests; a forced re-read after rotation)."""
    with _lock:
        for provider in _providers.values():
            provider.clear_cache()
        _providers.clear()


def _ref_fields(ref: Any) -> tuple[str, str, str | None]:
    if isinstance(ref, Mapping):
        name, source, field = ref.get("name"), ref.get("source"), ref.get("field")
    else:
        name, source, field = ref.name, ref.source, ref.field
    source = source or "secretsmanager"
    if not isinstance(name, str) or not name:
        raise InvalidArgsError("a secret reference needs a name")
    if source not in ("secretsmanager", "ssm"):
        raise InvalidArgsError(
            f"secret {name!r}: source must be secretsmanager or ssm, got {source!r}"
        )
    return name, source, field


def resolve_secret(ref: Any) -> str:
    """The value of a :class:`~relayflow.definition.models.SecretRef` (or its JSON form).

    With ``field``, the secret must be a JSON object and the field's value is returned (as
    text). Throttling and network failures are ``Relayflow.Transient``; a missing secret,
    missing field or denied access is ``Relayflow.InvalidArgs`` (a configuration fault that
    retrying cannot fix)."""
    name, source, field = _ref_fields(ref)
    where = f"secret {name!r} ({source})"
    value = _read(name, source, where)
    if isinstance(value, bytes):
        value = value.decode()
    if field is None:
        return str(value)
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise InvalidArgsError(
            f"{where} is not a JSON object, so field {field!r} cannot be read",
            secret=name,
            field=field,
        )
    if field not in parsed:
        raise InvalidArgsError(f"{where} has no field {field!r}", secret=name, field=field)
    picked = parsed[field]
    return picked if isinstance(picked, str) else json.dumps(picked)


def _read(name: str, source: str, where: str) -> Any:
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    provider = _provider(source)
    try:
        if source == "ssm":
            return provider.get(name, decrypt=True, max_age=SECRET_MAX_AGE_SECONDS)
        return provider.get(name, max_age=SECRET_MAX_AGE_SECONDS)
    except GetParameterError as exc:
        raise _secret_error(exc, name, source, where) from None


def _secret_error(exc: Exception, name: str, source: str, where: str) -> Exception:
    from relayflow.tools.aws import aws_error

    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, Exception):
        mapped = aws_error(cause, tool=f"secret:{name}", service=source)
        code = (getattr(mapped, "details", None) or {}).get("code") or type(cause).__name__
        if isinstance(mapped, TransientError):
            return TransientError(f"{where} cannot be read now: {code}", secret=name, code=code)
        return InvalidArgsError(f"{where} cannot be read: {code}", secret=name, code=code)
    return InvalidArgsError(f"{where} cannot be read", secret=name)
