"""boto3 clients that act for one tenant: the adapter behind every AWS call a step makes on a
tenant's behalf (``aws.*`` tools, agent tool calls, secrets of tools, webhooks, model keys and
notifications).

On AWS (``settings.tenant_step_role_arn`` set) the function assumes ``TenantStepRole`` with the
session tag ``relayflow-tenant=<tenant>``. That role's policy names resources through
``${aws:PrincipalTag/relayflow-tenant}`` (its secrets are ``<prefix><tenant>/*``) and denies
Relayflow's own table, payload bucket, state machines, functions, bus and schedule group, so
the credentials a step holds reach nothing of another tenant and nothing of Relayflow's.
Credentials are kept per tenant until five minutes before they expire.

Without the setting (the local runtime, which has no IAM) the process's own clients are used,
and the same refusals are made in code: :mod:`relayflow.tools.secrets` scopes every secret
name to the tenant, :mod:`relayflow.tools.guard` refuses Relayflow's resources.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from relayflow.adapters.aws import client, on_reset
from relayflow.tenancy import TENANT_ID_PATTERN, TENANT_TAG, TenantBoundary

#: Assumed-role credentials are refreshed this long before they expire.
REFRESH_MARGIN_SECONDS = 300
#: How long one assumed session lasts: STS's default, and the role's MaxSessionDuration, which
#: is IAM's minimum (template.yaml).
SESSION_SECONDS = 3600

_lock = threading.Lock()
_sessions: dict[tuple[str, str], tuple[float, Any]] = {}
_clients: dict[tuple[str, str, str], Any] = {}


def tenant_client(service: str, tenant: str) -> Any:
    """A boto3 client for ``service`` whose calls act for ``tenant`` (see the module
    docstring). STS failures are botocore errors, mapped by the caller like any AWS call."""
    from relayflow.settings import get_settings

    role_arn = get_settings().tenant_step_role_arn
    if not role_arn:
        return client(service)
    session = _session(role_arn, tenant)
    key = (role_arn, tenant, service)
    with _lock:
        found = _clients.get(key)
        if found is not None and found[0] is session:
            return found[1]
    from botocore.config import Config

    made = session.client(
        service, config=Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5)
    )
    with _lock:
        _clients[key] = (session, made)
    return made


def session_name(tenant: str) -> str:
    """The role session name CloudTrail shows for a tenant's calls."""
    return f"relayflow-{tenant}"[:64]


def _session(role_arn: str, tenant: str) -> Any:
    if not isinstance(tenant, str) or not TENANT_ID_PATTERN.match(tenant):
        # Never a session tag that is not a tenant id: the trust policy's wildcards cannot
        # refuse every such value (a non-ASCII letter), so the one caller refuses them all.
        raise TenantBoundary(f"{tenant!r} is not a tenant id: no tenant session is assumed")
    now = time.time()
    with _lock:
        cached = _sessions.get((role_arn, tenant))
    if cached is not None and cached[0] - REFRESH_MARGIN_SECONDS > now:
        return cached[1]
    import boto3

    answer = client("sts").assume_role(
        RoleArn=role_arn,
        RoleSessionName=session_name(tenant),
        DurationSeconds=SESSION_SECONDS,
        Tags=[{"Key": TENANT_TAG, "Value": tenant}],
    )
    credentials = answer["Credentials"]
    session = boto3.session.Session(
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
    )
    expires = credentials["Expiration"]
    expiry = expires.timestamp() if hasattr(expires, "timestamp") else now + SESSION_SECONDS
    with _lock:
        _sessions[(role_arn, tenant)] = (expiry, session)
    return session


def reset_tenant_sessions() -> None:
    """Forget every assumed session and its clients (tests; the local runtime)."""
    with _lock:
        _sessions.clear()
        _clients.clear()


on_reset(reset_tenant_sessions)
