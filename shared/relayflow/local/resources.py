"""Resources a workflow expects to exist, created in moto before a local run.

On AWS, the tables, queues and buses a workflow's tools write to belong to the user's own
stacks. Locally they must exist in moto first; a resources file declares them::

    dynamodb_tables:
      - {name: orders, hash_key: pk, range_key: sk}
    sqs_queues: [order-events]
    sns_topics: [order-alerts]
    event_buses: [shop]
    s3_buckets: [invoices]
    ses_identities: [orders@shop.example]
    secrets: {relayflow/local/local/billing-token: "demo-token"}
    parameters: {/relayflow/local/local/billing/key: "demo-key"}
    tenant: local

``tenant`` (default ``local``, the tenant a local run acts for) owns the queues, topics and
buses: they are tagged ``relayflow-tenant=<tenant>``, as a tenant's resources are on AWS. Its
steps reach S3 keys under ``<tenant>/`` and DynamoDB items whose partition key starts with
``<tenant>#`` (docs/security.md, "Tenant isolation").

``relayflow run FILE --resources RESOURCES.yaml`` applies it; creating is idempotent. Secrets
and parameters keep their full names: a local run acts for the tenant ``local``, whose
``{name: billing-token}`` is ``relayflow/local/local/billing-token`` (the stage ``local``, then
the tenant: docs/security.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from relayflow.adapters.aws import client


class TableSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    hash_key: str = "pk"
    range_key: str | None = None
    items: list[dict[str, Any]] = Field(
        default_factory=list, description="Items put after the table exists (plain JSON)."
    )


class LocalResources(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dynamodb_tables: list[TableSpec] = Field(default_factory=list)
    sqs_queues: list[str] = Field(default_factory=list)
    sns_topics: list[str] = Field(default_factory=list)
    event_buses: list[str] = Field(default_factory=list)
    s3_buckets: list[str] = Field(default_factory=list)
    ses_identities: list[str] = Field(default_factory=list)
    secrets: dict[str, str] = Field(default_factory=dict, description="Local demo values only.")
    parameters: dict[str, str] = Field(default_factory=dict, description="SSM SecureStrings.")
    tenant: str = Field(
        "local",
        min_length=1,
        description="The tenant whose queues, topics and buses these are (tagged "
        "relayflow-tenant).",
    )


def load_resources(path: str | Path) -> LocalResources:
    """Read a resources file. Raises OSError, ``ValueError`` (not UTF-8, refused by the intake
    policy: YAML aliases, depth; or pydantic's ValidationError) or ``yaml.YAMLError``."""
    from relayflow.intake import check_value, check_yaml, decode_utf8

    text = decode_utf8(Path(path).read_bytes(), "the file")
    check_yaml(text)
    data = yaml.safe_load(text) or {}
    check_value(data)
    return LocalResources.model_validate(data)


def _exists(call: Any, *args: Any, **kwargs: Any) -> bool:
    try:
        call(*args, **kwargs)
    except Exception:  # botocore ClientError: not found
        return False
    return True


def provision(resources: LocalResources) -> dict[str, list[str]]:
    """Create every declared resource that does not exist yet; return what was created.
    Call it while a :class:`~relayflow.local.LocalRuntime` is open (moto is active)."""
    created: dict[str, list[str]] = {}
    dynamodb = client("dynamodb")
    for table in resources.dynamodb_tables:
        if _exists(dynamodb.describe_table, TableName=table.name):
            continue
        keys = [{"AttributeName": table.hash_key, "KeyType": "HASH"}]
        attributes = [{"AttributeName": table.hash_key, "AttributeType": "S"}]
        if table.range_key:
            keys.append({"AttributeName": table.range_key, "KeyType": "RANGE"})
            attributes.append({"AttributeName": table.range_key, "AttributeType": "S"})
        dynamodb.create_table(
            TableName=table.name,
            KeySchema=keys,
            AttributeDefinitions=attributes,
            BillingMode="PAY_PER_REQUEST",
        )
        created.setdefault("dynamodb_tables", []).append(table.name)
        if table.items:
            from relayflow.tools.aws import to_dynamodb

            for item in table.items:
                dynamodb.put_item(TableName=table.name, Item=to_dynamodb(item, "item"))
    from relayflow.tenancy import TENANT_TAG

    owner = resources.tenant
    for name in resources.sqs_queues:
        client("sqs").create_queue(QueueName=name, tags={TENANT_TAG: owner})
        created.setdefault("sqs_queues", []).append(name)
    for name in resources.sns_topics:
        client("sns").create_topic(Name=name, Tags=[{"Key": TENANT_TAG, "Value": owner}])
        created.setdefault("sns_topics", []).append(name)
    events = client("events")
    for name in resources.event_buses:
        if not _exists(events.describe_event_bus, Name=name):
            events.create_event_bus(Name=name, Tags=[{"Key": TENANT_TAG, "Value": owner}])
            created.setdefault("event_buses", []).append(name)
    s3 = client("s3")
    for name in resources.s3_buckets:
        if not _exists(s3.head_bucket, Bucket=name):
            s3.create_bucket(Bucket=name)
            created.setdefault("s3_buckets", []).append(name)
    for identity in resources.ses_identities:
        # Both APIs: the classic one and SES v2 keep separate identity lists in moto.
        client("ses").verify_email_identity(EmailAddress=identity)
        sesv2 = client("sesv2")
        if not _exists(sesv2.get_email_identity, EmailIdentity=identity):
            sesv2.create_email_identity(EmailIdentity=identity)
        created.setdefault("ses_identities", []).append(identity)
    secrets = client("secretsmanager")
    for name, value in resources.secrets.items():
        if _exists(secrets.describe_secret, SecretId=name):
            secrets.put_secret_value(SecretId=name, SecretString=value)
        else:
            secrets.create_secret(Name=name, SecretString=value)
        created.setdefault("secrets", []).append(name)
    for name, value in resources.parameters.items():
        client("ssm").put_parameter(Name=name, Value=value, Type="SecureString", Overwrite=True)
        created.setdefault("parameters", []).append(name)
    return created
