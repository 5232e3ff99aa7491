"""Data access for inbound webhooks: per-endpoint rate windows and delivery records.

Both live in the one Relayflow table, each in its own partition so that neither crowds the
endpoint's registration item (``HOOK#<slug>`` / ``HOOK``, written by the trigger sync):

====================  =========================================  ==========  ==============
item                  pk                                         sk          expires
====================  =========================================  ==========  ==============
rate window           ``HOOK#<slug>#RATE#<window start, unix>``  ``RATE``    window end + 1 h
delivery              ``HOOK#<slug>#DLV#<sha256(delivery id)>``  ``DLV``     7 days
====================  =========================================  ==========  ==============

The window counter is one conditional ``UpdateItem`` (``ADD hits`` while ``hits < limit``), so
the limit holds across every Lambda instance serving the endpoint. A delivery record keeps
the first answer to a delivery id; it is written with ``attribute_not_exists`` so that of two
racing deliveries the first writer's answer is the one both return.
"""

from __future__ import annotations

import hashlib
from typing import ClassVar

from pydantic import Field

from relayflow.dal import keys
from relayflow.dal.errors import ConditionFailed
from relayflow.dal.items import _Item
from relayflow.dal.table import Dal, deserialize, get_dal, serialize

RATE_SK = "RATE"
DELIVERY_SK = "DLV"
#: Rate windows are kept a while after they close (for inspection), then expire.
RATE_WINDOW_RETENTION_SECONDS = 3600
#: How long a delivery id is remembered: longer than GitHub's and Stripe's retry periods.
DELIVERY_RETENTION_SECONDS = 7 * 86_400


def rate_window_key(slug: str, window_start: int) -> keys.Key:
    return {
        "pk": f"HOOK#{keys._part(slug, 'slug')}#RATE#{int(window_start)}",
        "sk": RATE_SK,
    }


def delivery_digest(delivery_id: str) -> str:
    """Delivery ids are the sender's text (any characters, any length): keys hold a hash."""
    return hashlib.sha256(delivery_id.encode("utf-8")).hexdigest()


def delivery_key(slug: str, delivery_id: str) -> keys.Key:
    return {
        "pk": f"HOOK#{keys._part(slug, 'slug')}#DLV#{delivery_digest(delivery_id)}",
        "sk": DELIVERY_SK,
    }


class DeliveryItem(_Item):
    """The first answer given to one delivery id of one webhook endpoint."""

    kind: ClassVar[str] = "hook_delivery"

    slug: str
    delivery_id: str = Field(max_length=1024)
    tenant: str
    workflow_id: str
    run_id: str
    status_code: int = Field(description="The HTTP status of the first answer.")
    body: str = Field(description="The first answer's JSON body.")
    created_at: str
    expires_at: int = Field(description="TTL: epoch seconds.")

    def key(self) -> keys.Key:
        return delivery_key(self.slug, self.delivery_id)


class WebhookDal:
    """Rate windows and delivery records, through the table's :class:`Dal` (its client,
    table name and error translation)."""

    def __init__(self, dal: Dal | None = None) -> None:
        self._dal = dal

    @property
    def dal(self) -> Dal:
        return self._dal or get_dal()

    def hit_rate_window(
        self, slug: str, tenant: str, *, window_start: int, window_seconds: int, limit: int
    ) -> int | None:
        """Count one request in the endpoint's window; the count so far, or ``None`` when the
        window already holds ``limit`` requests (nothing is counted then)."""
        dal = self.dal
        try:
            response = dal._call(
                "update_item",
                TableName=dal.table_name,
                Key=serialize(rate_window_key(slug, window_start)),
                UpdateExpression="SET #tenant = :tenant, #exp = :exp ADD #hits :one",
                ConditionExpression="attribute_not_exists(#hits) OR #hits < :limit",
                ExpressionAttributeNames={
                    "#tenant": "tenant",
                    "#exp": "expires_at",
                    "#hits": "hits",
                },
                ExpressionAttributeValues=serialize(
                    {
                        ":tenant": tenant,
                        ":exp": window_start + window_seconds + RATE_WINDOW_RETENTION_SECONDS,
                        ":one": 1,
                        ":limit": limit,
                    }
                ),
                ReturnValues="UPDATED_NEW",
            )
        except ConditionFailed:
            return None
        return int(deserialize(response.get("Attributes", {})).get("hits", 0))

    def get_delivery(self, slug: str, delivery_id: str) -> DeliveryItem | None:
        raw = self.dal._get(delivery_key(slug, delivery_id))
        return DeliveryItem.from_item(raw) if raw else None

    def save_delivery(self, item: DeliveryItem) -> DeliveryItem:
        """Keep ``item`` unless the delivery id already has an answer; the answer kept."""
        try:
            self.dal._put(item.to_item(), condition="attribute_not_exists(pk)")
        except ConditionFailed:
            existing = self.get_delivery(item.slug, item.delivery_id)
            if existing is not None:
                return existing
            raise
        return item


def delivery_expiry(now: float) -> int:
    return int(now) + DELIVERY_RETENTION_SECONDS
