"""Whose step is running: the tenant a step acts for.

A step's tenant is ``$.run.tenant`` of its state document, written by Relayflow when the run
starts (a step writes only its own ``ResultPath``). :func:`relayflow.observability.step_handler`
opens :func:`acting_for` around every step invocation, and the platform functions that act for
a tenant they looked up (the webhook function verifying a delivery, the recorder sending a
notification) open it themselves. Everything that reads a secret or calls AWS on a tenant's
behalf asks :func:`acting_tenant`, which fails closed when nobody said whose call it is.

The scope is a :class:`contextvars.ContextVar`: the local server runs several steps of several
tenants at once on threads, and each thread sees only its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from relayflow.errors import InvalidArgsError

#: The session tag (and IAM principal tag) that carries the tenant: ``aws:PrincipalTag/…``.
TENANT_TAG = "relayflow-tenant"
#: A tenant id: the only value the session tag may carry (TenantStepRole's trust policy
#: refuses what IAM's wildcards can tell apart from it; the rest is refused here).
TENANT_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{1,30}$")

#: One segment of a secret name: what Secrets Manager and SSM both allow, and never ``.``/``..``.
_SEGMENT = re.compile(r"^[A-Za-z0-9_+=@.-]+$")

_acting: ContextVar[str | None] = ContextVar("relayflow_acting_tenant", default=None)


class TenantBoundary(InvalidArgsError):
    """A step reached outside its tenant: another tenant's secret, one of Relayflow's own
    resources, a reserved event source. ASL sees ``Relayflow.InvalidArgs`` (not retried: the
    same call is refused again) with ``details.rule`` ``tenant-boundary``."""

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message, rule="tenant-boundary", **details)


@contextmanager
def acting_for(tenant: str | None) -> Iterator[None]:
    """Run the block for ``tenant`` (``None``: for nobody, so tenant-scoped calls refuse)."""
    token = _acting.set(tenant or None)
    try:
        yield
    finally:
        _acting.reset(token)


def acting_tenant() -> str:
    """The tenant the current step acts for. Raises :class:`TenantBoundary` outside
    :func:`acting_for`: a secret or an AWS call with no tenant is never made with the
    function's own reach."""
    tenant = _acting.get()
    if not tenant:
        raise TenantBoundary("no tenant is acting: a tenant's secret or AWS call needs one")
    return tenant


def secret_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a tenant's secret (whatever the tenant), or ``None``. A
    definition names secrets relative to its tenant's folder: a path of segments of
    ``A-Z a-z 0-9 _ + = @ . -``, not ``.`` or ``..``, not starting with ``/``, not an ARN."""
    if name.startswith("arn:"):
        return "an ARN reaches outside the tenant; name the secret inside its folder"
    if name.startswith("/"):
        return "a name starting with / reaches outside the tenant's folder"
    for segment in name.split("/"):
        if segment in ("", ".", ".."):
            return "an empty, . or .. segment reaches outside the tenant's folder"
        if not _SEGMENT.match(segment):
            return "each /-separated segment holds only A-Z a-z 0-9 _ + = @ . -"
    return None
