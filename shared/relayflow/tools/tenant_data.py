"""A tenant's own tool data: the one rule per service that keeps tenant alpha's objects, items,
queues, topics, buses, functions and state machines out of tenant beta's steps.

On AWS ``TenantStepRole`` holds these rules in IAM (template.yaml, its ``Tool*`` statements,
over ``${aws:PrincipalTag/relayflow-tenant}``); without a tenant step role (the local runtime)
:func:`check_tenant_data` holds the same rules in code, before the call reaches moto:

* **S3**: a tenant's keys start with ``<tenant>/`` and hold no further ``/<tenant>/`` (in an
  IAM resource ARN ``*`` also matches ``/``, so the bucket wildcard of
  ``<prefix>*/<tenant>/*`` would reach ``beta/<tenant>/…``; the role denies such keys, and so
  does this check, for the tenant's own folder too);
* **DynamoDB**: the partition key value starts with ``<tenant>#`` (``dynamodb:LeadingKeys``);
  a query names it in its key condition, and a secondary index cannot be scoped, so it is
  refused (as is a scan, which is no tool);
* **SQS, SNS, EventBridge buses, Lambda, Step Functions**: the resource is tagged
  ``relayflow-tenant=<tenant>`` (``aws:ResourceTag``).

A resource an operator shares between tenants on purpose is listed in
``settings.shared_tool_resources`` (the template's ``SharedToolResources``), by ARN (an S3
object's ARN matched as IAM matches it); it is reached without these checks, but for the S3
rule against a further ``/<tenant>/``, which the role's deny keeps for shared buckets too.
A resource that does not exist is left to the call, which fails as not found
(``Relayflow.HttpError``): there is nothing to reach. Relayflow's own resources are
:mod:`relayflow.tools.guard`'s, refused before this check.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from relayflow.tenancy import TENANT_TAG, TenantBoundary
from relayflow.tools.guard import TOOL_RESOURCES, Kind, resource_name

#: The ARN service of each kind of resource, to match a shared resource's ARN.
_SERVICES: dict[Kind, str] = {
    "table": "dynamodb",
    "bucket": "s3",
    "queue": "sqs",
    "topic": "sns",
    "bus": "events",
    "function": "lambda",
    "state_machine": "states",
}

#: The scheme each kind of resource is scoped by, as a refusal names it.
SCHEMES: dict[Kind, str] = {
    "bucket": "S3 keys of a tenant start with '<tenant>/' (and hold no further '/<tenant>/')",
    "table": "DynamoDB partition keys of a tenant start with '<tenant>#'",
    "queue": f"a tenant's queues are tagged {TENANT_TAG}=<tenant>",
    "topic": f"a tenant's topics are tagged {TENANT_TAG}=<tenant>",
    "bus": f"a tenant's event buses are tagged {TENANT_TAG}=<tenant>",
    "function": f"a tenant's functions are tagged {TENANT_TAG}=<tenant>",
    "state_machine": f"a tenant's state machines are tagged {TENANT_TAG}=<tenant>",
}

#: The codes a tag lookup answers for a resource that does not exist, by service.
_NOT_FOUND = frozenset(
    {
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "NotFound",
        "NotFoundException",
        "ResourceNotFound",
        "ResourceNotFoundException",
        "StateMachineDoesNotExist",
    }
)

#: ``attribute = :value`` (or the other way round) in a key condition.
_EQUALS = re.compile(r"([#\w.-]+)\s*=\s*(:[\w-]+)|(:[\w-]+)\s*=\s*([#\w.-]+)")


def check_tenant_data(
    tool: str,
    args: Any,
    tenant: str,
    *,
    dry_run: bool = False,
    lookup: Callable[[str], Any] | None = None,
) -> None:
    """Refuse ``tool`` with parsed ``args`` when it reaches data outside ``tenant``'s
    (:class:`~relayflow.tenancy.TenantBoundary`, ``details.rule`` ``tenant-boundary``,
    ``details.scheme`` naming the rule). Nothing is checked when a tenant step role is set
    (IAM holds the rules there) or the resource is declared shared.

    ``lookup(service)`` is the client the key schema and tags are read with (the tenant's,
    by default). A dry run that cannot read them lets the call through: nothing is reached."""
    from relayflow.settings import get_settings

    named = TOOL_RESOURCES.get(tool)
    settings = get_settings()
    if named is None or settings.tenant_step_role_arn:
        return
    field, kind = named
    identifier = str(getattr(args, field, "") or "")
    shared = _shared(kind, identifier, args, settings.shared_tool_resources)
    if kind == "bucket":
        _check_key(tool, args, tenant, shared=shared)
        return
    if shared:
        return
    reader = lookup or _tenant_lookup(tenant)
    if kind == "table":
        _check_partition(tool, args, tenant, reader, dry_run)
    else:
        _check_tag(tool, kind, field, identifier, tenant, reader, dry_run)


def refusal(tool: str, kind: Kind, tenant: str, what: str, field: str) -> TenantBoundary:
    """The refusal of ``tool`` reaching ``what`` outside ``tenant``'s data of ``kind``."""
    scheme = SCHEMES[kind]
    return TenantBoundary(
        f"{tool}: {what} is outside the data of tenant {tenant!r}: "
        f"{scheme.replace('<tenant>', tenant)} (docs/security.md, 'Tenant isolation'; a "
        "resource shared on purpose is listed in SharedToolResources)",
        tool=tool,
        field=field,
        scheme=scheme,
    )


