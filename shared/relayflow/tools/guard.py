"""Relayflow's own resources, as an ``aws.*`` tool names them: the one resolver that tells a
tenant's resources from Relayflow's.

A step's AWS calls act for its tenant. Relayflow's table, payload bucket, state machines,
functions, bus, schedule group, queues and topics belong to every tenant at once: a tool that
read the table would read every tenant's runs, one that started a Relayflow state machine
would run another tenant's workflow. On AWS the tenant identity
(:mod:`relayflow.adapters.tenant_aws`) is denied all of them; locally, and on AWS before any
call, :func:`check_tool_call` refuses them in code. The only way onto one of them is
Relayflow's stamped path: ``aws.events.put_events`` on the Relayflow bus, whose event gets the
tenant stamped in its detail and may not claim a reserved source or detail type
(:func:`relayflow.triggers.publish.tenant_event`).

A resource is Relayflow's when its name is one the settings name (``table_name``,
``payload_bucket``, ``event_bus_name``, ``schedule_group_name``) or, for a table, bucket,
state machine, function, queue or topic, starts with ``relayflow`` (the stack names every
one of them ``relayflow-<stage>-…``, and ``ToolResourcePrefix`` may not start so). There is
one Relayflow bus and one schedule group, so only their exact names are Relayflow's. Names
are read from every spelling AWS accepts: a name, a full ARN, a partial ARN
(``123456789012:function:relayflow-code``), a name with a qualifier or alias
(``relayflow-code:live``, ``…:stateMachine:relayflow-dev-acme_orders:live``), a queue URL.
"""

from __future__ import annotations

from typing import Any, Literal

from relayflow.tenancy import TenantBoundary

Kind = Literal["table", "bucket", "state_machine", "function", "bus", "queue", "topic", "group"]

#: Every Relayflow resource name starts with it (template.yaml, relayflow.naming).
OWN_PREFIX = "relayflow"

#: For each tool, the argument that names a resource and what kind of resource it names.
TOOL_RESOURCES: dict[str, tuple[str, Kind]] = {
    "aws.dynamodb.put_item": ("table", "table"),
    "aws.dynamodb.get_item": ("table", "table"),
    "aws.dynamodb.update_item": ("table", "table"),
    "aws.dynamodb.query": ("table", "table"),
    "aws.s3.put_object": ("bucket", "bucket"),
    "aws.s3.get_object": ("bucket", "bucket"),
    "aws.lambda.invoke": ("function", "function"),
    "aws.stepfunctions.start_execution": ("state_machine_arn", "state_machine"),
    "aws.events.put_events": ("bus", "bus"),
    "aws.sqs.send_message": ("queue_url", "queue"),
    "aws.sns.publish": ("topic_arn", "topic"),
}


def resource_name(kind: Kind, identifier: str) -> str:
    """The bare name inside ``identifier``, whichever way it is spelled (see the module
    docstring), lower-cased for comparison (AWS names are case-sensitive, but a near-miss in
    case is never a tenant's own resource worth reaching)."""
    text = identifier.strip()
    if kind == "queue" and "://" in text:
        text = text.rstrip("/").rsplit("/", 1)[-1]  # https://sqs.<region>…/<account>/<name>
    elif text.startswith("arn:") or ":" in text:
        text = _from_arn(kind, text)
    return text.strip().lower()


def _from_arn(kind: Kind, text: str) -> str:
    parts = text.split(":")
    if kind == "function":
        # arn:aws:lambda:r:a:function:NAME[:Q], a:function:NAME[:Q], NAME[:Q]
        if "function" in parts:
            at = parts.index("function")
            return parts[at + 1] if len(parts) > at + 1 else ""
        return parts[0]
    if kind == "state_machine":
        # arn:aws:states:r:a:stateMachine:NAME[:alias|version], and execution ARNs
        for marker in ("stateMachine", "execution", "express"):
            if marker in parts:
                at = parts.index(marker)
                return parts[at + 1] if len(parts) > at + 1 else ""
        return parts[-1]
    resource = parts[5] if len(parts) > 5 else parts[-1]
    if kind == "table":
        # arn:aws:dynamodb:r:a:table/NAME[/index/I]
        return resource.split("/")[1] if resource.startswith("table/") else resource
    if kind == "bus":
        # arn:aws:events:r:a:event-bus/NAME
        return resource.split("/", 1)[1] if resource.startswith("event-bus/") else resource
    if kind == "bucket":
        # arn:aws:s3:::NAME[/key]
        return resource.split("/", 1)[0]
    if kind == "group":
        return resource.split("/", 1)[1] if resource.startswith("schedule-group/") else resource
    return resource  # sqs and sns ARNs end with the name


def own_resource(kind: Kind, identifier: str) -> bool:
    """Whether ``identifier`` names one of Relayflow's own resources of ``kind``."""
    from relayflow.settings import get_settings

    name = resource_name(kind, identifier)
    settings = get_settings()
    configured = {
        "table": settings.table_name,
        "bucket": settings.payload_bucket,
        "bus": settings.event_bus_name,
        "group": settings.schedule_group_name,
    }.get(kind)
    if configured is not None and name == configured.strip().lower():
        return True
    # There is one Relayflow bus and one schedule group: other names are a tenant's own.
    return kind not in ("bus", "group") and name.startswith(OWN_PREFIX)


def check_tool_call(tool: str, args: Any) -> bool:
    """Refuse ``tool`` with parsed ``args`` when it names a Relayflow resource
    (:class:`~relayflow.tenancy.TenantBoundary`). Returns ``True`` for the one call that may
    reach one: ``aws.events.put_events`` on the Relayflow bus, which the caller sends through
    the stamped path."""
    named = TOOL_RESOURCES.get(tool)
    if named is None:
        return False
    field, kind = named
    identifier = str(getattr(args, field, "") or "")
    if not own_resource(kind, identifier):
        return False
    if kind == "bus":
        return True
    raise TenantBoundary(
        f"{tool}: {identifier!r} is one of Relayflow's own resources ({kind.replace('_', ' ')});"
        " a step reaches only its tenant's resources",
        tool=tool,
        field=field,
    )
