"""Native terminal recording: the compiled machine writes its run's end to the run item.

An Express execution emits no status change events and has no execution history, so the
recorder Lambda never hears of it. Its machine records its own end instead, with Step
Functions' DynamoDB integration (``arn:aws:states:::dynamodb:updateItem``, no Lambda):

* ``_run``: a Parallel with one branch, the whole workflow. Its Catch (``States.ALL``)
  catches every error the workflow does not handle, wherever it is raised;
* ``_record.succeeded``: UpdateItem ``status = succeeded`` and the output (as JSON) on the
  run item (``_record.succeeded_bare``, without the output, when DynamoDB refuses it as too
  large), then ``_succeeded`` ends the run with the workflow's output;
* ``_record.failed``: UpdateItem ``status = failed`` with the error and its cause, then
  ``_failed`` fails the run with the same error and cause.

Each UpdateItem is conditional on a run item still ``running`` (a run the control plane
did not start, e.g. ``relayflow run``, has no item, and a cancelled run keeps its status).
A run that reaches neither path (its machine timed out, or Step Functions itself failed it)
leaves the item ``running`` past its deadline, and the maintenance sweep marks it
``timed_out`` (:mod:`relayflow.control.sweep`). The item also gets ``native_status``: the
sweep settles those ends (DLQ archive, notifications, lifecycle events) like the recorder.

Pure: an ASL dict in, the wrapped ASL dict out.
"""

from __future__ import annotations

from typing import Any

#: The Step Functions DynamoDB integration the recording Tasks use.
DYNAMODB_UPDATE_ITEM = "arn:aws:states:::dynamodb:updateItem"
RUN_STATE = "_run"
RECORD_SUCCEEDED = "_record.succeeded"
RECORD_SUCCEEDED_BARE = "_record.succeeded_bare"
RECORD_FAILED = "_record.failed"
SUCCEEDED_STATE = "_succeeded"
FAILED_STATE = "_failed"
#: The run items' key family (``relayflow.dal.access.RUNS``): all the machine may update.
RUN_ITEMS = "TENANT#*#RUN#*"
#: The recorded statuses a run item can go to from here.
NATIVE_STATUSES = ("succeeded", "failed")
#: DynamoDB errors worth retrying (throttling, a busy partition, a 5xx).
_RETRYABLE = [
    "DynamoDB.ProvisionedThroughputExceededException",
    "DynamoDB.ThrottlingException",
    "DynamoDB.RequestLimitExceeded",
    "DynamoDB.InternalServerErrorException",
    "DynamoDB.AmazonDynamoDBException",
]
#: The UpdateItem condition failed: there is no running run item to record on.
CONDITION_FAILED = "DynamoDB.ConditionalCheckFailedException"


def _update(table_name: str, status: str, extra: dict[str, dict[str, str]]) -> dict[str, Any]:
    # Every attribute through a name placeholder: status, output and error are DynamoDB
    # reserved words.
    names = ["status", "native_status", "ended_at", *(value[1:] for value in extra)]
    sets = ["#status = :status", "#native_status = :status", "#ended_at = :ended"]
    sets += [f"#{value[1:]} = {value}" for value in extra]
    return {
        "TableName": table_name,
        "Key": {
            # relayflow.dal.keys.run_key, built from the run's own document.
            "pk": {"S.$": "States.Format('TENANT#{}#RUN#{}', $.run.tenant, $.run.id)"},
            "sk": {"S": "RUN"},
        },
        "UpdateExpression": "SET " + ", ".join(sets),
        "ConditionExpression": "attribute_exists(pk) AND #status = :running",
        "ExpressionAttributeNames": {f"#{name}": name for name in names},
        "ExpressionAttributeValues": {
            ":status": {"S": status},
            ":running": {"S": "running"},
            ":ended": {"S.$": "$$.State.EnteredTime"},
            **extra,
        },
    }


def _record_task(
    table_name: str, status: str, extra: dict[str, Any], then: str, fallback: str | None = None
) -> dict[str, Any]:
    return {
        "Type": "Task",
        "Resource": DYNAMODB_UPDATE_ITEM,
        "Parameters": _update(table_name, status, extra),
        "ResultPath": None,
        "Retry": [
            {
                "ErrorEquals": list(_RETRYABLE),
                "IntervalSeconds": 1,
                "MaxAttempts": 3,
                "BackoffRate": 2.0,
                "JitterStrategy": "FULL",
            }
        ],
        # No running item to record on, or DynamoDB kept failing: the run still ends as it
        # did (the sweep finds an item left running).
        "Catch": [
            *(
                [
                    {
                        "ErrorEquals": ["DynamoDB.ValidationException"],
                        "ResultPath": None,
                        "Next": fallback,
                    }
                ]
                if fallback
                else []
            ),
            {"ErrorEquals": ["States.ALL"], "ResultPath": None, "Next": then},
        ],
        "Next": then,
    }


def with_native_recording(
    asl: dict[str, Any], table_name: str, timeout_seconds: int
) -> dict[str, Any]:
    """``asl`` wrapped so that the machine records its run's end on the run item (see the
    module docstring); ``timeout_seconds`` becomes the machine's ``TimeoutSeconds``."""
    branch = {"StartAt": asl["StartAt"], "States": asl["States"]}
    states: dict[str, Any] = {
        RUN_STATE: {
            "Type": "Parallel",
            "Branches": [branch],
            # The branch's output (the workflow's), kept apart so $.run stays readable.
            "ResultSelector": {"output.$": "$[0]"},
            "ResultPath": "$.result",
            "Catch": [
                {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": RECORD_FAILED}
            ],
            "Next": RECORD_SUCCEEDED,
        },
        RECORD_SUCCEEDED: _record_task(
            table_name,
            "succeeded",
            {":output": {"S.$": "States.JsonToString($.result.output)"}},
            SUCCEEDED_STATE,
            fallback=RECORD_SUCCEEDED_BARE,
        ),
        # An output too large for the item: the end is recorded without it.
        RECORD_SUCCEEDED_BARE: _record_task(table_name, "succeeded", {}, SUCCEEDED_STATE),
        SUCCEEDED_STATE: {"Type": "Succeed", "OutputPath": "$.result.output"},
        RECORD_FAILED: _record_task(
            table_name,
            "failed",
            {":error": {"S.$": "$.error.Error"}, ":cause": {"S.$": "$.error.Cause"}},
            FAILED_STATE,
        ),
        FAILED_STATE: {"Type": "Fail", "ErrorPath": "$.error.Error", "CausePath": "$.error.Cause"},
    }
    wrapped = {k: v for k, v in asl.items() if k not in ("StartAt", "States", "TimeoutSeconds")}
    return {**wrapped, "StartAt": RUN_STATE, "States": states, "TimeoutSeconds": timeout_seconds}
