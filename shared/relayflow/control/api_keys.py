"""API keys: create, revoke, list, and authenticate a key's secret."""

from __future__ import annotations

import hmac
import secrets

from relayflow.control.errors import BadRequest, NotFound
from relayflow.control.limits import KEY_ID_PATTERN, check_new_tenant, check_tenant, hash_secret
from relayflow.control.models import ApiKeyInfo, NewApiKey
from relayflow.control.records import key_info
from relayflow.control.times import now_iso
from relayflow.dal import ApiKeyItem, Dal


def create_api_key(dal: Dal, tenant: str, name: str) -> NewApiKey:
    """A new API key for ``tenant``. The secret is in the result only: the table keeps
    its sha256. A reserved tenant id (:func:`reserved_tenants`) is 422 ``reserved_tenant``."""
    from relayflow.settings import get_settings

    check_new_tenant(tenant, get_settings().stage)
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= 100:
        raise BadRequest("a key name has 1 to 100 characters")
    key_id = f"key_{secrets.token_hex(6)}"
    secret = f"rf_{key_id}_{secrets.token_urlsafe(24)}"
    item = ApiKeyItem(
        key_id=key_id,
        tenant=tenant,
        name=name.strip(),
        key_hash=hash_secret(secret),
        created_at=now_iso(),
    )
    dal.put_api_key(item)
    return NewApiKey(**key_info(item).model_dump(), secret=secret)


def revoke_api_key(dal: Dal, key_id: str, *, tenant: str | None = None) -> ApiKeyInfo:
    """Revoke a key by its public id; it stops authenticating at once. With ``tenant``,
    another tenant's key is :class:`NotFound`."""
    if tenant is not None:
        check_tenant(tenant)
    item = dal.get_api_key_by_id(key_id) if KEY_ID_PATTERN.match(key_id) else None
    if item is None or (tenant is not None and item.tenant != tenant):
        raise NotFound(f"API key {key_id} not found")
    return key_info(dal.revoke_api_key(item.key_hash, now_iso()))


def list_api_keys(dal: Dal, tenant: str) -> list[ApiKeyInfo]:
    """The tenant's keys, oldest first, revoked ones included (never a secret)."""
    check_tenant(tenant)
    return [key_info(item) for item in dal.list_api_keys(tenant)]


def authenticated_key(dal: Dal, secret: str) -> ApiKeyItem | None:
    """The valid, unrevoked key ``secret`` is; ``None`` for anything else."""
    if not isinstance(secret, str) or not secret.startswith("rf_") or len(secret) > 200:
        return None
    computed = hash_secret(secret)
    item = dal.get_api_key(computed)
    if item is None or not hmac.compare_digest(item.key_hash, computed):
        return None
    if item.revoked_at is not None:
        return None
    return item
