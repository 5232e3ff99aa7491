"""Flow-control logic against an in-memory table: slot choice, leases, rate windows, errors.

``MemoryFlowDal`` keeps :class:`relayflow.dal.flow.FlowDal`'s contract (a claim succeeds on an
absent or expired slot, a release only on the caller's lease id, a window counts while below
its limit) in a dict, so these tests never touch the network; ``tests/integration/
test_flow_control.py`` runs the same logic against moto's DynamoDB.
"""

from __future__ import annotations

import random
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from relayflow_testing import FixedClock, step_task

from relayflow.dal.errors import DataAccessError
from relayflow.dal.errors import Throttled as TableThrottled
from relayflow.dal.flow import FlowLeaseItem, rate_partition, slots_partition
from relayflow.dal.limits import RING
from relayflow.errors import ExpressionError, InvalidArgsError, Throttled, TransientError
from relayflow.reliability import flow
from relayflow.reliability.flow import (
    DEFAULT_LEASE_SECONDS,
    LEASE_MARGIN_SECONDS,
    WHOLE_STEP,
    FlowControl,
    FlowLimits,
    FlowScope,
    group_of,
    lease_seconds,
)
from relayflow.steps.guard import flow_controlled, is_flow_controlled

SCOPE = FlowScope("acme", "orders", "charge", "run-1")
T0 = 1_800_000_000.0  # a window boundary for 60 s windows (divisible by 60)


class MemoryRateWindows:
    """RateWindowDal's contract (relayflow.dal.limits) on the fake's ``windows``: a ring of
    ``RING`` slots per item, each holding a bucket index and its count."""

    def __init__(self, table: MemoryFlowDal) -> None:
        self.table = table

    def hit(self, pk: str, bucket: int, **kw: Any) -> dict[int, int] | None:
        self.table._call("hit_rate")
        with self.table._lock:
            ring = self.table.windows.setdefault(pk, {})
            index, count = ring.get(bucket % RING, (None, 0))
            if index is not None and index > bucket:
                return None
            ring[bucket % RING] = (bucket, count + 1 if index == bucket else 1)
            return {i: n for i, n in ring.values()}

    def unhit(self, pk: str, bucket: int) -> None:
        self.table._call("unhit_rate")
        with self.table._lock:
            ring = self.table.windows.get(pk, {})
            index, count = ring.get(bucket % RING, (None, 0))
            if index == bucket:
                ring[bucket % RING] = (index, count - 1)

    def read(self, pk: str) -> dict[int, int]:
        return {i: n for i, n in self.table.windows.get(pk, {}).values()}


class MemoryFlowDal:
    """FlowDal's contract in a dict; ``calls`` lists every table operation made."""

    def __init__(self) -> None:
        self.slots: dict[tuple[str, str], FlowLeaseItem] = {}
        self.windows: dict[str, dict[int, tuple[int, int]]] = {}
        self.calls: list[str] = []
        self.fail_with: Exception | None = None
        self._lock = threading.Lock()

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if self.fail_with is not None:
            raise self.fail_with

    def claim_slot(self, lease: FlowLeaseItem, *, now_ms: int) -> tuple[bool, Any]:
        self._call("claim_slot")
        key = (lease.key()["pk"], lease.key()["sk"])
        with self._lock:
            old = self.slots.get(key)
            if old is not None and old.lease_until > now_ms:
                return False, None
            self.slots[key] = lease
            return True, old

    def slot_leases(self, tenant: str, workflow_id: str, step_key: str, group: str) -> list:
        self._call("slot_leases")
        pk = slots_partition(tenant, workflow_id, step_key, group)
        return [lease for (p, _), lease in self.slots.items() if p == pk]

    def release_slot(self, lease: FlowLeaseItem) -> bool:
        self._call("release_slot")
        key = (lease.key()["pk"], lease.key()["sk"])
        with self._lock:
            if key in self.slots and self.slots[key].lease_id == lease.lease_id:
                del self.slots[key]
                return True
            return False

    @property
    def rate_windows(self) -> MemoryRateWindows:
        return MemoryRateWindows(self)

    def live(self, now: float) -> list[FlowLeaseItem]:
        return [s for s in self.slots.values() if s.lease_until > now * 1000]


