"""A history event's time becomes the log record's epoch milliseconds whatever form the local
runtime gives it: a datetime (moto), the ISO text some compat fixes write, or milliseconds."""

from __future__ import annotations

import datetime

import pytest

from relayflow.local.step_logs import epoch_millis, log_record

MOMENT = datetime.datetime(2026, 12, 1, 21, 0, 0, 123000, tzinfo=datetime.UTC)
MILLIS = 1_796_158_800_123


@pytest.mark.parametrize(
    "value",
    [
        MOMENT,
        MOMENT.replace(tzinfo=None),
        "2026-12-01T21:00:00.123Z",
        "2026-12-01T22:00:00.123+01:00",
        "2026-12-01T21:00:00.123",
        MILLIS,
    ],
    ids=["aware", "naive", "iso-z", "iso-offset", "iso-naive", "millis"],
)
def test_every_form_of_an_event_time_gives_the_same_millis(value):
    assert epoch_millis(value) == MILLIS


def test_a_record_of_an_event_with_an_iso_time_holds_millis():
    event = {
        "id": 3,
        "type": "PassStateEntered",
        "previousEventId": 2,
        "timestamp": "2026-12-01T21:00:00.123Z",
    }
    record = log_record(event, "arn:aws:states:us-east-1:123456789012:execution:m:e")
    assert record["event_timestamp"] == str(MILLIS)
