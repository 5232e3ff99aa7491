"""One test per compatibility fix (relayflow.local.compat) of the AWS services around Step
Functions, DynamoDB and CloudWatch Logs: each states the AWS behaviour that moto 5.2.5 got
wrong, and fails when its fix is skipped (the interpreter's fixes: test_local_compat.py)."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
from local_asl import machine, pass_state

pytestmark = pytest.mark.integration


# -- dynamodb_atomic_requests -------------------------------------------------------------


def _read_while_another_thread_writes(
    rt, writer_seconds: float
) -> tuple[list[BaseException], bool]:
    """Read an item while another thread updates it, in the middle of moto turning the item
    into its response: after the first attribute the writer starts and is given
    ``writer_seconds``. Returns the read's errors and whether the writer had to wait for the
    read."""
    from moto.dynamodb import responses
    from moto.dynamodb.models import utilities

    from relayflow.dal import create_table

    dynamodb = rt.dynamodb_client
    table = f"atomic-{uuid.uuid4().hex[:8]}"
    create_table(dynamodb, table)
    key = {"pk": {"S": "P"}, "sk": {"S": "S"}}
    dynamodb.put_item(TableName=table, Item={**key, "a": {"S": "1"}, "b": {"S": "2"}})
    original = utilities.dynamo_to_dict
    armed, writer_waited, writers = [True], [], []

    def write() -> None:
        dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET #n = :v",
            ExpressionAttributeNames={"#n": f"new{uuid.uuid4().hex}"},
            ExpressionAttributeValues={":v": {"S": "x"}},
        )

    def interleaving(value):
        if not (armed[0] and isinstance(value, dict) and "a" in value):
            return original(value)
        armed[0] = False
        items = iter(value.items())
        name, attribute = next(items)
        result = {name: original(attribute)}
        writer = threading.Thread(target=write)
        writers.append(writer)
        writer.start()
        writer.join(timeout=writer_seconds)
        writer_waited.append(writer.is_alive())
        for name, attribute in items:  # moto's own loop, resumed
            result[name] = original(attribute)
        return result

    errors: list[BaseException] = []
    saved = responses.dynamo_to_dict
    utilities.dynamo_to_dict = interleaving
    responses.dynamo_to_dict = interleaving
    try:
        try:
            dynamodb.get_item(TableName=table, Key=key)
        except Exception as exc:  # the 500 the race produced
            errors.append(exc)
    finally:
        utilities.dynamo_to_dict = original
        responses.dynamo_to_dict = saved
        for writer in writers:  # a waiting writer goes on once the read is answered
            writer.join(timeout=5)
    return errors, bool(writer_waited and writer_waited[0])


def test_a_dynamodb_read_never_sees_an_item_change_under_it(rt):
    # When another thread updates an item while a read is turning it into its response
    # (the writer is blocked until the read ends, so a short look at it is enough)
    errors, writer_waited = _read_while_another_thread_writes(rt, writer_seconds=0.3)
    # Then the write waits for the read to finish (DynamoDB applies requests atomically)
    assert errors == [] and writer_waited


def test_without_the_fix_moto_changes_an_item_under_a_read(rt):
    from relayflow.local import compat

    compat.apply(skip=["dynamodb_atomic_requests"])
    try:
        # (the writer is not blocked: it is given all the time a loaded machine may need)
        errors, writer_waited = _read_while_another_thread_writes(rt, writer_seconds=30)
    finally:
        compat.apply()
    # The write lands in the middle of the read, which fails
    assert not writer_waited
    assert errors and "dictionary changed size during iteration" in str(errors[0])


# -- dynamodb_query_partition ---------------------------------------------------------------


class _Unreadable:
    """An item that fails whoever reads it: it stands for the rest of the table."""

    @property
    def hash_key(self):
        raise AssertionError("a Query read an item outside its partition")

    range_key = hash_key


def _table_with_an_unreadable_partition(rt) -> str:
    """A table with partition ``P`` (items s1..s5, written out of order) and a partition
    whose item fails when it is read."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType

    from relayflow.dal import create_table

    dynamodb = rt.dynamodb_client
    table = f"query-{uuid.uuid4().hex[:8]}"
    create_table(dynamodb, table)
    for n in (3, 1, 5, 2, 4):
        dynamodb.put_item(TableName=table, Item={"pk": {"S": "P"}, "sk": {"S": f"s{n}"}})
    moto_table = dynamodb_backends[rt.account][rt.region].get_table(table)
    moto_table.items[DynamoType({"S": "OTHER"})] = {DynamoType({"S": "x"}): _Unreadable()}
    return table


