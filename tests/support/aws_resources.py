"""AWS resources tests create in the local runtime's moto: secrets and the ``orders`` table.

On pytest's ``pythonpath`` (pyproject.toml), so any test imports it by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def create_secrets(runtime: Any, secrets: dict[str, str]) -> None:
    """Each ``name: value`` of ``secrets`` stored in the runtime's Secrets Manager."""
    client = runtime.client("secretsmanager")
    for name, value in secrets.items():
        client.create_secret(Name=name, SecretString=value)


@contextmanager
def runtime_with_secrets(secrets: dict[str, str]) -> Iterator[Any]:
    """A :class:`LocalRuntime` (no time scale) whose Secrets Manager holds ``secrets``."""
    from relayflow.local import LocalRuntime

    with LocalRuntime() as runtime:
        create_secrets(runtime, secrets)
        yield runtime


def create_orders_table(dynamodb: Any) -> str:
    """A DynamoDB table ``orders`` keyed by ``pk`` (hash) and ``sk`` (range), both strings,
    billed per request; its name."""
    dynamodb.create_table(
        TableName="orders",
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return "orders"
