"""One test per compatibility fix (relayflow.local.compat): each states the AWS behaviour
that moto 5.2.5 got wrong, and fails when its fix is skipped."""

from __future__ import annotations

import datetime
import json
import re
import threading
import time
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError
from local_asl import INVOKE_WAIT_FOR_TOKEN, machine, pass_state, task, wait_for
from relayflow_testing import record_scaled_sleeps

from relayflow.local import compat
from relayflow.local.compat_callbacks import ATTEMPT_THREAD_NAME
from relayflow.local.history import parse_time

pytestmark = pytest.mark.integration

ISO_UTC_MILLIS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def callback_task(function: str, next_state: str | None = None, **extra):
    """A ``lambda:invoke.waitForTaskToken`` Task passing the token and the retry count."""
    payload = {"token.$": "$$.Task.Token", "attempt.$": "$$.State.RetryCount"}
    return task(
        function, payload=payload, next_state=next_state, resource=INVOKE_WAIT_FOR_TOKEN, **extra
    )


class Held:
    """A Lambda handler that runs until the test releases it (two minutes at most, longer
    than any wait of these tests, so only the fix under test can end its execution first)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, event, context):
        self.entered.set()
        self.release.wait(120)
        return {"released": True}


# -- jsonpath_definite_paths --------------------------------------------------------------


def test_definite_jsonpath_yields_a_scalar_and_indefinite_a_list(rt):
    # Given a Pass state selecting with array indexes, a descendant path and a wildcard
    params = {
        "first.$": "$.items[0].n",
        "cell.$": "$.grid[1][0]",
        "deep.$": "$..only",
        "all.$": "$.items[*].n",
        "none.$": "$.items[?(@.n == 'zzz')]",
    }
    asl = machine({"Select": pass_state(Parameters=params, OutputPath="$")})
    data = {"items": [{"n": "a"}, {"n": "b"}], "grid": [[1, 2], [3, 4]], "x": {"only": "o"}}

    # When it runs
    record = rt.run("jsonpath-definite", asl, data)

    # Then definite paths give the value itself and indefinite ones a list (AWS/Jayway)
    assert record.output == {"first": "a", "cell": 3, "deep": ["o"], "all": ["a", "b"], "none": []}


def test_parallel_result_selector_indexes_branch_outputs(rt):
    # Given a Parallel whose ResultSelector merges $[0] and $[1], as compiled workflows do
    asl = machine(
        {
            "Both": {
                "Type": "Parallel",
                "Branches": [
                    machine({"A": pass_state(Result={"a": 1})}),
                    machine({"B": pass_state(Result={"b": 2})}),
                ],
                "ResultSelector": {
                    "merged.$": "States.JsonMerge($[0], $[1], false)",
                    "a.$": "$[0].a",
                },
                "OutputPath": "$",
                "End": True,
            }
        }
    )

    # When it runs
    record = rt.run("parallel-result-selector", asl, {})

    # Then $[0] is the first branch's output, not a one-element list
    assert record.status == "SUCCEEDED", record.cause
    assert record.output == {"merged": {"a": 1, "b": 2}, "a": 1}


# -- map_parallel_states_errors -----------------------------------------------------------


def catching_timeouts(name: str, state: dict[str, Any]) -> dict[str, Any]:
    """A machine whose first state ``name`` is ``state`` with a Catch of States.Timeout into
    ``TimedOut`` (its error at ``$.error``); ``Done`` follows when nothing is caught."""
    catch = [{"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "TimedOut"}]
    return machine(
        {
            name: {**state, "Catch": catch, "Next": "Done"},
            "TimedOut": pass_state(),
            "Done": pass_state(),
        }
    )


def run_held(rt: Any, handler: str, name: str, asl: dict[str, Any], payload: Any) -> Any:
    """The record of ``asl``'s run, with the Lambda ``handler`` answering only after it."""
    held = Held()
    rt.register_handler(handler, held)
    try:
        return rt.run(name, asl, payload)
    finally:
        held.release.set()


