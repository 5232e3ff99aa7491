"""Data access for circuit breakers: the breaker items, their trip audit and skipped runs.

A breaker lives in a partition of its own under the tenant's prefix, with
``P = TENANT#<tenant>#BREAKER#<breaker id>`` (ids are ``tool:<tool name>`` or
``workflow:<workflow id>``, see :mod:`relayflow.reliability.breakers`):

============  ===================================  ===============  =========================
item          pk / sk                              gsi1pk / gsi1sk  expires
============  ===================================  ===============  =========================
breaker       ``P`` / ``BREAKER``                  ``TENANT#<t>#BREAKERS`` / ``<breaker id>``
trip (audit)  ``P`` / ``TRIP#<time>#<8 hex>``      —                90 days
skipped run   ``P`` / ``SKIP#<sha256(key)[:32]>``  —                30 days
============  ===================================  ===============  =========================

Every state change is one conditional write whose condition is the state it leaves, so of
any number of concurrent callers exactly one makes it:

* a failure is ``ADD consecutive_failures 1`` while the breaker is ``closed`` (or absent);
* the trip is one transaction: the breaker goes ``closed → open`` on the condition
  ``state = closed AND consecutive_failures >= threshold`` (or ``half_open → open`` while the
  trial ``trial_token`` is the caller's), and the audit item is put with it;
* the half-open trial is taken by writing ``trial_token`` and ``trial_lease_until`` on the
  condition "open and cooled down, or half-open with an expired lease";
* a success closes on "closed with failures, or half-open with the caller's trial".

Times compared in conditions (``opened_at``, ``reopens_at``, ``trial_lease_until``,
``last_failure_at``) are epoch seconds, because the caller's clock is what they are compared
with; the audit and skip items carry ISO-8601 times as the rest of the table does.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from pydantic import Field

from relayflow.dal import keys
from relayflow.dal.codec import alias_names, serialize
from relayflow.dal.errors import DataAccessError
from relayflow.dal.items import ItemModel
from relayflow.dal.table import TableAccess

BREAKER_SK = "BREAKER"
TRIP_SK_PREFIX = "TRIP#"
SKIP_SK_PREFIX = "SKIP#"
#: How long the audit of a trip, and the record of a skipped run, are kept.
TRIP_RETENTION_SECONDS = 90 * 86_400
SKIP_RETENTION_SECONDS = 30 * 86_400

BreakerState = Literal["closed", "open", "half_open"]


def breaker_partition(tenant: str, breaker_id: str) -> str:
    return f"{keys.tenant_prefix(tenant)}#BREAKER#{keys.part(breaker_id, 'breaker id')}"


def breaker_key(tenant: str, breaker_id: str) -> keys.Key:
    return {"pk": breaker_partition(tenant, breaker_id), "sk": BREAKER_SK}


def breakers_partition(tenant: str) -> str:
    """GSI1 partition of a tenant's breakers (sorted by breaker id)."""
    return f"{keys.tenant_prefix(tenant)}#BREAKERS"


