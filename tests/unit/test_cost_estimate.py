"""The static cost estimate (``relayflow compile --cost``) against hand-counted machines, and
the pricing of a run on each engine."""

from __future__ import annotations

from typing import Any

import pytest

from relayflow.cost import prices
from relayflow.cost.bill import (
    LOGS_ITEM,
    Platform,
    RunUsage,
    express_billed_ms,
    express_memory_mb,
    platform_lines,
    price_run,
)
from relayflow.cost.estimate import DEFAULT_LOG_EVENT_BYTES, PathCost, estimate, machine_paths

LAMBDA = "arn:aws:states:::lambda:invoke"
#: No start and no recording: only the state machine and the step Lambdas are priced.
BARE = Platform(
    api_requests=0,
    authorizer_ms=0,
    api_ms=0,
    start_write_units=0,
    start_read_units=0,
    recorder_invocations=0,
    recorder_ms=0,
    recorder_write_units=0,
    recorder_read_units=0,
    recorder_events=0,
    native_record_write_units=0,
    express_marker_write_units=0,
    sweep_write_units=0,
    sweep_read_units=0,
    sweep_events=0,
    sweep_ms=0,
)


def task(next_state: str | None = None, **extra: Any) -> dict[str, Any]:
    state: dict[str, Any] = {"Type": "Task", "Resource": LAMBDA, **extra}
    return {**state, "Next": next_state} if next_state else {**state, "End": True}


def passing(next_state: str | None = None) -> dict[str, Any]:
    return {"Type": "Pass", "Next": next_state} if next_state else {"Type": "Pass", "End": True}


def test_a_linear_machine_counts_every_state_and_each_lambda_task():
    # Given Pass → Lambda Task → DynamoDB Task → Succeed (4 states, 1 Lambda)
    asl = {
        "StartAt": "a",
        "States": {
            "a": passing("b"),
            "b": task("c"),
            "c": {
                "Type": "Task",
                "Resource": "arn:aws:states:::dynamodb:updateItem",
                "Next": "d",
            },
            "d": {"Type": "Succeed"},
        },
    }
    # Then both paths are 4 transitions and 1 invocation, and 14 history events: 2 per Pass
    # and Succeed, 5 per Task (entered, scheduled, started, succeeded, exited)
    cheapest, dearest = machine_paths(asl)
    assert cheapest == dearest == PathCost(4, 1, events=14)


def test_a_choice_gives_a_cheapest_and_a_dearest_path():
    asl = {
        "StartAt": "pick",
        "States": {
            "pick": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.x", "BooleanEquals": True, "Next": "slow"}],
                "Default": "fast",
            },
            "fast": passing(),
            "slow": task("nap"),
            "nap": {"Type": "Wait", "Seconds": 5, "End": True},
        },
    }
    cheapest, dearest = machine_paths(asl)
    assert cheapest == PathCost(2, 0, events=4)  # pick, fast
    assert dearest == PathCost(3, 1, 5.0, events=9)  # pick, slow, nap


def test_paths_into_a_fail_state_are_left_out_while_one_succeeds():
    asl = {
        "StartAt": "check",
        "States": {
            "check": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.n", "NumericGreaterThan": 5, "Next": "too_many"}],
                "Default": "work",
            },
            "too_many": {"Type": "Fail", "Error": "TooMany"},
            "work": task("a"),
            "a": passing("b"),
            "b": passing(),
        },
    }
    cheapest, dearest = machine_paths(asl)
    assert cheapest == dearest == PathCost(4, 1, events=11)


def test_a_loop_is_taken_once_and_catch_routes_and_retries_are_not_followed():
    # Given poll → settled? → (no) wait → poll; (yes) done; poll has a Retry and a Catch
    asl = {
        "StartAt": "poll",
        "States": {
            "poll": task(
                "settled",
                Retry=[{"ErrorEquals": ["States.ALL"], "MaxAttempts": 5}],
                Catch=[{"ErrorEquals": ["States.ALL"], "Next": "broken"}],
            ),
            "settled": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.ok", "BooleanEquals": True, "Next": "done"}],
                "Default": "wait",
            },
            "wait": {"Type": "Wait", "Seconds": 30, "Next": "poll"},
            "done": passing(),
            "broken": passing("more"),
            "more": passing(),
        },
    }
    cheapest, dearest = machine_paths(asl)
    assert cheapest == PathCost(3, 1, events=9)  # poll, settled, done
    # poll, settled, wait, then back once: poll, settled, done
    assert dearest == PathCost(6, 2, 30.0, events=18)


def test_parallel_sums_its_branches_and_map_runs_its_iteration_per_item():
    asl = {
        "StartAt": "both",
        "States": {
            "both": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "x", "States": {"x": task()}},
                    {"StartAt": "y", "States": {"y": passing("z"), "z": passing()}},
                ],
                "Next": "each",
            },
            "each": {
                "Type": "Map",
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "price",
                    "States": {"price": task("tidy"), "tidy": passing()},
                },
                "End": True,
            },
        },
    }
    # Parallel: 1 + 1 + 2 = 4 transitions, 1 Lambda; Map of 3 items: 1 + 3 × 2, 3 Lambdas
    cheapest, dearest = machine_paths(asl, items=3)
    assert (cheapest.transitions, cheapest.lambda_invocations) == (11, 4)
    assert dearest == cheapest
    assert cheapest.fan_out == 2 + 3