@pytest.fixture
def table() -> MemoryFlowDal:
    return MemoryFlowDal()


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


@pytest.fixture
def control(table, clock) -> FlowControl:
    return FlowControl(table, clock=clock, rng=random.Random(7))  # type: ignore[arg-type]


def task(config: dict[str, Any], trigger: Any = None) -> dict[str, Any]:
    return step_task("charge", "transform", config, workflow_id="orders", trigger=trigger or {})


# --------------------------------------------------------------------------- groups and keys


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("cust-42", "cust-42"),
        ("a.b:c@d_e", "a.b:c@d_e"),
        (42, "42"),
        (None, "null"),
        (True, "true"),
    ],
)
def test_a_short_plain_key_is_kept_as_it_is(value, expected):
    assert group_of(value) == expected


@pytest.mark.parametrize("value", ["x" * 65, "has#hash", "has space", "", "ünïcode", {"a": 1}])
def test_any_other_key_is_hashed_into_a_form_no_plain_key_can_take(value):
    group = group_of(value)
    assert group.startswith("~") and len(group) == 41
    assert "#" not in group
    assert group == group_of(value)  # stable


def test_keys_that_differ_get_different_groups():
    assert group_of("x" * 65) != group_of("x" * 66)
    assert group_of({"a": 1, "b": 2}) == group_of({"b": 2, "a": 1})


def test_partitions_are_tenant_scoped_and_include_workflow_step_and_group():
    assert slots_partition("acme", "orders", "charge", "cust-1") == (
        "TENANT#acme#FLOW#orders#charge#cust-1#CONC"
    )
    assert rate_partition("acme", "orders", "charge", WHOLE_STEP) == (
        "TENANT#acme#FLOW#orders#charge#*#RATE"
    )
    with pytest.raises(ValueError):
        slots_partition("ac#me", "orders", "charge", "*")


# --------------------------------------------------------------------------- lease length


def test_a_lease_lasts_the_invocations_remaining_time_plus_the_margin():
    context = SimpleNamespace(get_remaining_time_in_millis=lambda: 12_500)
    assert lease_seconds(context) == 12.5 + LEASE_MARGIN_SECONDS


@pytest.mark.parametrize("context", [None, SimpleNamespace(), SimpleNamespace(get_remaining=1)])
def test_without_a_lambda_context_a_lease_lasts_lambdas_longest_timeout(context):
    assert lease_seconds(context) == DEFAULT_LEASE_SECONDS + LEASE_MARGIN_SECONDS


# --------------------------------------------------------------------------- concurrency


def test_the_uncontended_path_is_one_write(control, table, clock):
    # Given an empty group with a limit of 3
    # When a step acquires and releases a slot
    lease = control.acquire(SCOPE, WHOLE_STEP, 3, 30)
    # Then it took one put, holds a slot below the limit for 30 s, and one delete frees it
    assert table.calls == ["claim_slot"]
    assert 0 <= lease.slot < 3
    assert lease.lease_until == int(T0 * 1000) + 30_000
    assert lease.expires_at > lease.lease_until / 1000
    assert control.release(lease) is True
    assert table.calls == ["claim_slot", "release_slot"]
    assert table.slots == {}


def test_when_the_first_slot_is_taken_it_reads_the_group_and_claims_a_free_one(control, table):
    # Given a group of 3 with two slots held
    first, second = (control.acquire(SCOPE, WHOLE_STEP, 3, 30) for _ in range(2))
    table.calls.clear()
    # When a third execution acquires
    third = control.acquire(SCOPE, WHOLE_STEP, 3, 30)
    # Then it got the one free slot
    assert {first.slot, second.slot, third.slot} == {0, 1, 2}
    assert table.calls[0] == "claim_slot"
    assert len(table.calls) <= 3


