"""The control plane's limits and identifier rules, and the ids derived from them."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

from relayflow.control.errors import BadRequest, ReservedTenant
from relayflow.tenancy import TENANT_ID_PATTERN

TENANT_PATTERN = TENANT_ID_PATTERN
WORKFLOW_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
#: Run ids are execution names: Step Functions allows 80 characters of these.
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
KEY_ID_PATTERN = re.compile(r"^key_[0-9a-f]{12}$")

#: The submitted definition is stored on its version item (DynamoDB items stop at 400 KB).
MAX_DEFINITION_BYTES = 350_000
#: Step Functions refuses execution input over 256 KB; the run item keeps the trigger input.
MAX_INPUT_BYTES = 256 * 1024
#: A run's output is kept on the run item up to this size; larger ones are read from Step
#: Functions (DescribeExecution) when a run is fetched.
MAX_STORED_OUTPUT_BYTES = 96 * 1024
#: Run items expire this long after their run ended: Step Functions keeps the history of a
#: Standard execution (which the step timeline is built from) for 90 days.
RUN_RETENTION = timedelta(days=90)
#: A run that never reports its end still expires: the longest Standard execution (a year)
#: plus the retention.
RUN_MAX_AGE = timedelta(days=366) + RUN_RETENTION
MAX_IDEMPOTENCY_KEY = 256
MAX_PAGE = 100
CANCEL_ERROR = "Relayflow.Cancelled"
#: Step Functions' execution status → Relayflow's run status.
RUN_STATUS = {
    "RUNNING": "running",
    "SUCCEEDED": "succeeded",
    "FAILED": "failed",
    "TIMED_OUT": "timed_out",
    "ABORTED": "aborted",
}


def check_tenant(tenant: str) -> None:
    """:class:`BadRequest` unless ``tenant`` is a tenant id."""
    if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
        raise BadRequest(f"invalid tenant id {tenant!r}: allowed ^[a-z0-9][a-z0-9-]{{1,30}}$")


#: The stages a stack may be deployed as (template.yaml's ``Stage``; tests/deploy checks it).
STAGES = ("dev", "prod")
#: The local runtime's stage (``settings.stage``), and the tenant its server creates for itself.
LOCAL_STAGE = "local"
#: Names of the platform's own folders beside the tenants' ones (``relayflow-internal/``,
#: ``/relayflow-platform/``) and names that read as the platform's.
PLATFORM_NAMES = ("platform", "relayflow", "relayflow-internal", "relayflow-platform", "internal")


def reserved_tenants(stage: str) -> frozenset[str]:
    """The tenant ids no tenant may be created with on a stack of ``stage``: a tenant's
    secrets and parameters are ``relayflow/<stage>/<tenant>/`` (``SecretNamePrefix``), so a
    tenant named like a stage would own ``relayflow/<stage>/`` under a stack that keeps the
    shared ``relayflow/`` prefix, and the platform's names would read as the platform's
    own. ``local`` is the local runtime's stage and the tenant its server keeps for itself:
    reserved on a deployed stack, the bootstrap tenant locally."""
    own = () if stage == LOCAL_STAGE else (LOCAL_STAGE,)
    return frozenset((*STAGES, *PLATFORM_NAMES, *own))


def check_new_tenant(tenant: str, stage: str) -> None:
    """:func:`check_tenant`, and :class:`ReservedTenant` (422 ``reserved_tenant``) for an id
    of :func:`reserved_tenants`: what creating a tenant (its first API key) checks."""
    check_tenant(tenant)
    reserved = reserved_tenants(stage)
    if tenant in reserved:
        raise ReservedTenant(
            f"tenant id {tenant!r} is reserved: stage names and the platform's own names "
            f"({', '.join(sorted(reserved))}) name Relayflow's folders, not a tenant's; "
            "choose another id",
            {"tenant": tenant, "reserved": sorted(reserved)},
        )


def check_limit(limit: int) -> None:
    """:class:`BadRequest` unless ``limit`` is a page size from 1 to :data:`MAX_PAGE`."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE:
        raise BadRequest(f"limit must be an integer from 1 to {MAX_PAGE}")


def idempotent_run_id(tenant: str, workflow_id: str, key: str) -> str:
    """The run id (and execution name) of an Idempotency-Key: the same key always maps to
    the same run of that tenant's workflow."""
    return hashlib.sha256(f"{tenant}\n{workflow_id}\n{key}".encode()).hexdigest()[:32]


def hash_secret(secret: str) -> str:
    """The stored form of an API key's secret (sha256, hex)."""
    return hashlib.sha256(secret.encode()).hexdigest()
