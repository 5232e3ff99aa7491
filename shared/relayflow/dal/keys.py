"""Key builders of the one Relayflow table: every key of every item is built here.

Tenant-owned items start their partition key with ``TENANT#<tenant>#``, so a read or write
that builds its key from the caller's tenant can only ever reach that tenant's items: another
tenant's ids land in partitions that do not exist (they behave exactly like missing ids).
API keys are the one exception: they are found by the hash of the secret, before the tenant
is known, and carry their tenant as an attribute.

Key parts must not contain ``#``, the separator; every builder refuses one that does.
"""

from __future__ import annotations

from typing import TypedDict


class Key(TypedDict):
    pk: str
    sk: str


SEPARATOR = "#"
#: Sort key of a workflow's head item, and the prefix of its version items.
WORKFLOW_SK = "WF"
VERSION_SK_PREFIX = "V#"
RUN_SK = "RUN"
API_KEY_SK = "KEY"
KEY_ID_SK = "KEYID"
HOOK_SK = "HOOK"


def part(value: str, what: str) -> str:
    if not isinstance(value, str) or not value or SEPARATOR in value:
        raise ValueError(f"{what} must be a non-empty string without {SEPARATOR!r}: {value!r}")
    return value


def tenant_prefix(tenant: str) -> str:
    return f"TENANT#{part(tenant, 'tenant')}"


# -------------------------------------------------------------------------------- API keys


def api_key_key(key_hash: str) -> Key:
    """An API key, found by the sha256 hex of its secret."""
    return {"pk": f"KEY#{part(key_hash, 'key hash')}", "sk": API_KEY_SK}


def key_id_key(key_id: str) -> Key:
    """The pointer from a key's public id to its hash (revocation by key id)."""
    return {"pk": f"KEYID#{part(key_id, 'key id')}", "sk": KEY_ID_SK}


def api_keys_partition(tenant: str) -> str:
    """GSI1 partition of a tenant's API keys."""
    return f"{tenant_prefix(tenant)}#KEYS"


def api_keys_sort(created_at: str, key_id: str) -> str:
    return f"{created_at}#{part(key_id, 'key id')}"


# -------------------------------------------------------------------------------- workflows


def workflow_partition(tenant: str, workflow_id: str) -> str:
    """The partition holding a workflow's head item and all its versions."""
    return f"{tenant_prefix(tenant)}#WF#{part(workflow_id, 'workflow id')}"


def workflow_key(tenant: str, workflow_id: str) -> Key:
    return {"pk": workflow_partition(tenant, workflow_id), "sk": WORKFLOW_SK}


def version_sort(version: int) -> str:
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"a version is a positive integer: {version!r}")
    return f"{VERSION_SK_PREFIX}{version:010d}"


def version_key(tenant: str, workflow_id: str, version: int) -> Key:
    return {"pk": workflow_partition(tenant, workflow_id), "sk": version_sort(version)}


def workflows_partition(tenant: str) -> str:
    """GSI1 partition of a tenant's workflows (sorted by workflow id)."""
    return f"{tenant_prefix(tenant)}#WFS"


# -------------------------------------------------------------------------------- runs


def run_key(tenant: str, run_id: str) -> Key:
    return {"pk": f"{tenant_prefix(tenant)}#RUN#{part(run_id, 'run id')}", "sk": RUN_SK}


def runs_partition(tenant: str, workflow_id: str) -> str:
    """GSI1 partition of a workflow's runs (sorted by start time, then run id)."""
    return f"{workflow_partition(tenant, workflow_id)}#RUNS"


def runs_sort(started_at: str, run_id: str) -> str:
    return f"{started_at}#{part(run_id, 'run id')}"


def step_results_partition(tenant: str, run_id: str) -> str:
    """The partition of a run's recorded step results (``relayflow.steps.idempotency``); the
    sort key is the Powertools idempotency key of one step execution."""
    return f"{tenant_prefix(tenant)}#STEP#{part(run_id, 'run id')}"


# -------------------------------------------------------------------------------- triggers


def hook_key(slug: str) -> Key:
    """A webhook slug's registration. Slugs are global (``POST /hooks/<slug>`` carries no
    tenant), so the item is found by the slug and names its owner as attributes."""
    return {"pk": f"HOOK#{part(slug, 'slug')}", "sk": HOOK_SK}


def hooks_partition(tenant: str, workflow_id: str) -> str:
    """GSI1 partition of the webhook slugs a workflow registered (sorted by slug)."""
    return f"{workflow_partition(tenant, workflow_id)}#HOOKS"


# -------------------------------------------------------------------------------- waits


WAIT_SK = "WAIT"


def wait_key(tenant: str, wait_id: str) -> Key:
    """An approval request or a waitpoint (``TENANT#<t>#WAIT#<id>``; the approval and
    waitpoint functions may write only partitions of this shape)."""
    return {"pk": f"{tenant_prefix(tenant)}#WAIT#{part(wait_id, 'wait id')}", "sk": WAIT_SK}


def approvals_partition(tenant: str) -> str:
    """GSI1 partition of a tenant's approval requests (sorted by creation, then id)."""
    return f"{tenant_prefix(tenant)}#APPROVALS"


def approvals_sort(created_at: str, approval_id: str) -> str:
    return f"{created_at}#{part(approval_id, 'approval id')}"


def run_waitpoints_partition(tenant: str, run_id: str) -> str:
    """GSI1 partition of the waitpoints a run waits (or waited) on (sorted like approvals)."""
    return f"{tenant_prefix(tenant)}#RUN#{part(run_id, 'run id')}#WAITPOINTS"