def test_map_catch_sees_states_timeout_from_an_iteration(rt):
    # Given a Map whose iteration Task times out (its Lambda answers only after the run), with
    # a Catch for States.Timeout on the Map
    asl = catching_timeouts(
        "Each",
        {
            "Type": "Map",
            "ItemsPath": "$.items",
            "ItemProcessor": {
                "StartAt": "Slow",
                "States": {"Slow": task("held-iteration", TimeoutSeconds=1)},
            },
        },
    )

    # When it runs
    record = run_held(rt, "held-iteration", "map-states-timeout", asl, {"items": [1]})

    # Then the Map's catcher fired with the iteration's error name
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    assert record.output["error"]["Error"] == "States.Timeout"
    assert record.state("Each").status == "caught"
    assert record.states[-1].name == "TimedOut"


def test_parallel_catch_sees_states_timeout_from_a_branch(rt):
    # Given a Parallel whose branch Task times out (its Lambda answers only after the run), with
    # a Catch for States.Timeout
    asl = catching_timeouts(
        "Both",
        {
            "Type": "Parallel",
            "Branches": [
                machine({"Slow": task("held-branch", TimeoutSeconds=1)}),
                machine({"Quick": pass_state()}),
            ],
        },
    )

    # When it runs
    record = run_held(rt, "held-branch", "parallel-states-timeout", asl, {})

    # Then the Parallel's catcher fired with States.Timeout
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    assert record.output["error"]["Error"] == "States.Timeout"
    assert record.states[-1].name == "TimedOut"


# -- map_input_copied_once ----------------------------------------------------------------

ROWS = 200