def test_a_machine_whose_every_path_fails_is_priced_on_its_failing_paths():
    asl = {"StartAt": "a", "States": {"a": task("f"), "f": {"Type": "Fail"}}}
    # (a Fail state logs 1 event: FailStateEntered)
    assert machine_paths(asl) == (PathCost(2, 1, events=6), PathCost(2, 1, events=6))


def test_standard_bills_transitions_and_express_bills_a_request_and_its_duration():
    asl = {
        "StartAt": "a",
        "States": {
            "a": task("b"),
            "b": {"Type": "Wait", "Seconds": 2, "Next": "c"},
            "c": passing(),
        },
    }
    found = estimate(asl, lambda_ms=100, state_ms=10, platform=BARE)
    standard = found.bills[("dearest", "standard")]
    express = found.bills[("dearest", "express")]
    lambdas = 1 * prices.LAMBDA_PER_REQUEST + 0.1 * 0.5 * prices.LAMBDA_PER_GB_SECOND
    assert standard.total == pytest.approx(3 * prices.STANDARD_PER_TRANSITION + lambdas)
    # 100 ms (Lambda) + 2 × 10 ms + 2 s wait = 2,120 ms, billed as 2,200 ms at 64 MB
    duration = 2.2 * (64 / 1024) * prices.EXPRESS_PER_GB_SECOND
    # Express logs every event: start and end, 5 for the Task, 2 each for the Wait and the Pass
    logged = 11 * DEFAULT_LOG_EVENT_BYTES / 2**30
    logs = logged * (prices.LOGS_INGESTION_PER_GB + prices.LOGS_STORAGE_PER_GB_MONTH)
    assert express.total == pytest.approx(prices.EXPRESS_PER_REQUEST + duration + lambdas + logs)
    # Standard logs errors only: its log line is there, at $0 for a run that succeeds
    assert [line.dollars for line in standard.lines if line.item == LOGS_ITEM] == [0.0]


def test_the_platform_adds_the_start_to_both_and_the_recorder_only_to_standard():
    usage = RunUsage(transitions=10, lambda_invocations=0, lambda_ms=0, duration_ms=50)
    platform = Platform()
    standard = {line.item for line in price_run(usage, "standard", platform).lines}
    express = {line.item for line in price_run(usage, "express", platform).lines}
    assert "API Gateway (start)" in standard & express
    assert "Lambda: recorder" in standard - express
    assert "DynamoDB (native record)" in express - standard
    without_start = price_run(usage, "standard", platform, start=False)
    assert price_run(usage, "standard", platform).total - without_start.total == pytest.approx(
        prices.API_GATEWAY_REST_PER_REQUEST
        + 2 * prices.LAMBDA_PER_REQUEST
        + (platform.authorizer_ms / 1000 * 0.5 + platform.api_ms / 1000 * 1.0)
        * prices.LAMBDA_PER_GB_SECOND
        + platform.start_write_units * prices.DYNAMODB_PER_WRITE_UNIT
        + platform.start_read_units * prices.DYNAMODB_PER_READ_UNIT
    )


@pytest.mark.parametrize(("ms", "billed"), [(0, 100), (1, 100), (100, 100), (101, 200)])
def test_express_duration_is_billed_in_100_ms_steps(ms: float, billed: int):
    assert express_billed_ms(ms) == billed


def test_express_memory_is_billed_in_64_mb_chunks():
    assert express_memory_mb(50_000) == 64  # 50 MB + 50 KB
    # AWS's example: 50 KB definition, 400 map steps of 32 KB → 62.85 MB → 64 MB
    assert express_memory_mb(50 * 1024, 32 * 1024, 400) == 64
    assert express_memory_mb(50 * 1024, 256 * 1024, 100) == 128


def test_express_recording_prices_the_native_write_the_deadline_marker_and_the_sweep():
    platform = Platform(
        native_record_write_units=1,
        express_marker_write_units=1,
        sweep_write_units=2,
        sweep_read_units=3,
        sweep_ms=100,
        sweep_events=1,
    )
    lines = {line.item: line.dollars for line in platform_lines("express", platform, start=False)}
    assert lines == pytest.approx(
        {
            "DynamoDB (native record)": prices.DYNAMODB_PER_WRITE_UNIT,
            "DynamoDB (deadline marker + sweep)": 3 * prices.DYNAMODB_PER_WRITE_UNIT
            + 3 * prices.DYNAMODB_PER_READ_UNIT,
            # The sweep's time only: its invocations come from the schedule, not the runs
            "Lambda: maintenance sweep": 0.1 * 0.5 * prices.LAMBDA_PER_GB_SECOND,
            "EventBridge (lifecycle events, sweep)": prices.EVENTS_PER_EVENT,
        }
    )


def test_a_start_without_an_authorizer_call_pays_only_the_api_and_its_function():
    with_authorizer = Platform(authorizer_ms=10, api_ms=50)
    without = Platform(
        authorizer_ms=10,
        api_ms=50,
        authorizer_invocations=0,
        api_per_request=prices.API_GATEWAY_HTTP_PER_REQUEST,
    )

    def start(platform: Platform) -> float:
        return sum(
            line.dollars
            for line in platform_lines("standard", platform)
            if line.item.endswith("(start)") and not line.item.startswith("DynamoDB")
        )

    assert start(with_authorizer) - start(without) == pytest.approx(
        prices.API_GATEWAY_REST_PER_REQUEST
        - prices.API_GATEWAY_HTTP_PER_REQUEST
        + prices.LAMBDA_PER_REQUEST
        + 0.01 * 0.5 * prices.LAMBDA_PER_GB_SECOND
    )
