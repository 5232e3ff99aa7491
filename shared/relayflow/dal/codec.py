"""The table's wire format and error translation, shared by every DAL module: plain values
to and from DynamoDB's typed attributes, ``#name`` aliases of expressions, opaque page tokens,
and the :mod:`relayflow.dal.errors` exception for each ``ClientError``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any

from relayflow.dal.errors import (
    ConditionFailed,
    DataAccessError,
    InvalidPageToken,
    ItemTooLarge,
    Throttled,
    TransactionConflict,
)

_THROTTLING = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
    }
)


def translate_error(exc: Exception, action: str) -> DataAccessError:
    """The domain exception for a botocore ``ClientError``."""
    error = getattr(exc, "response", {}).get("Error", {})
    code = str(error.get("Code", ""))
    message = f"{action}: {code or type(exc).__name__}: {error.get('Message', exc)}"
    if code == "TransactionCanceledException":
        return _cancelled(exc, message)
    if code == "ConditionalCheckFailedException":
        return ConditionFailed(message)
    if code in _THROTTLING:
        return Throttled(message)
    if code == "ValidationException" and "size" in str(error.get("Message", "")).lower():
        return ItemTooLarge(message)
    return DataAccessError(message)


#: Why DynamoDB cancels a transaction without any condition failing, other than a conflict:
#: a capacity limit. Retrying the transaction later may succeed.
_THROTTLED_CANCELLATIONS = frozenset(
    {"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)


def _cancelled(exc: Exception, message: str) -> DataAccessError:
    """A cancelled transaction, by its reasons (one per item, ``None`` for the items that were
    not the cause): a failed condition is :class:`ConditionFailed`; a conflict with another
    request on the same items :class:`TransactionConflict` (a ``ConditionFailed``: read again
    and decide anew); a capacity limit :class:`Throttled`; anything else (a validation error,
    an item collection over its size) a :class:`DataAccessError`, never a failed condition.
    A cancellation that gives no reason counts as a failed condition, the only cause
    Relayflow's transactions expect."""
    response = getattr(exc, "response", {}) or {}
    codes = {
        str(reason.get("Code"))
        for reason in response.get("CancellationReasons") or []
        if isinstance(reason, Mapping)
    }
    if not codes:
        # botocore may leave the reasons out of the response; the message lists them.
        listed = re.search(r"\[([^\]]*)\]", str(response.get("Error", {}).get("Message", "")))
        codes = {code.strip() for code in listed.group(1).split(",")} if listed else set()
    codes.discard("None")
    if not codes or "ConditionalCheckFailed" in codes:
        return ConditionFailed(message)
    if (
        "TransactionConflict" in codes
        and codes <= {"TransactionConflict"} | _THROTTLED_CANCELLATIONS
    ):
        return TransactionConflict(message)
    if codes <= _THROTTLED_CANCELLATIONS:
        return Throttled(message)
    return DataAccessError(message)


def _to_dynamo(value: Any) -> Any:
    """Python values as the serializer accepts them (floats become Decimals)."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: _to_dynamo(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_dynamo(v) for v in value]
    return value


def _from_dynamo(value: Any) -> Any:
    """Decimals back to ints or floats."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _from_dynamo(v) for k, v in value.items()}
    if isinstance(value, list | set):
        return [_from_dynamo(v) for v in value]
    return value


@lru_cache(maxsize=1)
def _codec() -> tuple[Any, Any]:
    from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

    return TypeSerializer(), TypeDeserializer()


def serialize(item: Mapping[str, Any]) -> dict[str, Any]:
    serializer, _ = _codec()
    return {k: serializer.serialize(_to_dynamo(v)) for k, v in item.items()}


def deserialize(item: Mapping[str, Any]) -> dict[str, Any]:
    _, deserializer = _codec()
    return {k: _from_dynamo(deserializer.deserialize(v)) for k, v in item.items()}


def alias_names(*expressions: str) -> dict[str, str]:
    """``#name`` → ``name`` for every attribute an expression names as ``#name``."""
    names: dict[str, str] = {}
    for expression in expressions:
        for token in re.split(r"[\s(),.]+", expression):
            if token.startswith("#"):
                names[token] = token[1:]
    return names


def expression_parts(
    names: Mapping[str, str] | None, values: Mapping[str, Any] | None, *expressions: str
) -> dict[str, Any]:
    """The ``ExpressionAttributeNames`` / ``ExpressionAttributeValues`` of a request (each
    left out when empty); ``names`` default to the expressions' aliases."""
    parts: dict[str, Any] = {}
    aliases = dict(names) if names is not None else alias_names(*expressions)
    if aliases:
        parts["ExpressionAttributeNames"] = aliases
    if values:
        parts["ExpressionAttributeValues"] = serialize(values)
    return parts


def encode_token(last_key: Mapping[str, Any]) -> str:
    """An opaque page token: base64url of the plain last-evaluated key."""
    plain = deserialize(last_key)
    raw = json.dumps(plain, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str, partition: str, attributes: tuple[str, ...]) -> dict[str, Any]:
    """The exclusive start key in ``token``; it must belong to ``partition`` (so a token can
    never page through another tenant's items) and have exactly ``attributes``."""
    try:
        padded = token + "=" * (-len(token) % 4)
        plain = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error, UnicodeError) as exc:
        raise InvalidPageToken("next_token is not a token this listing handed out") from exc
    if (
        not isinstance(plain, dict)
        or sorted(plain) != sorted(attributes)
        or not all(isinstance(v, str) for v in plain.values())
        or plain.get("gsi1pk") != partition
    ):
        raise InvalidPageToken("next_token is not a token this listing handed out")
    return serialize(plain)
