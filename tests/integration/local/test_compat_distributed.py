"""One test per Distributed Map fix (relayflow.local.compat_distributed): each states the AWS
behaviour moto 5.2.5 got wrong, and a companion shows the gap with the fix skipped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from local_asl import machine, pass_state

from relayflow.local import compat
from relayflow.local.compat_distributed import (
    ItemOutcome,
    float_percentages,
    parse_jsonl,
    result_record,
    threshold_exceeded,
)

pytestmark = pytest.mark.integration

BUCKET = "app-distributed-compat"


@pytest.fixture
def s3(rt: Any) -> Any:
    client = rt.s3_client
    if BUCKET not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
        client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def without(request: Any) -> Iterator[None]:
    """Run the test with the named fix skipped (``@pytest.mark.parametrize`` indirect)."""
    compat.apply(skip=[request.param])
    try:
        yield
    finally:
        compat.apply()


def item_machine(**map_fields: Any) -> dict[str, Any]:
    """A Distributed Map whose item fails (Error ``Item.Bad``) when the item has ``bad``."""
    processor = {
        "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
        "StartAt": "Check",
        "States": {
            "Check": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.bad", "IsPresent": True, "Next": "Bad"}],
                "Default": "Good",
            },
            "Bad": {"Type": "Fail", "Error": "Item.Bad", "Cause": "a bad row"},
            "Good": pass_state(Parameters={"n.$": "$.n"}),
        },
    }
    return machine({"Each": {"Type": "Map", "ItemProcessor": processor, "End": True, **map_fields}})


def rows(count: int, bad: set[int] = frozenset()) -> list[dict[str, Any]]:  # type: ignore[assignment]
    return [{"n": i, "bad": True} if i in bad else {"n": i} for i in range(count)]


# -- pure helpers -------------------------------------------------------------------------


def test_jsonl_parsing_skips_blank_lines_and_names_a_bad_one():
    assert parse_jsonl('{"a": 1}\n\n[2]\n"x"\n') == [{"a": 1}, [2], "x"]
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        parse_jsonl('{"a": 1}\n{nope}\n')


def test_thresholds_fail_beyond_either_bound():
    assert threshold_exceeded(3, 100, 3, 100.0) == (False, "")
    assert threshold_exceeded(4, 100, 3, 100.0)[0]
    assert threshold_exceeded(5, 100, 2**62, 5.0) == (False, "")
    exceeded, cause = threshold_exceeded(6, 100, 2**62, 5.0)
    assert exceeded and "6 of 100 items failed (6%)" in cause


def test_a_result_record_names_the_child_execution_of_the_map_run():
    run = "arn:aws:states:us-east-1:123456789012:mapRun:relayflow-x/3f2a:9c1d"
    failed = ItemOutcome(4, {"n": 4}, "FAILED", error="Item.Bad", cause="a bad row")
    record = result_record(failed, run)
    assert (
        record["StateMachineArn"]
        == "arn:aws:states:us-east-1:123456789012:stateMachine:relayflow-x/3f2a"
    )
    assert record["ExecutionArn"] == (
        f"arn:aws:states:us-east-1:123456789012:execution:relayflow-x/3f2a:{record['Name']}"
    )
    assert (record["Input"], record["Error"], record["Cause"]) == (
        '{"n":4}',
        "Item.Bad",
        "a bad row",
    )
    assert "Output" not in record
    # and the name is stable per map run and item
    assert result_record(failed, run)["Name"] == record["Name"]


def test_only_integer_percentage_fields_are_rewritten():
    text = json.dumps(
        {"A": {"ToleratedFailurePercentage": 5, "Comment": '"ToleratedFailurePercentage": 7'}}
    )
    assert json.loads(float_percentages(text)) == {
        "A": {"ToleratedFailurePercentage": 5.0, "Comment": '"ToleratedFailurePercentage": 7'}
    }


# -- distributed_integer_percentage -------------------------------------------------------


def test_an_integer_tolerated_failure_percentage_parses(rt):
    # Given a Distributed Map tolerating 50% (an integer, the only form AWS's schema takes)
    asl = item_machine(ToleratedFailurePercentage=50)
    # When 1 of 4 items fails
    record = rt.run("dist-int-percentage", asl, rows(4, {1}))
    # Then it runs, and the failure is within the tolerance
    assert record.status == "SUCCEEDED", (record.error, record.cause)


@pytest.mark.parametrize("without", ["distributed_integer_percentage"], indirect=True)
def test_without_the_fix_an_integer_percentage_is_refused(rt, without):
    with pytest.raises(Exception, match="ToleratedFailurePercentage"):
        rt.run("dist-int-percentage-moto", item_machine(ToleratedFailurePercentage=50), rows(2))


# -- distributed_tolerated_failures -------------------------------------------------------


def test_a_failed_item_fails_the_map_when_nothing_is_tolerated(rt):
    record = rt.run("dist-no-tolerance", item_machine(), rows(5, {3}))
    assert record.status == "FAILED"
    assert record.error == "States.ExceedToleratedFailureThreshold"
    assert "1 of 5 items failed" in (record.cause or "")


@pytest.mark.parametrize(
    ("fields", "bad", "status"),
    [
        ({"ToleratedFailureCount": 2}, {0, 4}, "SUCCEEDED"),
        ({"ToleratedFailureCount": 2}, {0, 4, 7}, "FAILED"),
        ({"ToleratedFailurePercentage": 20}, {0, 4}, "SUCCEEDED"),
        ({"ToleratedFailurePercentage": 20}, {0, 4, 7}, "FAILED"),
        # both set: exceeding either fails
        ({"ToleratedFailureCount": 5, "ToleratedFailurePercentage": 10}, {0, 4}, "FAILED"),
    ],
)
def test_tolerated_failures_bound_the_failed_items(rt, fields, bad, status):
    # Given 10 items of which len(bad) fail
    record = rt.run("dist-tolerance", item_machine(**fields), rows(10, bad))
    # Then the Map fails exactly when the failures exceed a threshold
    assert record.status == status, (record.error, record.cause)
    if status == "FAILED":
        assert record.error == "States.ExceedToleratedFailureThreshold"


def test_a_catch_on_the_map_sees_the_threshold_error(rt):
    asl = item_machine(
        Catch=[{"ErrorEquals": ["States.ExceedToleratedFailureThreshold"], "Next": "Caught"}]
    )
    asl["States"]["Each"].pop("End")
    asl["States"]["Each"]["Next"] = "Never"
    asl["States"]["Never"] = pass_state()
    asl["States"]["Caught"] = pass_state(Result="caught")
    record = rt.run("dist-catch", asl, rows(3, {2}))
    assert record.status == "SUCCEEDED" and record.output == "caught"


def test_one_worker_runs_thousands_of_items(rt):
    # moto recursed once per item in a worker: a long run of one worker hit the stack limit
    record = rt.run("dist-one-worker", item_machine(MaxConcurrency=1), rows(1500))
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    assert [r["n"] for r in record.output] == list(range(1500))


@pytest.mark.parametrize("without", ["distributed_tolerated_failures"], indirect=True)
def test_without_the_fix_moto_swallows_failed_items(rt, without):
    record = rt.run("dist-no-tolerance-moto", item_machine(), rows(3, {1}))
    assert record.status == "SUCCEEDED"
    assert record.output == [{"n": 0}, None, {"n": 2}]


# -- distributed_jsonl_reader -------------------------------------------------------------


def jsonl_machine() -> dict[str, Any]:
    reader = {
        "Resource": "arn:aws:states:::s3:getObject",
        "ReaderConfig": {"InputType": "JSONL"},
        "Parameters": {"Bucket": BUCKET, "Key.$": "$.key"},
    }
    return item_machine(ItemReader=reader)


def test_a_jsonl_object_is_read_line_by_line(rt, s3):
    body = "\n".join(json.dumps(r) for r in rows(4)) + "\n"
    s3.put_object(Bucket=BUCKET, Key="in/rows.jsonl", Body=body.encode())
    record = rt.run("dist-jsonl", jsonl_machine(), {"key": "in/rows.jsonl"})
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    assert record.output == [{"n": 0}, {"n": 1}, {"n": 2}, {"n": 3}]


def test_a_line_that_is_not_json_fails_the_item_reader(rt, s3):
    s3.put_object(Bucket=BUCKET, Key="in/broken.jsonl", Body=b'{"n": 0}\n{"n": \n')
    record = rt.run("dist-jsonl-broken", jsonl_machine(), {"key": "in/broken.jsonl"})
    assert record.status == "FAILED"
    assert record.error == "States.ItemReaderFailed"
    assert "line 2 is not JSON" in (record.cause or "")


@pytest.mark.parametrize("without", ["distributed_jsonl_reader"], indirect=True)
def test_without_the_fix_jsonl_is_refused(rt, without):
    asl = {**jsonl_machine(), "Comment": "not parsed before"}  # parsed programs are cached
    with pytest.raises(Exception, match="JSONL"):
        rt.run("dist-jsonl-moto", asl, {"key": "in/rows.jsonl"})


# -- distributed_result_writer ------------------------------------------------------------


def writer_machine() -> dict[str, Any]:
    writer = {
        "Resource": "arn:aws:states:::s3:putObject",
        "Parameters": {"Bucket": BUCKET, "Prefix": "results/run-1"},
    }
    return item_machine(ResultWriter=writer, ToleratedFailureCount=1)


def read_json(s3: Any, key: str) -> Any:
    return json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())


def test_results_are_written_with_a_manifest_naming_them(rt, s3):
    # Given 3 items of which one fails (tolerated)
    record = rt.run("dist-writer", writer_machine(), rows(3, {1}))
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    # Then the Map's output names the manifest under <prefix>/<map run id>/
    details = record.output["ResultWriterDetails"]
    run_id = record.output["MapRunArn"].split(":")[-1]
    assert details == {"Bucket": BUCKET, "Key": f"results/run-1/{run_id}/manifest.json"}
    manifest = read_json(s3, details["Key"])
    assert manifest["DestinationBucket"] == BUCKET
    assert manifest["MapRunArn"] == record.output["MapRunArn"]
    files = manifest["ResultFiles"]
    assert files["PENDING"] == []
    assert [f["Key"] for f in files["SUCCEEDED"]] == [f"results/run-1/{run_id}/SUCCEEDED_0.json"]
    assert [f["Key"] for f in files["FAILED"]] == [f"results/run-1/{run_id}/FAILED_0.json"]
    # And each result file holds one record per child execution, input and output as JSON text
    succeeded = read_json(s3, files["SUCCEEDED"][0]["Key"])
    assert files["SUCCEEDED"][0]["Size"] == len(
        s3.get_object(Bucket=BUCKET, Key=files["SUCCEEDED"][0]["Key"])["Body"].read()
    )
    assert [(json.loads(r["Input"]), json.loads(r["Output"])) for r in succeeded] == [
        ({"n": 0}, {"n": 0}),
        ({"n": 2}, {"n": 2}),
    ]
    assert {r["Status"] for r in succeeded} == {"SUCCEEDED"}
    failed = read_json(s3, files["FAILED"][0]["Key"])
    assert [(r["Status"], r["Error"], r["Cause"]) for r in failed] == [
        ("FAILED", "Item.Bad", "a bad row")
    ]
    assert json.loads(failed[0]["Input"]) == {"n": 1, "bad": True}


@pytest.mark.parametrize("without", ["distributed_result_writer"], indirect=True)
def test_without_the_fix_moto_writes_an_empty_manifest(rt, s3, without):
    record = rt.run("dist-writer-moto", writer_machine(), rows(2))
    manifest = read_json(s3, record.output["ResultWriterDetails"]["Key"])
    assert manifest["ResultFiles"] == {"FAILED": [], "PENDING": [], "SUCCEEDED": []}