def test_a_full_group_throttles_with_the_time_until_the_first_lease_runs_out(control, table, clock):
    # Given a limit of 2 held by leases running out in 30 s and 50 s
    control.acquire(SCOPE, WHOLE_STEP, 2, 30)
    clock.now += 20
    control.acquire(SCOPE, WHOLE_STEP, 2, 30)
    clock.now += 5
    # When a third execution tries
    with pytest.raises(Throttled) as info:
        control.acquire(SCOPE, WHOLE_STEP, 2, 30)
    # Then it is throttled, told the limit and that a slot frees in 5 s, and wrote nothing
    assert type(info.value).__name__ == "Relayflow.Throttled"
    assert info.value.details == {
        "kind": "concurrency",
        "limit": 2,
        "key": None,
        "retry_after": 5.0,
    }
    assert len(table.slots) == 2


def test_an_expired_lease_is_taken_over_and_its_late_release_leaves_the_new_one(
    control, table, clock
):
    # Given a holder that died with its slot of a limit of 1
    dead = control.acquire(SCOPE, WHOLE_STEP, 1, 30)
    # When its lease has run out and another execution acquires
    clock.now += 30
    fresh = control.acquire(SCOPE, WHOLE_STEP, 1, 30)
    # Then the slot is reused, and the dead holder's release cannot free it
    assert fresh.slot == dead.slot == 0
    assert control.release(dead) is False
    assert [s.lease_id for s in table.live(clock.now)] == [fresh.lease_id]


def test_a_failed_release_is_swallowed_because_the_lease_frees_itself(control, table):
    lease = control.acquire(SCOPE, WHOLE_STEP, 1, 30)
    table.fail_with = DataAccessError("connection reset")
    assert control.release(lease) is False


@pytest.mark.parametrize(
    ("error", "named"),
    [(TableThrottled("slow down"), Throttled), (DataAccessError("AccessDenied"), TransientError)],
)
def test_table_failures_become_step_errors(control, table, error, named):
    table.fail_with = error
    with pytest.raises(named):
        control.acquire(SCOPE, WHOLE_STEP, 1, 30)


# --------------------------------------------------------------------------- rate


def test_a_rate_limit_admits_its_limit_in_any_window_not_per_fixed_window(control, clock):
    # Given a rate of 3 per 60 s, used up 10 s after a minute boundary
    clock.now = T0 + 10
    admitted = [control.count_start(SCOPE, WHOLE_STEP, 3, 60) for _ in range(3)]
    # When a fourth start comes, and again just after the next minute boundary
    with pytest.raises(Throttled) as info:
        control.count_start(SCOPE, WHOLE_STEP, 3, 60)
    clock.now = T0 + 61
    with pytest.raises(Throttled):
        control.count_start(SCOPE, WHOLE_STEP, 3, 60)
    # Then both wait until the three starts have left the last 60 s (their 3 s bucket ends
    # at T0 + 12, so at T0 + 72), and a start is admitted from then on
    assert admitted == [1, 2, 3]
    assert info.value.details["retry_after"] == 62.0
    assert info.value.details["kind"] == "rate_limit"
    clock.now = T0 + 72
    assert control.count_start(SCOPE, WHOLE_STEP, 3, 60) == 1


# --------------------------------------------------------------------------- admission


def test_admission_holds_a_slot_for_the_body_and_releases_it_when_the_body_raises(
    control, table, clock
):
    limits = FlowLimits.from_config({"concurrency": {"limit": 1}})
    with pytest.raises(RuntimeError), control.admitted(SCOPE, limits, {}, 30) as lease:
        assert lease is not None and table.live(clock.now)
        raise RuntimeError("step logic failed")
    assert table.slots == {}


