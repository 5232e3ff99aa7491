"""Secrets for outbound calls (HTTP tool auth, webhook signing), read through Powertools
parameters from Secrets Manager or SSM Parameter Store (``SecureString``, decrypted).

**Every secret a workflow names belongs to the tenant that runs it.** A definition names a
secret relative to its tenant's folder (``{name: stripe}``); Relayflow reads
``<prefix><tenant>/stripe`` from Secrets Manager, ``/<prefix><tenant>/stripe`` from SSM
(``settings.secret_prefix``: the stack's ``SecretNamePrefix``, by default
``relayflow/<stage>/``, so two stages never share a tenant's secrets). The full name of the
tenant's own folder is accepted too. A name that climbs out (``..``), starts at the root
(``/``), is an ARN, or lies under the prefix but in another tenant's folder is refused, at
validation (:func:`secret_name_problem`) and again here (:class:`~relayflow.tenancy.
TenantBoundary`), and on AWS the read itself runs under the tenant's identity
(:mod:`relayflow.adapters.tenant_aws`), which IAM lets read only ``<prefix><tenant>/*``.
Relayflow's own secrets (the approval signing key) are read by :func:`read_platform_secret`.

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
from relayflow.tenancy import TenantBoundary, acting_tenant, secret_name_problem

#: How long a secret value is reused before it is read again.
SECRET_MAX_AGE_SECONDS = 300

_lock = threading.Lock()
_providers: dict[tuple[str, str | None], Any] = {}


def tenant_folder(tenant: str, source: str = "secretsmanager", prefix: str | None = None) -> str:
    """``<prefix><tenant>/`` (Secrets Manager) or ``/<prefix><tenant>/`` (SSM)."""
    if prefix is None:
        from relayflow.settings import get_settings

        prefix = get_settings().secret_prefix
    folder = f"{prefix}{tenant}/"
    return "/" + folder.lstrip("/") if source == "ssm" else folder


def secret_path(name: str, tenant: str, source: str = "secretsmanager") -> str:
    """The full name of ``tenant``'s secret ``name``: relative names join the tenant's folder,
    a name already in it stays. Raises :class:`TenantBoundary` for any other name."""
    folder = tenant_folder(tenant, source)
    relative = name
    for spelled in (folder, folder.lstrip("/")):  # SSM's folder, with or without its /
        if name.startswith(spelled):
            relative = name[len(spelled) :]
            break
    problem = secret_name_problem(relative)
    prefix = folder[: -len(tenant) - 1].lstrip("/")
    # Names under the prefix, or under its first folder (relayflow/ of relayflow/<stage>/: the
    # folders of the other stages, and of the layout before per-stage prefixes), are absolute:
    # only the tenant's own folder is accepted.
    root = prefix.split("/", 1)[0] + "/" if "/" in prefix else prefix
    if problem is None and root and relative.startswith(root):
        problem = f"it lies under {root!r} but outside the tenant's folder {folder!r}"
    if problem is not None:
        raise TenantBoundary(f"secret {name!r} is refused: {problem}", secret=name)
    return folder + relative


def _provider(source: str, tenant: str | None) -> Any:
    service = "secretsmanager" if source == "secretsmanager" else "ssm"
    if tenant is None:
        current = client(service)
    else:
        from relayflow.adapters.tenant_aws import tenant_client

        current = tenant_client(service, tenant)
    with _lock:
        provider = _providers.get((source, tenant))
        if provider is None or provider.client is not current:
            from aws_lambda_powertools.utilities.parameters import SecretsProvider, SSMProvider

            factory = SecretsProvider if source == "secretsmanager" else SSMProvider
            provider = factory(boto3_client=current)
            _providers[(source, tenant)] = provider
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


def resolve_secret(ref: Any, *, tenant: str | None = None) -> str:
    """The value of a :class:`~relayflow.definition.models.SecretRef` (or its JSON form) of
    ``tenant`` (default: :func:`~relayflow.tenancy.acting_tenant`), read as that tenant.

    The name is scoped by :func:`secret_path` (another tenant's name is
    :class:`TenantBoundary`, before anything is read). With ``field``, the secret must be a
    JSON object and the field's value is returned (as text). Throttling and network
    failures are ``Relayflow.Transient``; a missing secret, missing field or denied access is
    ``Relayflow.InvalidArgs`` (a configuration fault that retrying cannot fix)."""
    name, source, field = _ref_fields(ref)
    tenant = tenant or acting_tenant()
    full = secret_path(name, tenant, source)
    where = f"secret {name!r} ({source})"
    return _value(_read(full, source, where, tenant), where, name, field)


def read_platform_secret(name: str, source: str = "secretsmanager") -> str:
    """The value of one of Relayflow's own secrets or parameters (the approval signing key,
    the public base URL), read with the function's own identity. Never for a name that comes
    from a definition: those are a tenant's, read by :func:`resolve_secret`."""
    where = f"secret {name!r} ({source})"
    return _value(_read(name, source, where, None), where, name, None)


def _value(value: Any, where: str, name: str, field: str | None) -> str:
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


def _read(name: str, source: str, where: str, tenant: str | None) -> Any:
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    provider = _provider(source, tenant)
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


def tenant_secret_problems(workflow: Any, tenant: str) -> list[Any]:
    """Problems (rule ``secret-tenant``) of every secret ``workflow`` names that ``tenant``
    may not read: each names the secret and where it is (``steps.sign.secret.name``)."""
    from relayflow.definition.problems import Problem
    from relayflow.definition.secret_refs import secret_refs

    problems: list[Problem] = []
    for path, ref in secret_refs(workflow):
        try:
            secret_path(ref.name, tenant, ref.source)
        except TenantBoundary as exc:
            problems.append(Problem(None, f"{path}.name", "secret-tenant", exc.message))
    return problems
