"""Data access for sliding-window rate limits: one item per limited thing (a step's group, a
webhook endpoint, a sender's failed signatures).

The window of ``window`` milliseconds is cut into :data:`SUB_WINDOWS` buckets of
``ceil(window / SUB_WINDOWS)`` ms. The item keeps a ring of :data:`RING` slots; slot ``k``
holds the index ``i<k>`` of the bucket it counts and its count ``n<k>`` (bucket ``b`` lives
in slot ``b mod RING``, and a slot holding an older bucket is reset when a newer one needs
it). Every request is one atomic ``UpdateItem`` on the slot of its bucket that returns the
whole ring (:meth:`RateWindowDal.hit`); the caller sums the buckets still in the window
(:mod:`relayflow.reliability.ratelimit`) and takes its own hit back when that is over the
limit (:meth:`RateWindowDal.unhit`). Nothing is read and then written, so concurrent callers
never overwrite each other's counts, and each admitted request has seen every hit serialised
before its own.
"""

from __future__ import annotations

from typing import Any

from relayflow.dal import keys
from relayflow.dal.codec import deserialize, serialize
from relayflow.dal.errors import ConditionFailed
from relayflow.dal.table import TableAccess

#: Buckets per window: the window is exact to ``window / SUB_WINDOWS`` (a request may be
#: refused up to that much early, never admitted late).
SUB_WINDOWS = 20
#: Slots in the ring: every bucket a window can still count (``SUB_WINDOWS + 1``), plus one
#: so that the slot being reset for a new bucket is never one still counted.
RING = SUB_WINDOWS + 2
WINDOW_SK = "WINDOW"
#: Items are kept this long after their last hit's window ends (to inspect), then expire.
RETENTION_SECONDS = 3600
#: Tries to count a hit when concurrent callers keep resetting its slot.
MAX_SLOT_TRIES = 4


def slots(item: dict[str, Any] | None) -> dict[int, int]:
    """The ring of an item as ``{bucket index: count}`` (empty slots left out)."""
    counts: dict[int, int] = {}
    for slot in range(RING):
        index, count = (item or {}).get(f"i{slot}"), (item or {}).get(f"n{slot}")
        if index is not None and count is not None:
            counts[int(index)] = counts.get(int(index), 0) + int(count)
    return counts


class RateWindowDal(TableAccess):
    """Sliding-window counters through the table's :class:`Dal` (its client, table name and
    error translation)."""

    def hit(
        self, pk: str, bucket: int, *, expires_at: int, tenant: str | None = None
    ) -> dict[int, int] | None:
        """Count one hit in ``bucket`` of the item ``pk``; every bucket's count after it, or
        ``None`` when the bucket could not be counted: its slot holds a newer bucket (this
        caller's clock is behind) or kept changing under concurrent resets."""
        slot = bucket % RING
        for _ in range(MAX_SLOT_TRIES):
            try:
                return self._update(pk, slot, bucket, expires_at, tenant, reset=False)
            except ConditionFailed:
                pass
            try:
                return self._update(pk, slot, bucket, expires_at, tenant, reset=True)
            except ConditionFailed:
                # Another caller reset the slot for this bucket (retry the add) or for a
                # newer one (the next add fails too, and so does the reset).
                continue
        return None

    def unhit(self, pk: str, bucket: int) -> None:
        """Take back one hit of ``bucket`` (a refused request), unless its slot has moved on
        to a newer bucket since."""
        slot = bucket % RING
        dal = self.dal
        try:
            dal.call(
                "update_item",
                TableName=dal.table_name,
                Key=serialize(self.key(pk)),
                UpdateExpression="ADD #n :minus",
                ConditionExpression="#i = :bucket",
                ExpressionAttributeNames={"#n": f"n{slot}", "#i": f"i{slot}"},
                ExpressionAttributeValues=serialize({":minus": -1, ":bucket": bucket}),
            )
        except ConditionFailed:
            return

    def read(self, pk: str) -> dict[int, int]:
        """Every bucket's count of the item ``pk`` (a strongly consistent read)."""
        return slots(self.dal.get(self.key(pk)))

    @staticmethod
    def key(pk: str) -> keys.Key:
        return {"pk": pk, "sk": WINDOW_SK}

    def _update(
        self,
        pk: str,
        slot: int,
        bucket: int,
        expires_at: int,
        tenant: str | None,
        *,
        reset: bool,
    ) -> dict[int, int]:
        dal = self.dal
        names = {"#i": f"i{slot}", "#n": f"n{slot}", "#exp": "expires_at", "#type": "type"}
        values: dict[str, Any] = {
            ":bucket": bucket,
            ":one": 1,
            ":exp": expires_at,
            ":type": "rate_window",
        }
        sets = ["#exp = :exp", "#type = :type"]
        if tenant is not None:
            names["#tenant"] = "tenant"
            values[":tenant"] = tenant
            sets.append("#tenant = :tenant")
        if reset:
            update = "SET " + ", ".join(["#i = :bucket", "#n = :one", *sets])
            condition = "attribute_not_exists(#i) OR #i < :bucket"
        else:
            update = "SET " + ", ".join(sets) + " ADD #n :one"
            condition = "#i = :bucket"
        response = dal.call(
            "update_item",
            TableName=dal.table_name,
            Key=serialize(self.key(pk)),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=serialize(values),
            ReturnValues="ALL_NEW",
        )
        return slots(deserialize(response.get("Attributes", {})))