def test_a_start_refused_by_the_rate_gives_its_slot_back(control, table, clock):
    limits = FlowLimits.from_config(
        {"concurrency": {"limit": 5}, "rate_limit": {"limit": 1, "window_seconds": 60}}
    )
    with control.admitted(SCOPE, limits, {}, 30):
        pass
    with pytest.raises(Throttled), control.admitted(SCOPE, limits, {}, 30):
        pytest.fail("the body must not run")
    assert table.slots == {}


def test_a_start_refused_a_slot_uses_none_of_the_rate_window(control, table):
    limits = FlowLimits.from_config(
        {"concurrency": {"limit": 1}, "rate_limit": {"limit": 10, "window_seconds": 60}}
    )
    # Given another execution holding the only slot
    control.acquire(SCOPE, WHOLE_STEP, 1, 30)
    # When a start is refused the slot
    with pytest.raises(Throttled), control.admitted(SCOPE, limits, {}, 30):
        pytest.fail("the body must not run")
    # Then it counted nothing in the rate window
    assert table.windows == {}
    assert "hit_rate" not in table.calls


def test_keys_are_rendered_per_group_and_a_bad_key_costs_no_table_call(control, table):
    limits = FlowLimits.from_config({"concurrency": {"limit": 1, "key": "{{ trigger.customer }}"}})
    one_doc, two_doc = {"trigger": {"customer": "c-1"}}, {"trigger": {"customer": "c-2"}}
    with (
        control.admitted(SCOPE, limits, one_doc, 30) as one,
        control.admitted(SCOPE, limits, two_doc, 30) as two,
    ):
        assert (one.group, two.group) == ("c-1", "c-2")
    table.calls.clear()
    with pytest.raises(ExpressionError), control.admitted(SCOPE, limits, {"trigger": {}}, 30):
        pass
    assert table.calls == []


def test_malformed_limits_are_invalid_args():
    with pytest.raises(InvalidArgsError):
        FlowLimits.from_config({"concurrency": {"limit": 0}})


# --------------------------------------------------------------------------- the guard


def test_a_step_without_flow_control_makes_no_table_call(monkeypatch):
    # Given any attempt to reach AWS fails the test
    def no_aws(service: str) -> Any:
        raise AssertionError(f"a step without flow control called {service}")

    monkeypatch.setattr("relayflow.adapters.aws.client", no_aws)
    ran = []

    @flow_controlled
    def handler(event, context):
        ran.append(event)
        return {"output": 1}

    # When steps without (or with empty) flow-control config run
    for config in ({}, {"mapping": {}}, {"concurrency": None, "rate_limit": None}):
        assert handler(task(config), None) == {"output": 1}
    # And a malformed payload goes untouched to the step's own parsing
    assert handler({"step": "nonsense"}, None) == {"output": 1}
    # Then every one ran, and none reached for AWS
    assert len(ran) == 4
    assert not is_flow_controlled(None)


def test_the_guard_admits_a_flow_controlled_step_and_refuses_a_throttled_one(
    monkeypatch, control, table
):
    monkeypatch.setattr(flow, "get_flow_control", lambda: control)
    inside: list[int] = []

    @flow_controlled
    def handler(event, context):
        inside.append(len(table.slots))
        return {"output": "ran"}

    event = task({"concurrency": {"limit": 1}})
    assert handler(event, SimpleNamespace(get_remaining_time_in_millis=lambda: 1000)) == {
        "output": "ran"
    }
    assert inside == [1] and table.slots == {}
    # a slot held elsewhere: the logic does not run
    control.acquire(SCOPE, WHOLE_STEP, 1, 30)
    with pytest.raises(Throttled):
        handler(event, None)
    assert inside == [1]


def test_a_flow_controlled_payload_without_its_run_is_invalid(monkeypatch, control):
    monkeypatch.setattr(flow, "get_flow_control", lambda: control)
    handler = flow_controlled(lambda event, context: {"output": None})
    event = task({"rate_limit": {"limit": 1}})
    del event["doc"]["run"]["tenant"]
    with pytest.raises(InvalidArgsError):
        handler(event, None)
