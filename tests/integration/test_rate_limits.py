"""The sliding-window rate limit against DynamoDB (moto), with threads and a clock the test
moves: never more than ``limit`` admissions in any window of the configured length, however
the requests fall; no burst of twice the limit across a boundary; forged webhook deliveries
cannot lock out the real sender."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from relayflow_testing import moto_table
from serial_moto import serialise_dynamodb

from relayflow.dal.limits import SUB_WINDOWS
from relayflow.reliability.ratelimit import SlidingWindowLimiter

pytestmark = pytest.mark.integration

T0 = 1_800_000_000.0
PK = "TENANT#acme#FLOW#orders#charge#*#RATE"
TICKS, STEP, THREADS = 60, 0.45, 5


class Clock:
    """Epoch seconds, set by the test; every thread reads the same now."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def set(self, now: float) -> None:
        with self.lock:
            self.now = now


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto with the Relayflow table, each DynamoDB request atomic as on AWS (moto checks a
    condition and writes in two steps; the local runtime's compat fix does the same)."""
    serialise_dynamodb(monkeypatch)
    with moto_table(monkeypatch):
        yield


def most_in_any_window(admitted: list[float], window: float) -> int:
    """The most admissions inside any half-open window of ``window`` seconds: the densest
    window ends at some admission, so checking those windows checks them all."""
    times = sorted(admitted)
    return max((sum(1 for t in times if end - window < t <= end) for end in times), default=0)


def test_threads_never_get_more_than_the_limit_in_any_window(aws: None) -> None:
    # Given a limit of 5 per 10 s, and 5 threads hitting it together at every tick while the
    # clock moves 0.45 s a tick through 27 s (ticks that fall on either side of bucket and
    # window edges)
    limit, window = 5, 10.0
    clock = Clock(T0 - 0.2)
    limiter = SlidingWindowLimiter(clock=clock)
    admitted: list[float] = []
    refused = 0
    lock = threading.Lock()
    for tick in range(TICKS):
        now = T0 + tick * STEP
        clock.set(now)
        barrier = threading.Barrier(THREADS)

        def request(now: float = now, barrier: threading.Barrier = barrier) -> None:
            nonlocal refused
            barrier.wait(60)  # bounds only a hung test: a loaded machine starts threads late
            verdict = limiter.admit(PK, limit, window, tenant="acme")
            with lock:
                if verdict.admitted:
                    admitted.append(now)
                else:
                    refused += 1

        threads = [threading.Thread(target=request) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    # Then no window of 10 s ever held more than 5 admissions
    assert most_in_any_window(admitted, window) == limit
    # And the limit was used, not starved: 5 per window, give or take one bucket's edge
    span = TICKS * STEP
    assert len(admitted) >= limit * int(span // (window + window / SUB_WINDOWS))
    assert refused == TICKS * THREADS - len(admitted)


def test_a_burst_across_a_boundary_is_not_twice_the_limit(aws: None) -> None:
    # Given 5 admissions just before a minute boundary
    clock = Clock(T0 - 0.1)
    limiter = SlidingWindowLimiter(clock=clock)
    first = [limiter.admit(PK, 5, 60) for _ in range(6)]
    # When 5 more arrive just after it (fixed windows admitted them all)
    clock.set(T0 + 0.1)
    second = [limiter.admit(PK, 5, 60) for _ in range(5)]
    # Then none is admitted, and each is told when the earliest admission leaves the window
    assert [a.admitted for a in first] == [True] * 5 + [False]
    assert not any(a.admitted for a in second)
    assert all(0 < a.retry_after <= 60 for a in second)
    # And once it has, the limit is available again
    clock.set(T0 - 0.1 + 60 + 60 / SUB_WINDOWS)
    assert limiter.admit(PK, 5, 60).admitted


def test_refused_requests_are_not_counted(aws: None) -> None:
    # Given a limit of 2 per 10 s, used up, and 20 refused requests in the same second
    clock = Clock(T0)
    limiter = SlidingWindowLimiter(clock=clock)
    assert [limiter.admit(PK, 2, 10).admitted for _ in range(2)] == [True, True]
    assert not any(limiter.admit(PK, 2, 10).admitted for _ in range(20))
    # When the window has moved past the two admissions
    clock.set(T0 + 10 + 10 / SUB_WINDOWS)
    # Then the refusals did not eat the next window's budget
    assert [limiter.admit(PK, 2, 10).admitted for _ in range(3)] == [True, True, False]


def test_a_check_reads_without_counting(aws: None) -> None:
    clock = Clock(T0)
    limiter = SlidingWindowLimiter(clock=clock)
    assert limiter.check(PK, 1, 10).admitted
    assert limiter.check(PK, 1, 10).admitted
    assert limiter.admit(PK, 1, 10).admitted
    verdict = limiter.check(PK, 1, 10)
    assert not verdict.admitted and verdict.retry_after == 10.5