def _tenant_lookup(tenant: str) -> Callable[[str], Any]:
    from relayflow.adapters.tenant_aws import tenant_client

    return lambda service: tenant_client(service, tenant)


def _shared(kind: Kind, identifier: str, args: Any, shared: list[str]) -> bool:
    """Whether the resource is listed shared: by name, and for S3 the object's ARN matched
    as IAM matches it (``arn:aws:s3:::<bucket>/*``, ``…/<folder>/*``)."""
    if not identifier:
        return False
    if kind == "bucket":
        arn = f"arn:aws:s3:::{identifier}/{args.key}"
        return any(_wildcard(pattern).fullmatch(arn) for pattern in shared)
    name = resource_name(kind, identifier)
    for arn in shared:
        parts = arn.split(":")
        if len(parts) > 2 and parts[2] == _SERVICES[kind] and resource_name(kind, arn) == name:
            return True
    return False


def _wildcard(pattern: str) -> re.Pattern[str]:
    """IAM's resource wildcards: ``*`` any run of characters (``/`` too), ``?`` one."""
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.DOTALL)


# --------------------------------------------------------------------------- S3


def tenant_key_problem(key: str, tenant: str) -> str | None:
    """Why ``key`` is not under ``tenant``'s S3 folder, or ``None``."""
    if not key.startswith(f"{tenant}/"):
        return f"the key does not start with '{tenant}/'"
    if f"/{tenant}/" in key:
        return f"the key holds a further '/{tenant}/' (refused on AWS too: see docs/security.md)"
    return None


def _check_key(tool: str, args: Any, tenant: str, *, shared: bool) -> None:
    """A shared object may lie anywhere but, as on AWS (the role's deny holds for shared
    buckets too), never under a further ``/<tenant>/``."""
    key = str(args.key)
    problem = (f"/{tenant}/" in key) if shared else tenant_key_problem(key, tenant) is not None
    if problem:
        raise refusal(tool, "bucket", tenant, f"s3://{args.bucket}/{key}", "key")


# --------------------------------------------------------------------------- DynamoDB


def _check_partition(
    tool: str, args: Any, tenant: str, reader: Callable[[str], Any], dry_run: bool
) -> None:
    if getattr(args, "index", None):
        raise TenantBoundary(
            f"{tool}: a query of index {args.index!r} cannot be scoped to tenant {tenant!r} "
            f"({SCHEMES['table']}; only the table itself is granted)",
            tool=tool,
            field="index",
            scheme=SCHEMES["table"],
        )
    hash_key = _hash_key(args.table, reader, dry_run)
    if hash_key is None:
        return
    if tool == "aws.dynamodb.put_item":
        value, field = args.item.get(hash_key), f"item.{hash_key}"
    elif tool == "aws.dynamodb.query":
        value, field = _queried_partition(args, hash_key), "key_condition"
    else:
        value, field = args.key.get(hash_key), f"key.{hash_key}"
    if not (isinstance(value, str) and value.startswith(f"{tenant}#")):
        raise refusal(tool, "table", tenant, f"partition key {hash_key}={value!r}", field)


