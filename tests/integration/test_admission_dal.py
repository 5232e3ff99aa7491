"""The admission gate's protocol under threads, against moto's DynamoDB with its requests
serialised (DynamoDB applies a request's condition and write atomically; moto does not):
arrivals and ends race, and still no slot is held twice and every queued run gets one."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from relayflow_testing import moto_table
from serial_moto import serialise_dynamodb

from relayflow.dal.admission import AdmissionDal

pytestmark = pytest.mark.integration
TENANT, WORKFLOW, KEY = "acme", "render", "k1"


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[AdmissionDal]:
    serialise_dynamodb(monkeypatch)
    with moto_table(monkeypatch):
        yield AdmissionDal()


def test_racing_arrivals_and_ends_hold_at_most_the_limit_and_serve_every_run(store):
    # Given a limit of 3 and 40 runs arriving from 8 threads while running ones end
    limit, arrivals = 3, [f"run-{n:02d}" for n in range(40)]
    lock = threading.Lock()
    holding: set[str] = set()
    served: list[str] = []
    peak = 0

    def hold(run_id: str) -> None:
        nonlocal peak
        with lock:
            assert run_id not in holding, f"{run_id} got a second slot"
            holding.add(run_id)
            served.append(run_id)
            peak = max(peak, len(holding))

    def end_one() -> None:
        with lock:
            if not holding:
                return
            ending = random.choice(sorted(holding))
            holding.discard(ending)
        freed, successor = store.release(TENANT, WORKFLOW, KEY, ending, now=1)
        assert freed
        if successor is not None:
            hold(successor)

    def arrive(run_id: str) -> None:
        while True:
            if store.take_slot(TENANT, WORKFLOW, KEY, run_id, limit=limit, now=1):
                hold(run_id)
                break
            if store.enqueue(TENANT, WORKFLOW, KEY, run_id, limit=limit, now_ms=1000):
                break
        end_one()

    # When they all race
    with ThreadPoolExecutor(max_workers=8) as pool:
        for future in [pool.submit(arrive, run_id) for run_id in arrivals]:
            future.result(timeout=60)
    while True:  # the remaining runs end one by one
        with lock:
            if not holding:
                break
        end_one()
    # Then never more than 3 held a slot, each run held one exactly once, nothing is left
    assert peak <= limit
    assert sorted(served) == arrivals
    gate = store.gate(TENANT, WORKFLOW, KEY)
    assert (gate["running"], gate["queued"]) == (0, 0)
    assert store.holders(TENANT, WORKFLOW, KEY) == []
    assert store.queue(TENANT, WORKFLOW, KEY) == []


def test_a_release_is_counted_once_and_a_full_buffer_refuses(store):
    assert store.take_slot(TENANT, WORKFLOW, KEY, "a", limit=1, now=1)
    assert store.enqueue(TENANT, WORKFLOW, KEY, "b", limit=1, now_ms=1, max_queued=1)
    assert not store.enqueue(TENANT, WORKFLOW, KEY, "c", limit=1, now_ms=2, max_queued=1)
    assert store.release(TENANT, WORKFLOW, KEY, "a", now=1) == (True, "b")
    assert store.release(TENANT, WORKFLOW, KEY, "a", now=1) == (False, None)
    assert store.holders(TENANT, WORKFLOW, KEY) == ["b"]
    assert store.release(TENANT, WORKFLOW, KEY, "b", now=1) == (True, None)
    assert store.gate(TENANT, WORKFLOW, KEY)["running"] == 0
