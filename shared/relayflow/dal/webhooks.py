"""Data access for inbound webhooks: per-endpoint rate windows and delivery records.

Both live in the one Relayflow table, each in its own partition so that neither crowds the
endpoint's registration item (``HOOK#<slug>`` / ``HOOK``, written by the trigger sync):

=====================  ==========================================  ==========  =============
item                   pk                                          sk          expires
=====================  ==========================================  ==========  =============
rate window            ``HOOK#<slug>#RATE``                        ``WINDOW``  window + 1 h
failed signatures      ``HOOK#<slug>#SIGFAIL#<sha256(source)>``    ``WINDOW``  window + 1 h
delivery               ``HOOK#<slug>#DLV#<sha256(delivery id)>``   ``DLV``     7 days
=====================  ==========================================  ==========  =============

Both windows are sliding windows (:mod:`relayflow.dal.limits`): one atomic ``UpdateItem`` per
request, so the limits hold across every Lambda instance serving the endpoint. A delivery
record keeps the first answer to a delivery id; it is written with ``attribute_not_exists``
so that of two racing deliveries the first writer's answer is the one both return.
"""

from __future__ import annotations

import hashlib
from typing import ClassVar

from pydantic import Field

from relayflow.dal import keys
from relayflow.dal.errors import ConditionFailed
from relayflow.dal.items import ItemModel
from relayflow.dal.limits import RateWindowDal
from relayflow.dal.table import TableAccess

DELIVERY_SK = "DLV"
#: How long a delivery id is remembered: longer than GitHub's and Stripe's retry periods.
DELIVERY_RETENTION_SECONDS = 7 * 86_400


def rate_partition(slug: str) -> str:
    """The item of an endpoint's sliding rate window."""
    return f"HOOK#{keys.part(slug, 'slug')}#RATE"


def signature_failures_partition(slug: str, source: str) -> str:
    """The item counting one source's failed signature checks at an endpoint (the source,
    an IP address as API Gateway reports it, is kept as a hash)."""
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:32]
    return f"HOOK#{keys.part(slug, 'slug')}#SIGFAIL#{digest}"


def delivery_digest(delivery_id: str) -> str:
    """Delivery ids are the sender's text (any characters, any length): keys hold a hash."""
    return hashlib.sha256(delivery_id.encode("utf-8")).hexdigest()


def delivery_key(slug: str, delivery_id: str) -> keys.Key:
    return {
        "pk": f"HOOK#{keys.part(slug, 'slug')}#DLV#{delivery_digest(delivery_id)}",
        "sk": DELIVERY_SK,
    }


class DeliveryItem(ItemModel):
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


class WebhookDal(TableAccess):
    """Rate windows and delivery records, through the table's :class:`Dal` (its client,
    table name and error translation)."""

    @property
    def rate_windows(self) -> RateWindowDal:
        """The sliding-window counters (:mod:`relayflow.dal.limits`)."""
        return RateWindowDal(self._dal)

    def get_delivery(self, slug: str, delivery_id: str) -> DeliveryItem | None:
        raw = self.dal.get(delivery_key(slug, delivery_id))
        return DeliveryItem.from_item(raw) if raw else None

    def save_delivery(self, item: DeliveryItem) -> DeliveryItem:
        """Keep ``item`` unless the delivery id already has an answer; the answer kept."""
        try:
            self.dal.put(item.to_item(), condition="attribute_not_exists(pk)")
        except ConditionFailed:
            existing = self.get_delivery(item.slug, item.delivery_id)
            if existing is not None:
                return existing
            raise
        return item


def delivery_expiry(now: float) -> int:
    return int(now) + DELIVERY_RETENTION_SECONDS