def iso_time(epoch_seconds: float) -> str:
    """ISO-8601 UTC to the millisecond with ``Z`` (the table's format of times)."""
    moment = datetime.fromtimestamp(epoch_seconds, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class BreakerItem(ItemModel):
    """One circuit breaker of one tenant, as stored."""

    kind: ClassVar[str] = "breaker"

    tenant: str
    breaker_id: str
    breaker_kind: Literal["tool", "workflow"]
    state: BreakerState = "closed"
    consecutive_failures: int = 0
    failure_threshold: int | None = Field(None, description="As the last failure declared it.")
    cooldown_seconds: int | None = None
    opened_at: float | None = Field(None, description="Epoch seconds of the last trip.")
    reopens_at: float | None = Field(None, description="Epoch seconds: a trial may start then.")
    trial_token: str | None = Field(None, description="Who holds the half-open trial.")
    trial_lease_until: float | None = Field(None, description="Epoch seconds the trial ends by.")
    trips: int = 0
    last_error: str | None = None
    last_failure_at: float | None = None
    reset_at: float | None = None
    created_at: str | None = None
    updated_at: str | None = None

    def key(self) -> keys.Key:
        return breaker_key(self.tenant, self.breaker_id)

    def index_keys(self) -> dict[str, str]:
        return {"gsi1pk": breakers_partition(self.tenant), "gsi1sk": self.breaker_id}


class TripItem(ItemModel):
    """The audit of one trip (a transition to ``open``), written with the trip itself."""

    kind: ClassVar[str] = "breaker_trip"

    tenant: str
    breaker_id: str
    tripped_at: str
    from_state: Literal["closed", "half_open"]
    failures: int = Field(description="Consecutive failures counted when it tripped.")
    last_error: str | None = None
    failure_threshold: int
    cooldown_seconds: int
    reopens_at: str
    trip_id: str = Field(description="Random hex that keeps two trips in one millisecond apart.")
    expires_at: int = Field(description="TTL: epoch seconds.")

    def key(self) -> keys.Key:
        return {
            "pk": breaker_partition(self.tenant, self.breaker_id),
            "sk": f"{TRIP_SK_PREFIX}{self.tripped_at}#{self.trip_id}",
        }


class SkipItem(ItemModel):
    """A run a trigger did not start because the workflow's breaker was open."""

    kind: ClassVar[str] = "breaker_skip"

    tenant: str
    breaker_id: str
    workflow_id: str
    trigger_type: str
    idempotency_key: str
    skipped_at: str
    reopens_at: str | None = None
    reason: str
    expires_at: int = Field(description="TTL: epoch seconds.")

    def key(self) -> keys.Key:
        digest = hashlib.sha256(self.idempotency_key.encode("utf-8")).hexdigest()[:32]
        return {
            "pk": breaker_partition(self.tenant, self.breaker_id),
            "sk": f"{SKIP_SK_PREFIX}{digest}",
        }


class BreakerDal(TableAccess):
    """Breaker reads and conditional writes, through the table's :class:`Dal` (its client,
    table name and error translation). Each write returns whether its condition held."""

    # -- primitives --------------------------------------------------------------------------

    @contextmanager
    def _reached(self, action: str) -> Iterator[None]:
        """Botocore's own failures (no connection, no credentials) as
        :class:`DataAccessError` too: a breaker's caller decides what an unreachable table
        means, and must never see botocore's types."""
        from botocore.exceptions import BotoCoreError

        try:
            yield
        except BotoCoreError as exc:
            raise DataAccessError(f"{action}: {type(exc).__name__}: {exc}") from exc

    def _update(
        self,
        key: keys.Key,
        expression: str,
        condition: str,
        values: Mapping[str, Any],
    ) -> dict[str, Any] | None:
        """One conditional ``UpdateItem``: the item afterwards, or ``None`` when the condition
        did not hold. Attribute names are written ``#name`` and aliased here."""
        with self._reached("update_item"):
            return self.dal.update_if(key, expression, condition, values)

    # -- reads -------------------------------------------------------------------------------

    def get(self, tenant: str, breaker_id: str) -> BreakerItem | None:
        with self._reached("get_item"):
            raw = self.dal.get(breaker_key(tenant, breaker_id))
        return BreakerItem.from_item(raw) if raw else None

    def list_breakers(
        self, tenant: str, *, limit: int, next_token: str | None
    ) -> tuple[list[BreakerItem], str | None]:
        """A tenant's breakers by id (GSI1, eventually consistent)."""
        return self.dal.page(
            BreakerItem.from_item,
            partition=breakers_partition(tenant),
            limit=limit,
            next_token=next_token,
            forward=True,
        )

    def list_trips(self, tenant: str, breaker_id: str) -> list[TripItem]:
        """The breaker's trip audit, oldest first."""
        return [
            TripItem.from_item(plain)
            for plain in self.dal.query(
                partition=breaker_partition(tenant, breaker_id), sort_prefix=TRIP_SK_PREFIX
            )
        ]

    def list_skips(self, tenant: str, breaker_id: str) -> list[SkipItem]:
        """The runs the breaker kept triggers from starting (by key hash)."""
        return [
            SkipItem.from_item(plain)
            for plain in self.dal.query(
                partition=breaker_partition(tenant, breaker_id), sort_prefix=SKIP_SK_PREFIX
            )
        ]

    # -- transitions -------------------------------------------------------------------------

    def add_failure(
        self,
        tenant: str,
        breaker_id: str,
        *,
        breaker_kind: str,
        failure_threshold: int,
        cooldown_seconds: int,
        error: str | None,
        now: float,
    ) -> BreakerItem | None:
        """Count one failure while the breaker is closed (creating it closed); the breaker
        afterwards, or ``None`` when it is not closed (nothing is counted then)."""
        key = breaker_key(tenant, breaker_id)
        stamp = iso_time(now)
        values: dict[str, Any] = {
            ":closed": "closed",
            ":one": 1,
            ":tenant": tenant,
            ":id": breaker_id,
            ":bkind": breaker_kind,
            ":type": BreakerItem.kind,
            ":gpk": breakers_partition(tenant),
            ":threshold": failure_threshold,
            ":cooldown": cooldown_seconds,
            ":error": error,
            ":now": now,
            ":stamp": stamp,
        }
        raw = self._update(
            key,
            "SET #state = if_not_exists(#state, :closed), #tenant = :tenant, "
            "#breaker_id = :id, #breaker_kind = :bkind, #type = :type, #gsi1pk = :gpk, "
            "#gsi1sk = :id, #failure_threshold = :threshold, #cooldown_seconds = :cooldown, "
            "#last_error = :error, #last_failure_at = :now, #updated_at = :stamp, "
            "#created_at = if_not_exists(#created_at, :stamp) "
            "ADD #consecutive_failures :one",
            "attribute_not_exists(#pk) OR #state = :closed",
            values,
        )
        return BreakerItem.from_item(raw) if raw is not None else None

    def trip(
        self,
        item: BreakerItem,
        *,
        from_state: Literal["closed", "half_open"],
        failure_threshold: int,
        cooldown_seconds: int,
        trial_token: str | None,
        error: str | None,
        now: float,
    ) -> bool:
        """Open the breaker and write the audit of the trip, in one transaction. From
        ``closed`` only while it still counts ``failure_threshold`` failures; from
        ``half_open`` only while ``trial_token`` holds the trial. ``False``: another caller
        changed it first (nothing was written)."""
        reopens_at = now + cooldown_seconds
        values: dict[str, Any] = {
            ":open": "open",
            ":now": now,
            ":reopens": reopens_at,
            ":one": 1,
            ":error": error,
            ":stamp": iso_time(now),
        }
        if from_state == "closed":
            condition = "#state = :closed AND #consecutive_failures >= :threshold"
            values.update({":closed": "closed", ":threshold": failure_threshold})
            failures = item.consecutive_failures
        else:
            condition = "#state = :half AND #trial_token = :token"
            values.update({":half": "half_open", ":token": trial_token})
            failures = item.consecutive_failures + 1
        expression = (
            "SET #state = :open, #opened_at = :now, #reopens_at = :reopens, "
            "#last_error = :error, #last_failure_at = :now, #updated_at = :stamp "
            "REMOVE #trial_token, #trial_lease_until ADD #trips :one"
        )
        if from_state == "half_open":
            expression += ", #consecutive_failures :one"
        audit = TripItem(
            tenant=item.tenant,
            breaker_id=item.breaker_id,
            tripped_at=iso_time(now),
            from_state=from_state,
            failures=failures,
            last_error=error,
            failure_threshold=failure_threshold,
            cooldown_seconds=cooldown_seconds,
            reopens_at=iso_time(reopens_at),
            trip_id=secrets.token_hex(4),
            expires_at=int(now) + TRIP_RETENTION_SECONDS,
        )
        with self._reached("transact_write_items"):
            return self.dal.transact_if(
                [
                    {
                        "Update": {
                            "Key": serialize(item.key()),
                            "UpdateExpression": expression,
                            "ConditionExpression": condition,
                            "ExpressionAttributeNames": alias_names(expression, condition),
                            "ExpressionAttributeValues": serialize(values),
                        }
                    },
                    {
                        "Put": {
                            "Item": serialize(audit.to_item()),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                ]
            )

    def take_trial(
        self, tenant: str, breaker_id: str, *, token: str, now: float, lease_until: float
    ) -> BreakerItem | None:
        """Take the half-open trial: only while the breaker is open and cooled down, or
        half-open with a lease that ran out (its trial died). ``None``: it is not available."""
        raw = self._update(
            breaker_key(tenant, breaker_id),
            "SET #state = :half, #trial_token = :token, #trial_lease_until = :lease, "
            "#updated_at = :stamp",
            "(#state = :open AND #reopens_at <= :now) OR (#state = :half AND "
            "(attribute_not_exists(#trial_lease_until) OR #trial_lease_until <= :now))",
            {
                ":half": "half_open",
                ":open": "open",
                ":token": token,
                ":lease": lease_until,
                ":now": now,
                ":stamp": iso_time(now),
            },
        )
        return BreakerItem.from_item(raw) if raw is not None else None

    def close(self, tenant: str, breaker_id: str, *, token: str | None, now: float) -> bool:
        """A success: close the breaker and forget its failures, while it is closed with
        failures counted or half-open with ``token``'s trial. ``False``: nothing to do."""
        values: dict[str, Any] = {":closed": "closed", ":zero": 0, ":stamp": iso_time(now)}
        condition = "#state = :closed AND #consecutive_failures > :zero"
        if token is not None:
            condition = f"({condition}) OR (#state = :half AND #trial_token = :token)"
            values.update({":half": "half_open", ":token": token})
        raw = self._update(
            breaker_key(tenant, breaker_id),
            "SET #state = :closed, #consecutive_failures = :zero, #updated_at = :stamp "
            "REMOVE #trial_token, #trial_lease_until, #opened_at, #reopens_at",
            condition,
            values,
        )
        return raw is not None

    def release_trial(self, tenant: str, breaker_id: str, *, token: str, now: float) -> bool:
        """The trial ended without a verdict (a transient error): back to open and cooled
        down, so the next caller takes a new trial at once."""
        raw = self._update(
            breaker_key(tenant, breaker_id),
            "SET #state = :open, #reopens_at = :now, #updated_at = :stamp "
            "REMOVE #trial_token, #trial_lease_until",
            "#state = :half AND #trial_token = :token",
            {
                ":open": "open",
                ":half": "half_open",
                ":token": token,
                ":now": now,
                ":stamp": iso_time(now),
            },
        )
        return raw is not None

    def reset(self, tenant: str, breaker_id: str, *, now: float) -> BreakerItem | None:
        """Close an existing breaker whatever its state (an operator's reset); ``None`` when
        the tenant has no such breaker."""
        raw = self._update(
            breaker_key(tenant, breaker_id),
            "SET #state = :closed, #consecutive_failures = :zero, #reset_at = :now, "
            "#updated_at = :stamp "
            "REMOVE #trial_token, #trial_lease_until, #opened_at, #reopens_at",
            "attribute_exists(#pk)",
            {":closed": "closed", ":zero": 0, ":now": now, ":stamp": iso_time(now)},
        )
        return BreakerItem.from_item(raw) if raw is not None else None

    def put_skip(self, item: SkipItem) -> None:
        """Record a skipped run (a redelivery of the same key overwrites its record)."""
        with self._reached("put_item"):
            self.dal.put(item.to_item())
