"""The execution log's bytes and price (``relayflow.cost.logs``), its line on each engine's
bill, and Express's floor (``relayflow.cost.bill.express_floor``)."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from relayflow.cost import prices
from relayflow.cost.bill import (
    LOGS_ITEM,
    PLATFORM,
    RunUsage,
    express_floor,
    lambda_dollars,
    price_run,
)
from relayflow.cost.logs import (
    deployed_execution_arn,
    execution_log_bytes,
    logged,
    logs_dollars,
    record_bytes,
)

ARN = "arn:aws:states:us-east-1:123456789012:express:m:r:u"
AT = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


def event(event_id: int, kind: str, **details: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "id": event_id,
        "type": kind,
        "previousEventId": event_id - 1,
        "timestamp": AT,
    }
    if details:
        found[f"{kind[0].lower()}{kind[1:]}EventDetails"] = details
    return found


#: A Task that fails once, is retried and succeeds; the execution succeeds.
RETRIED = [
    event(1, "ExecutionStarted", input="{}", roleArn="arn:aws:iam::1:role/r"),
    event(2, "TaskStateEntered", name="charge", input='{"card": "4242"}'),
    event(3, "TaskScheduled", resource="invoke", resourceType="lambda", parameters="{}"),
    event(4, "TaskFailed", resource="invoke", resourceType="lambda", error="Boom", cause="x"),
    event(5, "TaskScheduled", resource="invoke", resourceType="lambda", parameters="{}"),
    event(6, "TaskSucceeded", resource="invoke", resourceType="lambda", output='{"ok":true}'),
    event(7, "TaskStateExited", name="charge", output='{"ok":true}'),
    event(8, "ExecutionSucceeded", output='{"ok":true}'),
]


def expected_bytes(record: dict[str, Any]) -> int:
    return len(json.dumps(record, separators=(",", ":")).encode()) + 26


def test_a_record_is_its_compact_json_message_plus_26_bytes():
    record = {"id": "1", "type": "ExecutionStarted", "details": {}}
    assert record_bytes(record) == len('{"id":"1","type":"ExecutionStarted","details":{}}') + 26


def test_level_all_logs_every_event_without_execution_data():
    total = execution_log_bytes(RETRIED, ARN, "ALL")
    # Each record names the execution, the event and its logged details (no input, output,
    # parameters or cause: the machines log without execution data)
    first = {
        "id": "1",
        "type": "ExecutionStarted",
        "details": {},
        "previous_event_id": "0",
        "event_timestamp": str(int(AT.timestamp() * 1000)),
        "execution_arn": ARN,
        "redrive_count": "0",
    }
    failed = {
        **first,
        "id": "4",
        "type": "TaskFailed",
        "details": {"resource": "invoke", "resourceType": "lambda", "error": "Boom"},
        "previous_event_id": "3",
    }
    assert execution_log_bytes(RETRIED[:1], ARN, "ALL") == expected_bytes(first)
    assert execution_log_bytes([RETRIED[3]], ARN, "ALL") == expected_bytes(failed)
    assert total > 8 * len(ARN)
    # ISO timestamps (the local runtime's histories) give the same records
    as_text = [{**e, "timestamp": "2026-12-01T12:00:00.000Z"} for e in RETRIED]
    assert execution_log_bytes(as_text, ARN, "ALL") == total


def test_level_error_logs_only_failures_so_nothing_for_a_clean_success():
    clean = [e for e in RETRIED if e["id"] not in (4, 5)]
    assert execution_log_bytes(clean, ARN, "ERROR") == 0
    # The retried attempt's TaskFailed is logged, even though the run succeeded
    assert execution_log_bytes(RETRIED, ARN, "ERROR") == execution_log_bytes(
        [RETRIED[3]], ARN, "ALL"
    )
    assert logged("ExecutionFailed", "FATAL") and not logged("TaskFailed", "FATAL")
    assert logged("FailStateEntered", "ERROR") and not logged("TaskSucceeded", "ERROR")
    assert not logged("ExecutionFailed", "OFF")


def test_a_deployed_arn_names_the_machine_as_the_control_plane_does():
    express = deployed_execution_arn("support-triage", "a" * 32, express=True)
    standard = deployed_execution_arn("support-triage", "a" * 32, express=False)
    assert standard == (
        "arn:aws:states:us-east-1:123456789012:execution:"
        "relayflow-prod-t-0123456789_support-triage:" + "a" * 32
    )
    # Express ARNs hold the machine, the name and a UUID
    assert express.split(":")[5:8] == ["express", standard.split(":")[6], "a" * 32]
    assert len(express.split(":")[8]) == 36


def test_logs_are_priced_at_the_vended_rate_plus_a_month_of_storage():
    assert logs_dollars(2**30) == pytest.approx(0.50 + 0.03)
    assert logs_dollars(0) == 0


def test_the_log_line_is_on_both_bills_and_zero_for_a_standard_success():
    usage = RunUsage(
        transitions=3,
        lambda_invocations=1,
        lambda_ms=20,
        duration_ms=40,
        express_log_bytes=4000,
        standard_log_bytes=0,
    )
    standard = {line.item: line for line in price_run(usage, "standard").lines}
    express = {line.item: line for line in price_run(usage, "express").lines}
    assert standard[LOGS_ITEM].dollars == 0
    assert express[LOGS_ITEM].dollars == pytest.approx(4000 / 2**30 * 0.53)
    assert express[LOGS_ITEM].usage == "4.0 KB (ALL)"
    # A failed Standard run's error records are priced the same way
    failed = price_run(RunUsage(3, 1, 20, 40, standard_log_bytes=1000), "standard")
    assert [line.dollars for line in failed.lines if line.item == LOGS_ITEM] == [
        pytest.approx(1000 / 2**30 * 0.53)
    ]


def test_the_express_floor_is_the_request_the_own_duration_and_the_steps_work():
    usage = RunUsage(
        transitions=3,
        lambda_invocations=1,
        lambda_ms=30,
        duration_ms=150,  # billed as 200 ms
        write_units=6,
        read_units=4,
        other_dollars=0.0001,
        express_log_bytes=8000,
    )
    floor = express_floor(usage)
    assert floor.total == pytest.approx(
        prices.EXPRESS_PER_REQUEST
        + 0.2 * 64 / 1024 * prices.EXPRESS_PER_GB_SECOND
        + lambda_dollars(1, 30)
        + 6 * prices.DYNAMODB_PER_WRITE_UNIT
        + 4 * prices.DYNAMODB_PER_READ_UNIT
        + 0.0001
    )
    # No start, no recording, no log: what any start or recording adds is on top of it
    items = {line.item for line in floor.lines}
    assert LOGS_ITEM not in items and not any("start" in item for item in items)
    assert floor.total < price_run(usage, "express", PLATFORM).total
    # The best saving a 3-transition run with this step work could reach on Express
    standard = price_run(usage, "standard", PLATFORM)
    assert standard.total / floor.total < 20