def _hash_key(table: str, reader: Callable[[str], Any], dry_run: bool) -> str | None:
    """The table's partition key attribute; ``None`` when the table does not exist (the call
    itself then fails as AWS answers it) or, in a dry run, cannot be described. Other
    botocore failures propagate: the caller (inside ``aws_call``) maps them to named errors."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        described = reader("dynamodb").describe_table(TableName=table)["Table"]
    except ClientError as exc:
        code = str((exc.response.get("Error") or {}).get("Code") or "")
        if dry_run or code == "ResourceNotFoundException":
            return None
        raise
    except BotoCoreError:
        if dry_run:
            return None
        raise
    for key in described.get("KeySchema") or []:
        if key.get("KeyType") == "HASH":
            return str(key["AttributeName"])
    return None


def _queried_partition(args: Any, hash_key: str) -> Any:
    """The value a query's key condition fixes the partition key to (``None``: none)."""
    names = args.names or {}
    for match in _EQUALS.finditer(args.key_condition):
        attribute = match.group(1) or match.group(4)
        placeholder = match.group(2) or match.group(3)
        if names.get(attribute, attribute) == hash_key:
            return (args.values or {}).get(placeholder)
    return None


# --------------------------------------------------------------------------- tags


def _check_tag(
    tool: str,
    kind: Kind,
    field: str,
    identifier: str,
    tenant: str,
    reader: Callable[[str], Any],
    dry_run: bool,
) -> None:
    from botocore.exceptions import ClientError

    try:
        tags = _tags(kind, identifier, reader)
    except ClientError as exc:
        code = str((exc.response.get("Error") or {}).get("Code") or "")
        if dry_run or code in _NOT_FOUND:
            return  # nothing to reach: the call itself fails as not found
        tags = None
    except Exception:  # botocore: the tags cannot be read
        if dry_run:
            return
        tags = None
    if tags is None or tags.get(TENANT_TAG) != tenant:
        owner = (tags or {}).get(TENANT_TAG)
        found = f"{TENANT_TAG}={owner}" if owner else f"missing, or not tagged {TENANT_TAG}"
        raise refusal(tool, kind, tenant, f"{identifier!r} ({found})", field)


def _tags(kind: Kind, identifier: str, reader: Callable[[str], Any]) -> dict[str, str] | None:
    """The resource's tags as a plain mapping."""
    if kind == "queue":
        return dict(reader("sqs").list_queue_tags(QueueUrl=identifier).get("Tags") or {})
    if kind == "topic":
        answer = reader("sns").list_tags_for_resource(ResourceArn=identifier)
        return {t["Key"]: t["Value"] for t in answer.get("Tags") or []}
    if kind == "bus":
        events = reader("events")
        arn = identifier
        if not identifier.startswith("arn:"):
            arn = events.describe_event_bus(Name=identifier)["Arn"]
        answer = events.list_tags_for_resource(ResourceARN=arn)
        return {t["Key"]: t["Value"] for t in answer.get("Tags") or []}
    if kind == "function":
        answer = reader("lambda").list_tags(Resource=_function_arn(identifier))
        return dict(answer.get("Tags") or {})
    if kind == "state_machine":
        arn = ":".join(identifier.split(":")[:7])  # without an alias or version
        sfn = reader("stepfunctions")
        sfn.describe_state_machine(stateMachineArn=arn)  # (moto lists no tags of a missing one)
        answer = sfn.list_tags_for_resource(resourceArn=arn)
        return {t["key"]: t["value"] for t in answer.get("tags") or []}
    return None


def _function_arn(identifier: str) -> str:
    """A full function ARN (no qualifier) for a name, partial ARN or ARN, as given."""
    from relayflow.naming import LOCAL_ACCOUNT
    from relayflow.settings import get_settings

    parts = identifier.split(":")
    name = parts[parts.index("function") + 1] if "function" in parts else parts[0]
    return f"arn:aws:lambda:{get_settings().region}:{LOCAL_ACCOUNT}:function:{name}"
