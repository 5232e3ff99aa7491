"""Circuit breakers and API keys (and authenticating a key's secret)."""

from __future__ import annotations

import hmac
import secrets

from relayflow.control.errors import BadRequest, NotFound
from relayflow.control.models import ApiKeyInfo, NewApiKey, Page
from relayflow.control.plane.base import PlaneBase
from relayflow.control.plane.common import (
    KEY_ID_PATTERN,
    _key_info,
    check_limit,
    check_tenant,
    hash_secret,
    now_iso,
    translated,
)
from relayflow.dal import ApiKeyItem
from relayflow.reliability.breakers import BreakerInfo, is_breaker_id


class Access(PlaneBase):
    """The circuit-breaker and API-key methods of the control plane."""

    @translated
    def list_breakers(
        self, tenant: str, *, limit: int = 50, next_token: str | None = None
    ) -> Page[BreakerInfo]:
        """The tenant's circuit breakers (every one that has counted a failure), by id."""
        check_tenant(tenant)
        check_limit(limit)
        items, token = self.breakers.list(tenant, limit=limit, next_token=next_token)
        return Page[BreakerInfo](items=items, next_token=token)

    @translated
    def reset_breaker(self, tenant: str, breaker_id: str) -> BreakerInfo:
        """Close the tenant's breaker now (its failures forgotten, a running trial dropped).
        :class:`NotFound` for a breaker the tenant does not have."""
        check_tenant(tenant)
        info = self.breakers.reset(tenant, breaker_id) if is_breaker_id(breaker_id) else None
        if info is None:
            raise NotFound(f"circuit breaker {breaker_id} not found")
        return info

    # -- API keys ----------------------------------------------------------------------------

    @translated
    def create_api_key(self, tenant: str, name: str) -> NewApiKey:
        """A new API key for ``tenant``. The secret is in the result only: the table keeps
        its sha256."""
        check_tenant(tenant)
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
        self.dal.put_api_key(item)
        return NewApiKey(**_key_info(item).model_dump(), secret=secret)

    @translated
    def revoke_api_key(self, key_id: str, *, tenant: str | None = None) -> ApiKeyInfo:
        """Revoke a key by its public id; it stops authenticating at once. With ``tenant``,
        another tenant's key is :class:`NotFound`."""
        if tenant is not None:
            check_tenant(tenant)
        item = self.dal.get_api_key_by_id(key_id) if KEY_ID_PATTERN.match(key_id) else None
        if item is None or (tenant is not None and item.tenant != tenant):
            raise NotFound(f"API key {key_id} not found")
        return _key_info(self.dal.revoke_api_key(item.key_hash, now_iso()))

    @translated
    def list_api_keys(self, tenant: str) -> list[ApiKeyInfo]:
        """The tenant's keys, oldest first, revoked ones included (never a secret)."""
        check_tenant(tenant)
        return [_key_info(item) for item in self.dal.list_api_keys(tenant)]

    @translated
    def authenticate(self, secret: str) -> str | None:
        """The tenant of a valid, unrevoked key; ``None`` for anything else."""
        item = self.authenticated_key(secret)
        return item.tenant if item is not None else None

    def authenticated_key(self, secret: str) -> ApiKeyItem | None:
        """The valid, unrevoked key ``secret`` is; ``None`` for anything else."""
        if not isinstance(secret, str) or not secret.startswith("rf_") or len(secret) > 200:
            return None
        computed = hash_secret(secret)
        item = self.dal.get_api_key(computed)
        if item is None or not hmac.compare_digest(item.key_hash, computed):
            return None
        if item.revoked_at is not None:
            return None
        return item
