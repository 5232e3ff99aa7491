"""Scaled time: Wait and Retry sleeps run at ``time_scale``; stopping interrupts them."""

from __future__ import annotations

import time

import pytest
from local_asl import machine, pass_state, task, wait_for
from relayflow_testing import record_scaled_sleeps

from relayflow.local.history import parse_time

pytestmark = pytest.mark.integration


def _event_times(record, event_type):
    return [parse_time(e["timestamp"]) for e in record.events if e["type"] == event_type]


def test_a_300_second_wait_takes_3_seconds(rt, monkeypatch):
    # Given a Wait of 300 s at the default time scale 0.01
    asl = machine({"W": {"Type": "Wait", "Seconds": 300, "Next": "Done"}, "Done": pass_state()})
    sleeps = record_scaled_sleeps(monkeypatch)

    # When it runs
    started = time.monotonic()
    record = rt.run("wait-300", asl, {})
    elapsed = time.monotonic() - started

    # Then the runtime slept 3 s for it, and the run and the Wait state took at least that
    assert record.status == "SUCCEEDED"
    assert sleeps == [(300, pytest.approx(3.0))]
    assert elapsed >= 2.9
    assert record.state("W").duration_ms >= 2900


def test_seconds_path_wait_is_scaled(rt, monkeypatch):
    # Given a SecondsPath Wait of 50 s at scale 0.01
    asl = machine({"W": {"Type": "Wait", "SecondsPath": "$.delay", "End": True}})
    sleeps = record_scaled_sleeps(monkeypatch)

    # When it runs
    record = rt.run("wait-path", asl, {"delay": 50})

    # Then the runtime slept half a second for it, and the Wait state took at least that
    assert sleeps == [(50, pytest.approx(0.5))]
    assert record.state("W").duration_ms >= 450


def test_retry_backoff_sleeps_are_scaled(rt, monkeypatch):
    # Given a Task failing every time, retried 3 times from 2 s with BackoffRate 2
    asl = machine(
        {
            "Call": task(
                "fail-transient",
                payload={"key": "backoff"},
                Retry=[
                    {
                        "ErrorEquals": ["Relayflow.Transient"],
                        "IntervalSeconds": 2,
                        "BackoffRate": 2,
                        "MaxAttempts": 3,
                    }
                ],
            )
        }
    )

    # When it runs
    sleeps = record_scaled_sleeps(monkeypatch)
    record = rt.run("backoff", asl, {})

    # Then the runtime slept 20, 40 and 80 ms between attempts rather than 2, 4 and 8 s, and
    # the history's gaps are at least those
    assert record.status == "FAILED"
    assert record.state("Call").attempts == 4
    failed = _event_times(record, "TaskFailed")
    scheduled = _event_times(record, "TaskScheduled")
    gaps = [(s - f).total_seconds() for f, s in zip(failed, scheduled[1:], strict=False)]
    assert sleeps == [(2, pytest.approx(0.02)), (4, pytest.approx(0.04)), (8, pytest.approx(0.08))]
    assert len(gaps) == 3
    for gap, expected in zip(gaps, (0.02, 0.04, 0.08), strict=True):
        assert gap >= expected - 0.005


def test_stop_interrupts_a_scaled_wait(rt):
    # Given an execution in a Wait of 10000 s (100 s scaled)
    arn = rt.start_execution(
        rt.create_state_machine(
            "stop-wait", machine({"W": {"Type": "Wait", "Seconds": 10000, "End": True}})
        ),
        {},
    )
    wait_for(lambda: rt.describe(arn).states)

    # When it is stopped
    rt.stop_execution(arn)

    # Then it is ABORTED without waiting out the Wait (100 s, longer than this wait)
    record = rt.wait(arn, timeout=30)
    assert record.status == "ABORTED"
    assert record.event_types()[-1] == "ExecutionAborted"


def test_time_scale_one_is_real_time(rt, monkeypatch):
    # Given time scale 1.0
    rt.time_scale = 1.0
    asl = machine({"W": {"Type": "Wait", "Seconds": 1, "End": True}})
    sleeps = record_scaled_sleeps(monkeypatch)

    # When a Wait of 1 s runs
    record = rt.run("real-time", asl, {})

    # Then the runtime slept a real second for it, and the Wait state took at least that
    assert sleeps == [(1, pytest.approx(1.0))]
    assert record.state("W").duration_ms >= 990
