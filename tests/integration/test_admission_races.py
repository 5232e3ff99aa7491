"""Duplicate starts racing through run admission (issue 27, item 1).

Requests that repeat one ``Idempotency-Key`` (or one event id) at the same moment are one
request: whatever the admission rule, exactly one run comes of them, it reaches a terminal
state, and the gate or batch it passed holds nothing afterwards. Before the fix, a request
that took a concurrency slot and then lost the create race to a repeat that had queued the run
returned that queued run without starting it or freeing the slot: the run stayed ``queued``
forever and every later start of the key queued behind it.

Each round starts 3 to 8 threads on a barrier with the same key; every round has a rule key
of its own (one more test queues all rounds behind one key). Then every run must reach a
terminal state (waited for by state, never by time) and the gates must be empty: a run left
without a slot owner never ends.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from http_api import admission_clock, order_event_delivery
from relayflow_testing import FixedClock, eventually

from relayflow.control.admission import key_id
from relayflow.control.dispatch import handle_trigger
from relayflow.control.models import StartRunResult
from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration
TENANT = "local"
ROUNDS = 50
#: The single-key backlog runs its runs one after another: fewer rounds keep it short.
BACKLOG_ROUNDS = 20
T0 = 1_900_000_000.0
TERMINAL = ("succeeded", "failed", "timed_out", "aborted")


@pytest.fixture
def clock(server: LocalServer) -> Iterator[FixedClock]:
    with admission_clock(server, T0) as clock:
        yield clock


def noop_workflow(workflow_id: str, **rules: Any) -> dict[str, Any]:
    return {
        "id": workflow_id,
        "start": "echo",
        "steps": {"echo": {"type": "transform", "mapping": {"trigger": "{{ trigger }}"}}},
        **rules,
    }


def at_once(count: int, call: Callable[[], Any]) -> list[Any]:
    """``call`` from ``count`` threads released together by a barrier."""
    barrier = threading.Barrier(count)

    def racer() -> Any:
        barrier.wait(timeout=30)
        return call()

    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(racer) for _ in range(count)]
        return [f.result(timeout=60) for f in futures]


def racers(round_no: int) -> int:
    return 3 + round_no % 6  # 3 to 8


def run_status(server: LocalServer, run_id: str) -> str | None:
    run = server.control().dal.get_run(TENANT, run_id)
    return None if run is None else run.status


def all_runs(server: LocalServer, workflow_id: str) -> list[Any]:
    items, _ = server.control().dal.list_runs(
        TENANT, workflow_id, status=None, limit=100, next_token=None
    )
    return items


def racing_starts(control: Any, wf: str, round_no: int) -> list[StartRunResult]:
    """What 3 to 8 starts of ``wf`` with one Idempotency-Key at the same moment answered."""
    key = f"{wf}-{round_no}"
    return at_once(
        racers(round_no),
        lambda: control.start_run(TENANT, wf, {"r": key}, idempotency_key=key),
    )


def assert_all_succeed(server: LocalServer, run_ids: list[str]) -> None:
    eventually(lambda: all(run_status(server, r) in TERMINAL for r in run_ids), timeout=120)
    assert {run_status(server, r) for r in run_ids} == {"succeeded"}


def assert_one_run(answers: list[StartRunResult]) -> str:
    """The duplicates' answers name one run, created by exactly one of them, never
    skipped or queued behind itself."""
    assert len({a.run_id for a in answers}) == 1, answers
    assert sum(a.created for a in answers) == 1, answers
    assert {a.admission for a in answers} <= {None, "queued"}, answers
    return answers[0].run_id


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("concurrency", {"concurrency": {"limit": 1, "key": "{{ trigger.r }}"}}),
        ("singleton-skip", {"singleton": {"mode": "skip", "key": "{{ trigger.r }}"}}),
        ("singleton-cancel", {"singleton": {"mode": "cancel_running", "key": "{{ trigger.r }}"}}),
    ],
)
def test_duplicate_starts_through_a_gate_make_one_run_that_ends(server, name, rule):
    # Given a gated workflow (one slot per key; each round has a key of its own, so rounds
    # need not wait for each other)
    control = server.control()
    wf = f"race-{name}-{uuid.uuid4().hex[:6]}"
    control.put_workflow(TENANT, wf, noop_workflow(wf, **rule))
    run_ids = []
    for round_no in range(ROUNDS):
        # When 3 to 8 requests with one Idempotency-Key start at the same moment
        answers = racing_starts(control, wf, round_no)
        # Then they name one run, created once, never skipped or cancelled by its repeats
        run_ids.append(assert_one_run(answers))
    # And every run ends as it should (a run left queued with no slot owner never ends)
    assert_all_succeed(server, run_ids)
    assert len(all_runs(server, wf)) == ROUNDS
    # And no gate holds or queues anything
    store = control.admission.store

    def gates_empty() -> bool:
        gates = [store.gate(TENANT, wf, key_id(f"{wf}-{n}")) for n in range(ROUNDS)]
        return all((g["running"], g["queued"]) == (0, 0) for g in gates)

    assert eventually(gates_empty)


def test_duplicate_starts_behind_a_running_run_queue_once_and_all_end(server):
    # Given a limit of 1 on one key, and rounds that do not wait for each other, so
    # duplicates race both for a free slot and into a queue behind earlier rounds' runs
    control = server.control()
    wf = f"race-backlog-{uuid.uuid4().hex[:6]}"
    control.put_workflow(TENANT, wf, noop_workflow(wf, concurrency={"limit": 1}))
    run_ids = []
    for round_no in range(BACKLOG_ROUNDS):
        run_ids.append(assert_one_run(racing_starts(control, wf, round_no)))
    # Then every run ends, in turn, and the queue is empty
    assert_all_succeed(server, run_ids)
    store = control.admission.store
    eventually(lambda: store.gate(TENANT, wf, key_id("default"))["running"] == 0)
    gate = store.gate(TENANT, wf, key_id("default"))
    assert (gate["running"], gate["queued"]) == (0, 0)


def test_duplicate_starts_into_a_debounce_fold_into_one_run(server, clock):
    # Given a debounced workflow (a key per round)
    control = server.control()
    wf = f"race-debounce-{uuid.uuid4().hex[:6]}"
    control.put_workflow(
        TENANT, wf, noop_workflow(wf, debounce={"period": 10, "key": "{{ trigger.r }}"})
    )
    run_ids = []
    for round_no in range(ROUNDS):
        answers = racing_starts(control, wf, round_no)
        # Then the duplicates name one pending run, opened by one of them
        assert len({a.run_id for a in answers}) == 1 and sum(a.created for a in answers) == 1
        assert {a.admission for a in answers} == {"debounced"}
        run_ids.append(answers[0].run_id)
    # And once the period passed each starts and ends
    clock.now += 10
    server.fire_due_deadlines(clock.now)
    assert_all_succeed(server, run_ids)
    assert len(all_runs(server, wf)) == ROUNDS
    for n in range(ROUNDS):
        assert control.admission.store.pending(TENANT, wf, key_id(f"{wf}-{n}")) is None


def event_delivery(workflow_id: str, event_id: str) -> dict[str, Any]:
    return order_event_delivery(TENANT, workflow_id, event_id, {"event": event_id})


def test_duplicate_deliveries_into_a_batch_join_it_once(server, clock):
    # Given a batched event workflow
    control = server.control()
    wf = f"race-batch-{uuid.uuid4().hex[:6]}"
    definition = noop_workflow(wf, batch={"max_size": 100, "timeout": "60s"})
    definition["triggers"] = [{"type": "event", "source": "shop", "detail_type": "order.created"}]
    control.put_workflow(TENANT, wf, definition)
    event_ids = []
    for round_no in range(ROUNDS):
        # When one event is delivered 3 to 8 times at once (EventBridge delivers at least once)
        delivery = event_delivery(wf, f"evt-{wf}-{round_no}")
        event_ids.append(delivery["event"]["id"])
        results = at_once(racers(round_no), lambda d=delivery: handle_trigger(d, control=control))
        assert {r["status"] for r in results} == {"batched"}, results
        assert len({r["run_id"] for r in results}) == 1
    # Then the batch holds each event once: its run receives each of the 50 events once (the
    # test's fixed clock gives them one arrival millisecond, so their order is not asserted)
    clock.now += 60
    server.fire_due_deadlines(clock.now)
    (run,) = eventually(lambda: all_runs(server, wf))
    assert eventually(lambda: run_status(server, run.run_id) in TERMINAL)
    run = control.dal.get_run(TENANT, run.run_id)
    assert run.status == "succeeded"
    record = server.runtime.wait(run.execution_arn, timeout=30)
    triggers = record.output["steps"]["echo"]["output"]["trigger"]
    assert sorted(t["id"] for t in triggers) == sorted(event_ids)
    assert control.admission.store.open_batch(TENANT, wf, key_id("default")) is None


def test_concurrent_starts_through_a_cancel_running_singleton_each_start_a_run(server):
    # Given a singleton that cancels the running run for a newer one, whose runs wait
    # (so each start finds the previous run still holding the slot)
    control = server.control()
    wf = f"race-takeover-{uuid.uuid4().hex[:6]}"
    definition = {
        "id": wf,
        "start": "hold",
        "steps": {"hold": {"type": "waitpoint", "label": "hold"}},  # no timeout: it holds
        "singleton": {"mode": "cancel_running", "key": "one"},
    }
    control.put_workflow(TENANT, wf, definition)
    for _ in range(5):
        # When ten starts arrive at the same moment
        answers = at_once(10, lambda: control.start_run(TENANT, wf, {}))
        # Then every one started a run of its own (none is refused with "not found": the
        # slot's holder had taken it but not yet recorded its run)
        assert len({a.run_id for a in answers}) == 10
        assert all(a.created for a in answers)
    # And at the end one run holds the slot and every other was cancelled
    eventually(
        lambda: sum(run_status(server, r.run_id) == "running" for r in all_runs(server, wf)) == 1,
        timeout=120,
    )
    statuses = [run_status(server, r.run_id) for r in all_runs(server, wf)]
    assert sorted(set(statuses)) == ["aborted", "running"]