def selecting_map(mode: str) -> dict[str, Any]:
    """A Map over ``$.rows`` whose ItemSelector reads the Map's input (``$.tag``) beside the
    item, as the compiler's for_each does with ``$.run``."""
    selector = {"tag.$": "$.tag", "n.$": "$$.Map.Item.Value.n"}
    processor = {"StartAt": "Keep", "States": {"Keep": pass_state()}}
    if mode == "DISTRIBUTED":
        processor["ProcessorConfig"] = {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    each = {"Type": "Map", "ItemsPath": "$.rows", "ItemSelector": selector}
    return machine({"Each": {**each, "ItemProcessor": processor, "End": True}})


def counting_document_copies(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the deep copies moto's ``$states`` makes of a whole run document (the dict that
    holds ``rows``): one element per copy."""
    import copy

    from moto.stepfunctions.parser.asl.eval import states as states_module

    copies: list[int] = []

    def deepcopy(value: Any, memo: Any = None) -> Any:
        if isinstance(value, dict) and "rows" in value:
            copies.append(1)
        return copy.deepcopy(value, memo)

    monkeypatch.setattr(states_module, "copy", type("Copy", (), {"deepcopy": deepcopy}))
    return copies


def run_selecting_map(rt: Any, monkeypatch: pytest.MonkeyPatch, name: str, mode: str) -> int:
    """Run :func:`selecting_map` over ``ROWS`` items; the number of document copies made."""
    copies = counting_document_copies(monkeypatch)
    rows = [{"n": i} for i in range(ROWS)]
    record = rt.run(name, selecting_map(mode), {"tag": "t", "rows": rows})
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    assert record.output == [{"tag": "t", "n": i} for i in range(ROWS)]
    return len(copies)


@pytest.mark.parametrize("mode", ["INLINE", "DISTRIBUTED"])
def test_a_map_over_its_input_copies_the_input_once_not_per_item(rt, monkeypatch, mode):
    # Given a Map over 200 items of its own input whose ItemSelector reads that input
    # When it runs
    copies = run_selecting_map(rt, monkeypatch, f"map-input-once-{mode.lower()}", mode)
    # Then every item saw the input, and the whole document was copied a few times for the
    # run (7 here), not once per item (which made 10,000 items cost 77 times what 1,000 did)
    assert copies < ROWS // 10


def test_without_the_fix_moto_copies_the_input_per_item(rt, monkeypatch):
    compat.apply(skip=["map_input_copied_once"])
    try:
        copies = run_selecting_map(rt, monkeypatch, "map-input-per-item-moto", "INLINE")
    finally:
        compat.apply()
    assert copies >= ROWS


# -- choice_no_match / choice_missing_variable / string_matches ---------------------------


def test_choice_without_match_or_default_fails_with_no_choice_matched(rt):
    # Given a Choice with one rule and no Default
    asl = machine(
        {
            "Route": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.n", "NumericEquals": 1, "Next": "One"}],
            },
            "One": pass_state(),
        }
    )

    # When no rule matches
    record = rt.run("choice-no-match", asl, {"n": 2})

    # Then the execution fails with States.NoChoiceMatched
    assert record.status == "FAILED"
    assert record.error == "States.NoChoiceMatched"
    assert record.state("Route").status == "failed"


def test_choice_on_a_missing_path_fails_with_states_runtime(rt):
    # Given a Choice comparing a path that is not in the input, with a Default
    asl = machine(
        {
            "Route": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.missing", "StringEquals": "x", "Next": "X"}],
                "Default": "Other",
            },
            "X": pass_state(),
            "Other": pass_state(),
        }
    )

    # When it runs
    record = rt.run("choice-missing-path", asl, {"present": 1})

    # Then the state fails with States.Runtime instead of taking the Default
    assert record.status == "FAILED"
    assert record.error == "States.Runtime"
    assert "$.missing" in record.cause
    assert [s.name for s in record.states] == ["Route"]


@pytest.mark.parametrize(("value", "expected"), [({}, "Stop"), ({"x": "go"}, "Go")])
def test_is_present_still_guards_a_missing_path(rt, value, expected):
    # Given the documented guard: IsPresent first, then the comparison, in an And
    rule = {
        "And": [
            {"Variable": "$.x", "IsPresent": True},
            {"Variable": "$.x", "StringEquals": "go"},
        ],
        "Next": "Go",
    }
    asl = machine(
        {
            "Route": {"Type": "Choice", "Choices": [rule], "Default": "Stop"},
            "Go": pass_state(),
            "Stop": pass_state(),
        }
    )

    # When it runs, Then the missing path is not an error
    record = rt.run("choice-is-present", asl, value)
    assert record.status == "SUCCEEDED"
    assert record.states[-1].name == expected


@pytest.mark.parametrize(
    ("value", "pattern", "matches"),
    [
        ("log-1.txt", "log-*.txt", True),
        ("log-1.txt", "log-?.txt", False),
        ("log-?.txt", "log-?.txt", True),
        ("a1", "a[1]", False),
        ("a[1]", "a[1]", True),
        ("a*b", "a\\*b", True),
        ("axxb", "a\\*b", False),
        ("", "*", True),
    ],
)
def test_string_matches_has_only_the_star_wildcard(rt, value, pattern, matches):
    # Given a Choice with StringMatches
    asl = machine(
        {
            "Route": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.v", "StringMatches": pattern, "Next": "Yes"}],
                "Default": "No",
            },
            "Yes": pass_state(),
            "No": pass_state(),
        }
    )

    # When it runs, Then only * is a wildcard and \* is a literal star
    record = rt.run("string-matches", asl, {"v": value})
    assert record.states[-1].name == ("Yes" if matches else "No")


# -- states_format_escapes ----------------------------------------------------------------


def test_states_format_honours_escapes_and_literal_braces(rt):
    # Given States.Format with escaped braces and backslash, and a template read from a path
    params = {
        "escaped.$": "States.Format('\\{{}\\} and \\\\ and {}', $.x, $.y)",
        "fromPath.$": "States.Format($.template, $.x)",
    }
    asl = machine({"Fmt": pass_state(Parameters=params)})

    # When it runs
    record = rt.run("states-format", asl, {"x": 7, "y": "z", "template": "Dear {name}, you owe {}"})

    # Then escapes are the literal characters and other braces are text
    assert record.status == "SUCCEEDED", record.cause
    assert record.output == {"escaped": "{7} and \\ and z", "fromPath": "Dear {name}, you owe 7"}


# -- timestamp_waits ----------------------------------------------------------------------


def test_timestamp_waits_honour_offsets_and_fractions(rt, monkeypatch):
    # Given real time, a local time zone east of UTC, a past literal Timestamp with an
    # offset, then a TimestampPath 1.75-2.75 s ahead, written in +02:00 with a fraction
    rt.time_scale = 1.0
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        now = datetime.datetime.now(datetime.UTC)
        target = now.replace(microsecond=0) + datetime.timedelta(seconds=2, microseconds=750000)
        until = target.astimezone(datetime.timezone(datetime.timedelta(hours=2))).isoformat()
        asl = machine(
            {
                "Past": {"Type": "Wait", "Timestamp": "2020-01-01T00:00:00+02:00", "Next": "W"},
                "W": {"Type": "Wait", "TimestampPath": "$.until", "End": True},
            }
        )

        # When it runs
        sleeps = record_scaled_sleeps(monkeypatch)
        record = rt.run("timestamp-wait", asl, {"until": until})
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()

    # Then the past Timestamp sleeps not at all, the other sleeps until the instant (at most
    # the 2.75 s it was ahead when the test began, whatever the zones), and ends not before it
    assert record.status == "SUCCEEDED", record.cause
    (past, ahead) = sleeps
    assert past[1] == 0.0
    assert 0 < ahead[1] <= 2.75
    assert record.state("W").ended_at >= target.replace(microsecond=750000)


# -- choice_timestamp_formats -------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"TimestampGreaterThan": "2026-11-05T10:00:00Z"}, "Yes"),
        ({"TimestampEquals": "2026-11-05T12:00:00.500+02:00"}, "Yes"),
        ({"TimestampLessThanPath": "$.later"}, "Yes"),
        ({"IsTimestamp": True}, "Yes"),
        ({"TimestampGreaterThan": "2026-11-05T10:00:01Z"}, "No"),
    ],
)
def test_choice_compares_fractional_and_offset_timestamps(rt, rule, expected):
    # Given a Choice comparing a timestamp with milliseconds, as Step Functions writes them
    asl = machine(
        {
            "Route": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.at", "Next": "Yes", **rule}],
                "Default": "No",
            },
            "Yes": pass_state(),
            "No": pass_state(),
        }
    )

    # When it runs, Then the comparison is between instants
    at = {"at": "2026-11-05T10:00:00.500Z", "later": "2026-11-05T11:00:00+00:30"}
    record = rt.run("choice-timestamps", asl, at)
    assert record.states[-1].name == expected


# -- context_start_time_iso ---------------------------------------------------------------


def test_execution_start_time_is_an_iso_string(rt):
    # Given a Pass reading $$.Execution.StartTime and the whole context object
    asl = machine(
        {"Ctx": pass_state(Parameters={"started.$": "$$.Execution.StartTime", "ctx.$": "$$"})}
    )

    # When it runs
    record = rt.run("context-start-time", asl, {})

    # Then it is an ISO-8601 UTC string with milliseconds, as on AWS ...
    started = record.output["started"]
    assert isinstance(started, str) and ISO_UTC_MILLIS.match(started)
    assert parse_time(started) == record.started_at
    assert record.output["ctx"]["Execution"]["StartTime"] == started
    # ... so DescribeExecution can serialise the output
    described = rt.sfn_client.describe_execution(executionArn=record.execution_arn)
    assert json.loads(described["output"])["started"] == started


# -- heartbeat_timeout_catch / send_task_failure_cause / task_token_per_attempt -----------


def test_missed_heartbeat_is_caught_by_states_heartbeat_timeout(rt):
    # Given a callback Task with HeartbeatSeconds 1 whose worker never calls back
    tokens = []
    rt.register_handler("keep-token", lambda event, context: tokens.append(event["token"]))
    asl = machine(
        {
            "Await": callback_task(
                "keep-token",
                next_state="OnTime",
                HeartbeatSeconds=1,
                TimeoutSeconds=30,
                Catch=[
                    {
                        "ErrorEquals": ["States.HeartbeatTimeout"],
                        "ResultPath": "$.error",
                        "Next": "Late",
                    }
                ],
            ),
            "OnTime": pass_state(),
            "Late": pass_state(),
        }
    )

    # When the heartbeat is missed
    record = rt.run("heartbeat-timeout", asl, {})

    # Then the States.HeartbeatTimeout catcher takes over
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    assert [s.name for s in record.states] == ["Await", "Late"]
    assert record.state("Await").status == "caught"
    assert len(tokens) == 1


def test_send_task_failure_cause_reaches_the_catcher(rt):
    # Given a callback Task whose worker reports failure with an error and a cause
    def decline(event, context):
        rt.sfn_client.send_task_failure(
            taskToken=event["token"], error="Payment.Declined", cause="card expired"
        )

    rt.register_handler("decline", decline)
    asl = machine(
        {
            "Pay": callback_task(
                "decline",
                next_state="Paid",
                Catch=[
                    {"ErrorEquals": ["Payment.Declined"], "ResultPath": "$.error", "Next": "No"}
                ],
            ),
            "Paid": pass_state(),
            "No": pass_state(),
        }
    )

    # When it runs
    record = rt.run("send-task-failure", asl, {})

    # Then the catcher receives both the error and the cause
    assert record.output["error"] == {"Error": "Payment.Declined", "Cause": "card expired"}


def test_each_attempt_of_a_callback_task_gets_a_new_token(rt):
    # Given a callback Task retried once; its worker declines attempt 0 and pays attempt 1
    tokens = []

    def pay_on_retry(event, context):
        tokens.append(event["token"])
        if event["attempt"] == 0:
            rt.sfn_client.send_task_failure(taskToken=event["token"], error="Payment.Declined")
        else:
            rt.sfn_client.send_task_success(taskToken=event["token"], output='{"paid": true}')

    rt.register_handler("pay-on-retry", pay_on_retry)
    retry = [{"ErrorEquals": ["Payment.Declined"], "IntervalSeconds": 1, "MaxAttempts": 1}]
    asl = machine({"Pay": callback_task("pay-on-retry", Retry=retry)})

    # When it runs
    record = rt.run("token-per-attempt", asl, {})

    # Then the retry waited for its own, new token and succeeded with its callback
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    assert record.output == {"paid": True}
    assert len(tokens) == 2 and tokens[0] != tokens[1]
    assert record.state("Pay").attempts == 2


# -- stop_blocked_task --------------------------------------------------------------------


def test_stop_aborts_an_execution_blocked_on_a_callback(rt):
    # Given an execution blocked on a task token that will never come (the handler gets the
    # token before the Task starts waiting for it, which TaskSubmitted records)
    tokens = []
    rt.register_handler("park", lambda event, context: tokens.append(event["token"]))
    arn = rt.start_execution(
        rt.create_state_machine("stop-callback", machine({"Await": callback_task("park")})), {}
    )
    token = wait_for(lambda: tokens and tokens[0])
    wait_for(lambda: "TaskSubmitted" in rt.describe(arn).event_types())

    # When it is stopped with an error and a cause
    rt.stop_execution(arn, error="Operator.Cancelled", cause="asked to")

    # Then it is ABORTED with them (the Task has no timeout and its token never comes, so
    # only the stop can end it), and the token is no longer accepted
    record = rt.wait(arn, timeout=30)
    assert record.status == "ABORTED"
    assert (record.error, record.cause) == ("Operator.Cancelled", "asked to")
    aborted = record.events[-1]
    assert aborted["type"] == "ExecutionAborted"
    assert aborted["executionAbortedEventDetails"]["error"] == "Operator.Cancelled"
    assert record.state("Await").status == "aborted"
    with pytest.raises(ClientError):
        rt.sfn_client.send_task_success(taskToken=token, output="{}")


def test_stop_aborts_an_execution_while_a_lambda_runs(rt):
    # Given an execution whose Lambda runs until the test releases it
    held = Held()
    rt.register_handler("held", held)
    arn = rt.start_execution(
        rt.create_state_machine("stop-lambda", machine({"Slow": task("held")})), {}
    )
    assert held.entered.wait(30)
    try:
        # When it is stopped
        rt.stop_execution(arn)
        # Then it is ABORTED while its Lambda still runs: the stop did not wait for it
        assert rt.wait(arn, timeout=30).status == "ABORTED"
    finally:
        held.release.set()


def test_an_abandoned_attempt_adds_nothing_after_the_terminal_event(rt):
    # Given an execution stopped while its Lambda runs
    held = Held()
    rt.register_handler("held-late", held)
    earlier = {t for t in threading.enumerate() if t.name == ATTEMPT_THREAD_NAME}
    arn = rt.start_execution(
        rt.create_state_machine("stop-late", machine({"Slow": task("held-late")})), {}
    )
    assert held.entered.wait(30)
    rt.stop_execution(arn, error="Operator.Cancelled", cause="asked to")
    at_stop = rt.wait(arn, timeout=30).event_types()
    attempts = [
        t for t in threading.enumerate() if t.name == ATTEMPT_THREAD_NAME and t not in earlier
    ]

    # When the Lambda returns afterwards and its abandoned attempt runs to its end
    held.release.set()
    for attempt in attempts:
        attempt.join(timeout=30)
    assert attempts and not any(attempt.is_alive() for attempt in attempts)

    # Then the history is as it was at the stop: ExecutionAborted stays its last event
    assert at_stop[-1] == "ExecutionAborted"
    assert rt.describe(arn).event_types() == at_stop


# -- execution_timed_out_event ------------------------------------------------------------


def test_state_machine_timeout_ends_history_with_execution_timed_out(rt):
    # Given a state machine with TimeoutSeconds 3 whose Lambda runs until the test releases it
    asl = machine({"Slow": task("held-timeout")}, TimeoutSeconds=3)

    # When it runs
    started = time.monotonic()
    record = run_held(rt, "held-timeout", "sm-timeout", asl, {})

    # Then it times out while the Lambda still runs, no sooner than 3 s (TimeoutSeconds is not
    # scaled; at the default 0.01 it would be 0.03 s), and the history says so
    assert record.status == "TIMED_OUT"
    assert time.monotonic() - started >= 2.9
    assert record.event_types()[-1] == "ExecutionTimedOut"
    assert record.state("Slow").status == "timed_out"


# -- history_paging -----------------------------------------------------------------------


def test_execution_history_pages(rt):
    # Given a finished execution with more events than one page
    asl = machine({"A": pass_state("B"), "B": pass_state("C"), "C": pass_state()})
    record = rt.run("history-paging", asl, {})
    total = len(record.events)
    assert total > 3

    # When the history is read 3 events at a time
    pages, token = [], None
    while True:
        kwargs = {"nextToken": token} if token else {}
        page = rt.sfn_client.get_execution_history(
            executionArn=record.execution_arn, maxResults=3, **kwargs
        )
        pages.append(page["events"])
        token = page.get("nextToken")
        if not token:
            break

    # Then pages hold at most 3 events and together the whole history, in order
    assert all(len(p) <= 3 for p in pages)
    assert [e["id"] for p in pages for e in p] == list(range(1, total + 1))
    # and reverseOrder starts from the end
    reverse = rt.sfn_client.get_execution_history(
        executionArn=record.execution_arn, reverseOrder=True, maxResults=1
    )
    assert reverse["events"][0]["type"] == "ExecutionSucceeded"


# -- unnamed_start_execution --------------------------------------------------------------


def test_start_execution_without_a_name_generates_one(rt):
    # Given a state machine started twice through the API without a name
    arn = rt.create_state_machine("unnamed", machine({"P": pass_state()}))
    first = rt.sfn_client.start_execution(stateMachineArn=arn, input="{}")["executionArn"]
    second = rt.sfn_client.start_execution(stateMachineArn=arn, input="{}")["executionArn"]

    # Then both started, under distinct generated names
    assert first != second
    assert not first.endswith(":None")
    assert rt.wait(first).status == rt.wait(second).status == "SUCCEEDED"


# -- starting_execution_status ------------------------------------------------------------


def test_an_execution_being_started_describes_as_running(rt, monkeypatch):
    # Given a describe of each execution in the moment moto has listed it but not yet
    # started it (a repeated start checking the first one's execution hits that window)
    from moto.stepfunctions.parser.backend.execution import Execution

    seen: list[str] = []
    original = Execution.start

    def describing_first(self):
        described = rt.sfn_client.describe_execution(executionArn=self.exec_arn)
        seen.append(described["status"])
        listed = rt.sfn_client.list_executions(stateMachineArn=arn)["executions"]
        seen.extend(e["status"] for e in listed if e["executionArn"] == self.exec_arn)
        return original(self)

    monkeypatch.setattr(Execution, "start", describing_first)
    arn = rt.create_state_machine("starting", machine({"P": pass_state()}))

    # When it is started
    started = rt.sfn_client.start_execution(stateMachineArn=arn, name="s1", input="{}")

    # Then the describe and the list saw it RUNNING, as AWS's atomic start shows it
    assert seen == ["RUNNING", "RUNNING"]
    assert rt.wait(started["executionArn"]).status == "SUCCEEDED"


# -- parse_cache --------------------------------------------------------------------------


def test_definitions_are_parsed_once(rt, monkeypatch):
    # Given a counter on moto's ANTLR entry point and a definition never seen before
    from moto.stepfunctions.parser.asl.antlr.runtime.ASLParser import ASLParser

    calls = []
    original = ASLParser.state_machine

    def counting(self):
        calls.append(1)
        return original(self)

    monkeypatch.setattr(ASLParser, "state_machine", counting)
    asl = machine({"P": pass_state()}, Comment=str(uuid.uuid4()))

    # When it is created and executed three times
    for _ in range(3):
        assert rt.run("parse-once", asl, {}).status == "SUCCEEDED"

    # Then it was parsed once
    assert len(calls) == 1


def test_a_cached_program_serves_concurrent_executions(rt):
    # Given one definition with a retried Task, started 20 times at once
    payload = {"key.$": "$.key", "failures": 1}
    retry = [{"ErrorEquals": ["Relayflow.Transient"], "IntervalSeconds": 1, "MaxAttempts": 2}]
    arn = rt.create_state_machine(
        "concurrent", machine({"Call": task("flaky", payload=payload, Retry=retry)})
    )
    keys = [f"concurrent-{uuid.uuid4().hex}" for _ in range(20)]
    arns = []
    threads = [
        threading.Thread(target=lambda k=k: arns.append(rt.start_execution(arn, {"key": k})))
        for k in keys
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # When they all finish
    records = [rt.wait(a, timeout=30) for a in arns]

    # Then each kept its own retry state
    assert all(r.status == "SUCCEEDED" for r in records)
    assert sorted(r.output["key"] for r in records) == sorted(keys)
    assert all(r.state("Call").attempts == 2 for r in records)
