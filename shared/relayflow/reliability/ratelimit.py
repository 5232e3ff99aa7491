"""A sliding-window rate limit kept in DynamoDB: never more than ``limit`` admissions in any
window of ``window_seconds``, across every Lambda instance.

Each request counts itself first (:meth:`RateWindowDal.hit`, one atomic update that returns
the counts of every bucket), then sums the buckets that overlap the last ``window_seconds``
up to now, the bucket that holds ``now - window`` included in full. Over ``limit``: the hit
is taken back and the request refused, with the seconds until the oldest counted bucket
leaves the window. Why this never admits too many: an admitted request's sum covers every
hit counted before its own in the window that ends at it, refused ones included (they are
taken back only afterwards), so for any window the last request admitted in it saw all the
others that were, and it would have been refused had they been ``limit`` or more. Counting
the oldest bucket in full refuses at most ``window / SUB_WINDOWS`` early.

Fixed windows (the counter reset on epoch-aligned boundaries this replaces) let a burst at
the end of one window and another at the start of the next through: twice the limit within
a few seconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from relayflow.dal.limits import RETENTION_SECONDS, SUB_WINDOWS, RateWindowDal

#: Seconds a request refused because its clock lagged behind the others' is told to wait.
STALE_CLOCK_RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class Admission:
    """Whether a request was admitted, the hits in its window (its own included when
    admitted) and, when refused, the seconds until one may be."""

    admitted: bool
    count: int
    retry_after: float = 0.0


def _window(now: float, window_seconds: float) -> tuple[int, int, int]:
    """``(now in ms, bucket length in ms, the oldest bucket still counted)``."""
    now_ms = int(now * 1000)
    window_ms = int(window_seconds * 1000)
    bucket_ms = max(1, math.ceil(window_ms / SUB_WINDOWS))
    return now_ms, bucket_ms, (now_ms - window_ms) // bucket_ms


class SlidingWindowLimiter:
    """Admits requests against sliding-window limits stored in the table. ``clock`` (epoch
    seconds) is injectable so that tests can move time."""

    def __init__(
        self, dal: RateWindowDal | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.dal = dal or RateWindowDal()
        self.clock = clock

    def admit(
        self, pk: str, limit: int, window_seconds: float, *, tenant: str | None = None
    ) -> Admission:
        """Count one request against ``limit`` per ``window_seconds`` on the item ``pk``;
        refused requests are not counted."""
        now = self.clock()
        now_ms, bucket_ms, oldest = _window(now, window_seconds)
        bucket = now_ms // bucket_ms
        expires_at = math.ceil(now + window_seconds) + RETENTION_SECONDS
        counts = self.dal.hit(pk, bucket, expires_at=expires_at, tenant=tenant)
        if counts is None:
            return Admission(False, limit, STALE_CLOCK_RETRY_SECONDS)
        live = {index: n for index, n in counts.items() if index >= oldest and n > 0}
        total = sum(live.values())
        if total <= limit:
            return Admission(True, total)
        self.dal.unhit(pk, bucket)
        return Admission(False, total - 1, _retry_after(live, now_ms, bucket_ms, window_seconds))

    def check(self, pk: str, limit: int, window_seconds: float) -> Admission:
        """Whether a request would be admitted now, without counting it (one read)."""
        now = self.clock()
        now_ms, bucket_ms, oldest = _window(now, window_seconds)
        live = {i: n for i, n in self.dal.read(pk).items() if i >= oldest and n > 0}
        total = sum(live.values())
        if total < limit:
            return Admission(True, total)
        return Admission(False, total, _retry_after(live, now_ms, bucket_ms, window_seconds))


def _retry_after(live: dict[int, int], now_ms: int, bucket_ms: int, window_seconds: float) -> float:
    """Seconds until the oldest counted bucket has left the window."""
    if not live:
        return 0.0
    leaves_ms = (min(live) + 1) * bucket_ms + int(window_seconds * 1000)
    return round(max(0.0, (leaves_ms - now_ms) / 1000.0), 3)