def _query(rt, table: str, **extra) -> dict:
    return rt.dynamodb_client.query(
        TableName=table,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "P"}},
        **extra,
    )


def test_a_query_reads_only_its_partition(rt):
    # Given a table whose other partition cannot be read
    table = _table_with_an_unreadable_partition(rt)

    # When partition P is queried, forward in pages of two and backward
    pages, start = [], None
    while True:
        page = _query(rt, table, Limit=2, **({"ExclusiveStartKey": start} if start else {}))
        pages.append([item["sk"]["S"] for item in page["Items"]])
        start = page.get("LastEvaluatedKey")
        if start is None:
            break
    backward = _query(rt, table, ScanIndexForward=False)

    # Then it answers from P alone, in sort-key order, page by page (DynamoDB reads the
    # partitions a Query names, whatever else the table holds)
    assert pages == [["s1", "s2"], ["s3", "s4"], ["s5"]]
    assert [item["sk"]["S"] for item in backward["Items"]] == ["s5", "s4", "s3", "s2", "s1"]


def test_without_the_fix_moto_reads_the_whole_table_for_a_query(rt):
    from botocore.exceptions import ClientError

    from relayflow.local import compat

    table = _table_with_an_unreadable_partition(rt)
    compat.apply(skip=["dynamodb_query_partition"])
    try:
        # moto sorts every item of the table for each Query, the other partition included
        with pytest.raises((AssertionError, ClientError)):
            _query(rt, table)
    finally:
        compat.apply()


# -- execution_logs -----------------------------------------------------------------------


def _logged_machine(rt, level: str) -> tuple[str, str]:
    """An Express machine that logs ``level`` to a fresh log group; its ARN and the group."""
    group = f"/aws/vendedlogs/states/compat-{uuid.uuid4().hex[:8]}"
    rt.client("logs").create_log_group(logGroupName=group)
    asl = machine(
        {
            "Work": pass_state("Stop", Result={"ok": 1}),
            "Stop": {"Type": "Fail", "Error": "Shop.NoStock", "Cause": "personal data"},
        }
    )
    response = rt.sfn_client.create_state_machine(
        name=f"logged-{uuid.uuid4().hex[:8]}",
        definition=json.dumps(asl),
        roleArn="arn:aws:iam::123456789012:role/relayflow-local",
        type="EXPRESS",
        loggingConfiguration={
            "level": level,
            "includeExecutionData": False,
            "destinations": [
                {
                    "cloudWatchLogsLogGroup": {
                        "logGroupArn": f"arn:aws:logs:us-east-1:123456789012:log-group:{group}:*"
                    }
                }
            ],
        },
    )
    return response["stateMachineArn"], group


def _logged(rt, machine_arn: str, group: str) -> list[dict]:
    execution = rt.sfn_client.start_execution(stateMachineArn=machine_arn, input="{}")
    rt.wait(execution["executionArn"], timeout=30)
    events = rt.client("logs").filter_log_events(
        logGroupName=group, filterPattern=json.dumps(execution["executionArn"])
    )["events"]
    return [json.loads(event["message"]) for event in events]


def test_an_execution_logs_every_event_of_its_level_in_aws_shape(rt):
    # Given machines logging ALL and ERROR without execution data
    everything, errors = _logged_machine(rt, "ALL"), _logged_machine(rt, "ERROR")
    # When each runs to its Fail state
    records = _logged(rt, *everything)
    # Then ALL logs every history event, as AWS writes it: string ids, epoch-millis times, the
    # state's name and the error, never the output or the cause (execution data)
    assert [r["type"] for r in records] == [
        "ExecutionStarted",
        "PassStateEntered",
        "PassStateExited",
        "FailStateEntered",
        "ExecutionFailed",
    ]
    entered = records[1]
    assert (
        entered["details"] == {"name": "Work"} and ":execution:logged-" in entered["execution_arn"]
    )
    assert entered["event_timestamp"].isdigit() and entered["id"] == "2"
    assert records[-1]["details"] == {"error": "Shop.NoStock"}
    assert "personal data" not in json.dumps(records)
    # And ERROR only the failure events
    assert [r["type"] for r in _logged(rt, *errors)] == ["FailStateEntered", "ExecutionFailed"]


def test_without_the_fix_moto_logs_nothing(rt):
    from relayflow.local import compat

    machine_arn, group = _logged_machine(rt, "ALL")
    compat.apply(skip=["execution_logs"])
    try:
        records = _logged(rt, machine_arn, group)
    finally:
        compat.apply()
    assert records == []
