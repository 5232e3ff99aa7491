"""A cancelled DynamoDB transaction is told apart by its reasons: a failed condition is a
``ConditionFailed`` (the caller's answer), a conflict with another request a
``TransactionConflict`` (a ``ConditionFailed``: read again and decide anew), a capacity limit
``Throttled`` (try again later), anything else an error. Before, every cancellation read as a
failed condition, so a validation error or a throttle was taken for a settled race."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from relayflow.dal.codec import translate_error
from relayflow.dal.errors import (
    ConditionFailed,
    DataAccessError,
    Throttled,
    TransactionConflict,
)


def cancelled(*codes: str, in_response: bool = True) -> ClientError:
    listed = ", ".join(codes)
    response: dict[str, Any] = {
        "Error": {
            "Code": "TransactionCanceledException",
            "Message": f"Transaction cancelled, please refer cancellation reasons for specific "
            f"reasons [{listed}]",
        }
    }
    if in_response:
        response["CancellationReasons"] = [{"Code": code} for code in codes]
    return ClientError(response, "TransactWriteItems")  # type: ignore[arg-type]


@pytest.mark.parametrize("in_response", [True, False], ids=["reasons", "message only"])
@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        (("None", "ConditionalCheckFailed"), ConditionFailed),
        (("ConditionalCheckFailed", "TransactionConflict"), ConditionFailed),
        (("None", "TransactionConflict"), TransactionConflict),
        (("TransactionConflict", "ThrottlingError"), TransactionConflict),
        (("ThrottlingError", "None"), Throttled),
        (("ProvisionedThroughputExceeded",), Throttled),
        (("None", "ValidationError"), DataAccessError),
    ],
)
def test_a_cancelled_transaction_is_classified_by_its_reasons(codes, expected, in_response):
    error = translate_error(cancelled(*codes, in_response=in_response), "transact_write_items")
    assert type(error) is expected
    assert "TransactionCanceledException" in str(error)


def test_a_conflict_is_handled_where_a_failed_condition_is():
    error = translate_error(cancelled("None", "TransactionConflict"), "transact_write_items")
    assert isinstance(error, ConditionFailed)


def test_a_cancellation_without_reasons_is_a_failed_condition():
    response = {"Error": {"Code": "TransactionCanceledException", "Message": "cancelled"}}
    error = translate_error(ClientError(response, "TransactWriteItems"), "transact_write_items")  # type: ignore[arg-type]
    assert type(error) is ConditionFailed


def test_a_conditional_check_failure_is_still_a_failed_condition():
    response = {"Error": {"Code": "ConditionalCheckFailedException", "Message": "no"}}
    error = translate_error(ClientError(response, "PutItem"), "put_item")  # type: ignore[arg-type]
    assert type(error) is ConditionFailed
