"""The table's schema, as ``template.yaml`` declares ``RelayflowTable``.

Tests and ``relayflow serve`` build their table with :func:`create_table`;
``tests/unit/test_dal_keys.py`` checks that this schema and the template agree.
"""

from __future__ import annotations

from typing import Any

GSI1 = "GSI1"
TTL_ATTRIBUTE = "expires_at"

ATTRIBUTE_DEFINITIONS: list[dict[str, str]] = [
    {"AttributeName": "pk", "AttributeType": "S"},
    {"AttributeName": "sk", "AttributeType": "S"},
    {"AttributeName": "gsi1pk", "AttributeType": "S"},
    {"AttributeName": "gsi1sk", "AttributeType": "S"},
]
KEY_SCHEMA: list[dict[str, str]] = [
    {"AttributeName": "pk", "KeyType": "HASH"},
    {"AttributeName": "sk", "KeyType": "RANGE"},
]
GLOBAL_SECONDARY_INDEXES: list[dict[str, Any]] = [
    {
        "IndexName": GSI1,
        "KeySchema": [
            {"AttributeName": "gsi1pk", "KeyType": "HASH"},
            {"AttributeName": "gsi1sk", "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "ALL"},
    }
]


def create_table(client: Any, table_name: str | None = None) -> str:
    """Create the Relayflow table (on demand, GSI1, TTL on ``expires_at``) unless it exists;
    wait until it is active. Returns the table name (``settings.table_name`` by default)."""
    from botocore.exceptions import ClientError

    from relayflow.settings import get_settings

    name = table_name or get_settings().table_name
    try:
        client.create_table(
            TableName=name,
            AttributeDefinitions=ATTRIBUTE_DEFINITIONS,
            KeySchema=KEY_SCHEMA,
            GlobalSecondaryIndexes=GLOBAL_SECONDARY_INDEXES,
            BillingMode="PAY_PER_REQUEST",
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceInUseException":
            raise
        return name
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1})
    client.update_time_to_live(
        TableName=name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
    )
    return name
