"""What the data-access layer raises. Every ``ClientError`` becomes one of these (``raise …
from exc``); no caller ever sees botocore's exception types."""

from __future__ import annotations


class DataAccessError(Exception):
    """DynamoDB refused or failed a request for a reason the caller cannot fix."""


class ConditionFailed(DataAccessError):
    """A conditional write found the item in another state (or a transaction was cancelled
    because one of its conditions failed)."""


class TransactionConflict(ConditionFailed):
    """A transaction was cancelled because another request changed one of its items at the
    same time: as for a failed condition, the caller reads the items again and decides anew
    (every caller that handles :class:`ConditionFailed` does)."""


class ItemTooLarge(DataAccessError):
    """The item would exceed DynamoDB's 400 KB item size."""


class Throttled(DataAccessError):
    """DynamoDB throttled the request even after the client's retries."""


class InvalidPageToken(DataAccessError):
    """A ``next_token`` that this query did not hand out."""


class SlugTaken(ConditionFailed):
    """A webhook slug is registered to another tenant's or another workflow's trigger."""

    def __init__(self, slug: str, message: str) -> None:
        super().__init__(message)
        self.slug = slug
