"""Built-in AWS actions: one small pydantic args model and one function per tool.

Every call goes through :func:`relayflow.adapters.aws.client`, and every botocore failure
through :func:`aws_error`, the one mapping from AWS errors to Relayflow's named errors:

* throttling, 5xx, 429 and connection errors → ``Relayflow.Transient`` (retryable);
* validation errors (botocore's client-side check, ``ValidationException`` and its kin)
  → ``Relayflow.InvalidArgs``;
* every other 4xx (``ResourceNotFoundException``, ``ConditionalCheckFailedException``,
  ``AccessDenied`` …) → ``Relayflow.HttpError`` with ``details`` ``{tool, service, code,
  status}``.

boto3 and botocore are imported inside the functions that need them, so importing this
module (``check_tool`` does) costs only pydantic.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from relayflow.adapters.aws import client
from relayflow.errors import HttpError, InvalidArgsError, TransientError

#: AWS error codes that mean "try again later".
TRANSIENT_CODES = frozenset(
    {
        "EC2ThrottledException",
        "InternalError",
        "InternalFailure",
        "InternalServerError",
        "InternalServerException",
        "PriorRequestNotComplete",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "RequestTimeout",
        "RequestTimeoutException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "TransactionInProgressException",
    }
)
#: AWS error codes that mean "these arguments are wrong".
INVALID_ARGS_CODES = frozenset(
    {
        "InvalidArgument",
        "InvalidArn",
        "InvalidExecutionInput",
        "InvalidName",
        "InvalidParameter",
        "InvalidParameterCombination",
        "InvalidParameterException",
        "InvalidParameterValue",
        "InvalidParameterValueException",
        "InvalidRequestContentException",
        "InvalidRequestException",
        "MissingParameter",
        "SerializationException",
        "ValidationError",
        "ValidationException",
    }
)
#: ``aws.s3.get_object`` refuses bodies larger than this (a step output is a JSON value).
MAX_GET_OBJECT_BYTES = 5 * 1024 * 1024
#: The AWS tools that only read: the ones a tool step's ``dry_run: read`` may let run in a
#: dry run.
READ_ONLY_AWS_TOOLS = frozenset(
    {"aws.dynamodb.get_item", "aws.dynamodb.query", "aws.s3.get_object"}
)


def aws_error(exc: Exception, *, tool: str, service: str) -> Exception:
    """The named error for a botocore failure of ``tool`` (see the module docstring).

    Anything that is not a botocore error, and botocore errors that are configuration
    faults of the function itself (missing credentials), are returned unchanged."""
    from botocore.exceptions import (
        ClientError,
        HTTPClientError,
        ParamValidationError,
    )
    from botocore.exceptions import ConnectionError as BotoConnectionError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error") or {}
        code = str(error.get("Code") or "Unknown")
        message = str(error.get("Message") or "").strip()
        status = int((exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
        text = f"{tool}: {code}" + (f": {message}" if message else "")
        details = {"tool": tool, "service": service, "code": code, "status": status}
        if code in TRANSIENT_CODES or status == 429 or status >= 500:
            return TransientError(text, **details)
        if code in INVALID_ARGS_CODES:
            return InvalidArgsError(text, **details)
        return HttpError(text, **details)
    if isinstance(exc, BotoConnectionError | HTTPClientError):
        return TransientError(f"{tool}: cannot reach {service}: {exc}", tool=tool, service=service)
    if isinstance(exc, ParamValidationError):
        return InvalidArgsError(f"{tool}: {exc}", tool=tool, service=service)
    return exc


@contextmanager
def aws_call(tool: str, service: str, tenant: str | None = None) -> Iterator[Any]:
    """Yield the ``service`` client acting for ``tenant`` (``None``: Relayflow's own, for its
    stamped paths); botocore failures inside, STS's included, leave as named errors."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        if tenant is None:
            yield client(service)
        else:
            from relayflow.adapters.tenant_aws import tenant_client

            yield tenant_client(service, tenant)
    except (ClientError, BotoCoreError) as exc:
        mapped = aws_error(exc, tool=tool, service=service)
        if mapped is exc:
            raise
        raise mapped from exc


# --------------------------------------------------------------------------- conversions


def to_text(value: Any) -> str:
    """A message body: strings as they are, every other value as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _to_decimal(value: Any, where: str) -> Any:
    """JSON → what boto3's TypeSerializer accepts (floats become Decimals)."""
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgsError(f"{where}: DynamoDB cannot store {value!r}", field=where)
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {str(k): _to_decimal(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_decimal(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def to_dynamodb(value: dict[str, Any], where: str) -> dict[str, Any]:
    """A plain JSON object → DynamoDB attribute values (``{"S": …}``, ``{"N": …}`` …)."""
    from boto3.dynamodb.types import TypeSerializer

    serializer = TypeSerializer()
    return {key: serializer.serialize(item) for key, item in _to_decimal(value, where).items()}


def _plain(value: Any) -> Any:
    """Deserialised DynamoDB values → JSON: Decimal → int or float, sets → sorted lists,
    binary → base64 text."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_plain(v) for v in value), key=lambda v: (str(type(v)), v))
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    binary = getattr(value, "value", None)
    if isinstance(binary, bytes):  # boto3.dynamodb.types.Binary
        return base64.b64encode(binary).decode()
    return value


def from_dynamodb(item: dict[str, Any] | None) -> dict[str, Any] | None:
    """DynamoDB attribute values → a plain JSON object (``None`` stays ``None``)."""
    if item is None:
        return None
    from boto3.dynamodb.types import TypeDeserializer

    deserializer = TypeDeserializer()
    return {key: _plain(deserializer.deserialize(value)) for key, value in item.items()}


def _expression_extras(
    names: dict[str, str] | None, values: dict[str, Any] | None
) -> dict[str, Any]:
    extras: dict[str, Any] = {}
    if names:
        extras["ExpressionAttributeNames"] = names
    if values:
        extras["ExpressionAttributeValues"] = to_dynamodb(values, "values")
    return extras


# --------------------------------------------------------------------------- args models


class ToolArgs(BaseModel):
    """Base of every AWS tool's args: unknown names are refused, so typos surface."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _Expressions(ToolArgs):
    names: dict[str, str] | None = Field(
        None, description="ExpressionAttributeNames, e.g. {'#s': 'status'}."
    )
    values: dict[str, Any] | None = Field(
        None, description="ExpressionAttributeValues as plain JSON, e.g. {':s': 'paid'}."
    )


class PutItemArgs(_Expressions):
    table: str = Field(min_length=1, description="Table name or ARN.")
    item: dict[str, Any] = Field(description="The item as plain JSON.")
    condition: str | None = Field(None, description="ConditionExpression.")


class GetItemArgs(ToolArgs):
    table: str = Field(min_length=1)
    key: dict[str, Any] = Field(min_length=1, description="Primary key as plain JSON.")
    consistent: bool = Field(False, description="Strongly consistent read.")


class UpdateItemArgs(_Expressions):
    table: str = Field(min_length=1)
    key: dict[str, Any] = Field(min_length=1)
    update: str = Field(min_length=1, description="UpdateExpression, e.g. 'SET #s = :s'.")
    condition: str | None = None
    return_values: Literal["NONE", "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"] = "ALL_NEW"


class QueryArgs(_Expressions):
    table: str = Field(min_length=1)
    key_condition: str = Field(min_length=1, description="KeyConditionExpression.")
    values: dict[str, Any] = Field(min_length=1, description="Values of the expressions.")
    filter: str | None = Field(None, description="FilterExpression.")
    index: str | None = Field(None, description="Secondary index name.")
    limit: int | None = Field(None, ge=1, le=1000)
    scan_forward: bool = True
    consistent: bool = False
    start_key: dict[str, Any] | None = Field(None, description="last_key of a previous page.")


class SendMessageArgs(ToolArgs):
    queue_url: str = Field(min_length=1)
    body: Any = Field(description="Sent as is when a string, else as compact JSON.")
    group_id: str | None = Field(None, description="FIFO queues: MessageGroupId.")
    dedup_id: str | None = Field(None, description="FIFO queues: MessageDeduplicationId.")
    delay_seconds: int | None = Field(None, ge=0, le=900)
    attributes: dict[str, str] | None = Field(None, description="String message attributes.")


class PublishArgs(ToolArgs):
    topic_arn: str = Field(min_length=1)
    message: Any = Field(description="Sent as is when a string, else as compact JSON.")
    subject: str | None = Field(None, max_length=100)
    group_id: str | None = None
    dedup_id: str | None = None
    attributes: dict[str, str] | None = None


class PutEventsArgs(ToolArgs):
    bus: str = Field("default", min_length=1, description="Event bus name or ARN.")
    source: str = Field(min_length=1)
    detail_type: str = Field(min_length=1)
    detail: dict[str, Any] = Field(default_factory=dict)
    resources: list[str] = Field(default_factory=list)


class SendEmailArgs(ToolArgs):
    sender: str = Field(alias="from", min_length=3, description="A verified SES identity.")
    to: list[str] = Field(min_length=1, max_length=50)
    cc: list[str] = Field(default_factory=list)
    bcc: list[str] = Field(default_factory=list)
    reply_to: list[str] = Field(default_factory=list)
    subject: str = Field(min_length=1)
    text: str | None = None
    html: str | None = None
    configuration_set: str | None = None

    @model_validator(mode="after")
    def _has_body(self) -> SendEmailArgs:
        if self.text is None and self.html is None:
            raise ValueError("an email needs text, html or both")
        return self


class PutObjectArgs(ToolArgs):
    bucket: str = Field(min_length=1)
    key: str = Field(min_length=1)
    body: Any = Field(description="A string is stored as text, any other value as JSON.")
    content_type: str | None = None


class GetObjectArgs(ToolArgs):
    bucket: str = Field(min_length=1)
    key: str = Field(min_length=1)


class InvokeArgs(ToolArgs):
    function: str = Field(
        min_length=1, description="Function name or ARN (not Relayflow's: relayflow-*)."
    )
    payload: Any = Field(None, description="The event, sent as JSON.")
    qualifier: str | None = Field(None, description="Version or alias.")


class StartExecutionArgs(ToolArgs):
    state_machine_arn: str = Field(min_length=1)
    input: Any = Field(default_factory=dict, description="Execution input (JSON).")
    name: str | None = Field(None, min_length=1, max_length=80)


# --------------------------------------------------------------------------- the tools


@dataclass(frozen=True)
class AwsTool:
    """One catalogue entry: its args model and the function that performs it."""

    name: str
    service: str
    args_model: type[ToolArgs]
    action: Callable[[Any, Any, str], Any]
    summary: str
    #: The IAM action the tool function's role needs for this tool.
    iam_action: str

    def required_args(self) -> list[str]:
        """Arg names that have no default (as a definition spells them)."""
        return [
            field.alias or name
            for name, field in self.args_model.model_fields.items()
            if field.is_required()
        ]

    def arg_names(self) -> list[str]:
        return [field.alias or name for name, field in self.args_model.model_fields.items()]


AWS_TOOLS: dict[str, AwsTool] = {}


def _tool(
    name: str, service: str, args_model: type[ToolArgs], summary: str, iam_action: str
) -> Callable[[Callable[[Any, Any, str], Any]], Callable[[Any, Any, str], Any]]:
    def register(action: Callable[[Any, Any, str], Any]) -> Callable[[Any, Any, str], Any]:
        AWS_TOOLS[name] = AwsTool(name, service, args_model, action, summary, iam_action)
        return action

    return register


@_tool(
    "aws.dynamodb.put_item",
    "dynamodb",
    PutItemArgs,
    "Write an item, optionally under a condition.",
    "dynamodb:PutItem",
)
def _put_item(ddb: Any, args: PutItemArgs, tool: str) -> dict[str, Any]:
    params: dict[str, Any] = {"TableName": args.table, "Item": to_dynamodb(args.item, "item")}
    if args.condition:
        params["ConditionExpression"] = args.condition
    ddb.put_item(**params, **_expression_extras(args.names, args.values))
    return {"ok": True}


@_tool(
    "aws.dynamodb.get_item",
    "dynamodb",
    GetItemArgs,
    "Read one item by its key.",
    "dynamodb:GetItem",
)
def _get_item(ddb: Any, args: GetItemArgs, tool: str) -> dict[str, Any]:
    found = ddb.get_item(
        TableName=args.table, Key=to_dynamodb(args.key, "key"), ConsistentRead=args.consistent
    )
    return {"item": from_dynamodb(found.get("Item"))}


@_tool(
    "aws.dynamodb.update_item",
    "dynamodb",
    UpdateItemArgs,
    "Update an item in place.",
    "dynamodb:UpdateItem",
)
def _update_item(ddb: Any, args: UpdateItemArgs, tool: str) -> dict[str, Any]:
    params: dict[str, Any] = {
        "TableName": args.table,
        "Key": to_dynamodb(args.key, "key"),
        "UpdateExpression": args.update,
        "ReturnValues": args.return_values,
    }
    if args.condition:
        params["ConditionExpression"] = args.condition
    updated = ddb.update_item(**params, **_expression_extras(args.names, args.values))
    return {"attributes": from_dynamodb(updated.get("Attributes")) or {}}


@_tool(
    "aws.dynamodb.query",
    "dynamodb",
    QueryArgs,
    "Query a table or index (one page).",
    "dynamodb:Query",
)
def _query(ddb: Any, args: QueryArgs, tool: str) -> dict[str, Any]:
    params: dict[str, Any] = {
        "TableName": args.table,
        "KeyConditionExpression": args.key_condition,
        "ScanIndexForward": args.scan_forward,
        "ConsistentRead": args.consistent,
        **_expression_extras(args.names, args.values),
    }
    if args.filter:
        params["FilterExpression"] = args.filter
    if args.index:
        params["IndexName"] = args.index
    if args.limit:
        params["Limit"] = args.limit
    if args.start_key:
        params["ExclusiveStartKey"] = to_dynamodb(args.start_key, "start_key")
    page = ddb.query(**params)
    items = [from_dynamodb(item) for item in page.get("Items", [])]
    return {
        "items": items,
        "count": len(items),
        "last_key": from_dynamodb(page.get("LastEvaluatedKey")),
    }


@_tool(
    "aws.sqs.send_message",
    "sqs",
    SendMessageArgs,
    "Send one message to a queue.",
    "sqs:SendMessage",
)
def _send_message(sqs: Any, args: SendMessageArgs, tool: str) -> dict[str, Any]:
    params: dict[str, Any] = {"QueueUrl": args.queue_url, "MessageBody": to_text(args.body)}
    if args.group_id:
        params["MessageGroupId"] = args.group_id
    if args.dedup_id:
        params["MessageDeduplicationId"] = args.dedup_id
    if args.delay_seconds is not None:
        params["DelaySeconds"] = args.delay_seconds
    if args.attributes:
        params["MessageAttributes"] = {
            k: {"DataType": "String", "StringValue": v} for k, v in args.attributes.items()
        }
    sent = sqs.send_message(**params)
    output = {"message_id": sent["MessageId"]}
    if sent.get("SequenceNumber"):
        output["sequence_number"] = sent["SequenceNumber"]
    return output


@_tool("aws.sns.publish", "sns", PublishArgs, "Publish a message to a topic.", "sns:Publish")
def _publish(sns: Any, args: PublishArgs, tool: str) -> dict[str, Any]:
    params: dict[str, Any] = {"TopicArn": args.topic_arn, "Message": to_text(args.message)}
    if args.subject:
        params["Subject"] = args.subject
    if args.group_id:
        params["MessageGroupId"] = args.group_id
    if args.dedup_id:
        params["MessageDeduplicationId"] = args.dedup_id
    if args.attributes:
        params["MessageAttributes"] = {
            k: {"DataType": "String", "StringValue": v} for k, v in args.attributes.items()
        }
    return {"message_id": sns.publish(**params)["MessageId"]}


@_tool(
    "aws.events.put_events",
    "events",
    PutEventsArgs,
    "Put one event on an event bus.",
    "events:PutEvents",
)
def _put_events(events: Any, args: PutEventsArgs, tool: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "EventBusName": args.bus,
        "Source": args.source,
        "DetailType": args.detail_type,
        "Detail": json.dumps(args.detail, separators=(",", ":")),
    }
    if args.resources:
        entry["Resources"] = args.resources
    answer = events.put_events(Entries=[entry])
    (first,) = answer.get("Entries") or [{}]
    if answer.get("FailedEntryCount") or first.get("ErrorCode"):
        code = str(first.get("ErrorCode") or "Unknown")
        text = f"{tool}: {code}: {first.get('ErrorMessage') or 'event rejected'}"
        details = {"tool": tool, "service": "events", "code": code, "status": 200}
        if code in TRANSIENT_CODES:
            raise TransientError(text, **details)
        raise HttpError(text, **details)
    return {"event_id": first.get("EventId")}


@_tool(
    "aws.ses.send_email",
    "sesv2",
    SendEmailArgs,
    "Send an email (SES v2, simple content).",
    "ses:SendEmail",
)
def _send_email(ses: Any, args: SendEmailArgs, tool: str) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if args.text is not None:
        body["Text"] = {"Data": args.text, "Charset": "UTF-8"}
    if args.html is not None:
        body["Html"] = {"Data": args.html, "Charset": "UTF-8"}
    destination: dict[str, Any] = {"ToAddresses": args.to}
    if args.cc:
        destination["CcAddresses"] = args.cc
    if args.bcc:
        destination["BccAddresses"] = args.bcc
    params: dict[str, Any] = {
        "FromEmailAddress": args.sender,
        "Destination": destination,
        "Content": {
            "Simple": {"Subject": {"Data": args.subject, "Charset": "UTF-8"}, "Body": body}
        },
    }
    if args.reply_to:
        params["ReplyToAddresses"] = args.reply_to
    if args.configuration_set:
        params["ConfigurationSetName"] = args.configuration_set
    return {"message_id": ses.send_email(**params)["MessageId"]}


@_tool("aws.s3.put_object", "s3", PutObjectArgs, "Store a text or JSON object.", "s3:PutObject")
def _put_object(s3: Any, args: PutObjectArgs, tool: str) -> dict[str, Any]:
    is_text = isinstance(args.body, str)
    default_type = "text/plain; charset=utf-8" if is_text else "application/json"
    stored = s3.put_object(
        Bucket=args.bucket,
        Key=args.key,
        Body=to_text(args.body).encode(),
        ContentType=args.content_type or default_type,
    )
    output = {"etag": str(stored.get("ETag", "")).strip('"')}
    if stored.get("VersionId"):
        output["version_id"] = stored["VersionId"]
    return output


@_tool(
    "aws.s3.get_object", "s3", GetObjectArgs, "Read an object (JSON bodies parsed).", "s3:GetObject"
)
def _get_object(s3: Any, args: GetObjectArgs, tool: str) -> dict[str, Any]:
    from botocore.exceptions import ClientError

    try:
        found = s3.get_object(Bucket=args.bucket, Key=args.key)
    except ClientError as exc:
        mapped = aws_error(exc, tool=tool, service="s3")
        code = str((exc.response.get("Error") or {}).get("Code") or "")
        if code not in ("NoSuchKey", "NoSuchBucket") or mapped is exc:
            raise
        # S3's own message ("The specified key does not exist.") names neither.
        missing = "object" if code == "NoSuchKey" else "bucket"
        raise type(mapped)(
            f"{mapped}: no {missing} s3://{args.bucket}/{args.key}",
            tool=tool,
            service="s3",
            code=code,
            status=404,
        ) from exc
    size = int(found.get("ContentLength") or 0)
    if size > MAX_GET_OBJECT_BYTES:
        found["Body"].close()
        raise InvalidArgsError(
            f"{tool}: s3://{args.bucket}/{args.key} is {size} bytes; the limit is "
            f"{MAX_GET_OBJECT_BYTES}",
            tool=tool,
            size=size,
        )
    raw: bytes = found["Body"].read()
    content_type = str(found.get("ContentType") or "")
    return {
        "body": _decode_object(raw, content_type),
        "content_type": content_type or None,
        "etag": str(found.get("ETag", "")).strip('"'),
        "size": len(raw),
    }


def _decode_object(raw: bytes, content_type: str) -> Any:
    """JSON content types are parsed, text is decoded, anything else is base64 text."""
    media = content_type.split(";")[0].strip().lower()
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode()}
    if media == "application/json" or media.endswith("+json"):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


@_tool(
    "aws.lambda.invoke",
    "lambda",
    InvokeArgs,
    "Invoke one of your functions (sync).",
    "lambda:InvokeFunction",
)
def _invoke(lam: Any, args: InvokeArgs, tool: str) -> dict[str, Any]:
    params: dict[str, Any] = {
        "FunctionName": args.function,
        "InvocationType": "RequestResponse",
        "Payload": json.dumps(args.payload, separators=(",", ":")).encode(),
    }
    if args.qualifier:
        params["Qualifier"] = args.qualifier
    answer = lam.invoke(**params)
    raw = answer["Payload"].read() if answer.get("Payload") is not None else b""
    try:
        payload = json.loads(raw) if raw else None
    except ValueError:
        payload = raw.decode(errors="replace")
    if answer.get("FunctionError"):
        error = payload if isinstance(payload, dict) else {}
        error_type = str(error.get("errorType") or answer["FunctionError"])
        message = str(error.get("errorMessage") or "").strip()
        raise HttpError(
            f"{tool}: {args.function} failed: {error_type}" + (f": {message}" if message else ""),
            tool=tool,
            service="lambda",
            code="FunctionError",
            status=int(answer.get("StatusCode") or 200),
            error_type=error_type,
        )
    return {"status_code": int(answer.get("StatusCode") or 200), "payload": payload}


@_tool(
    "aws.stepfunctions.start_execution",
    "stepfunctions",
    StartExecutionArgs,
    "Start a state machine execution (does not wait).",
    "states:StartExecution",
)
def _start_execution(sfn: Any, args: StartExecutionArgs, tool: str) -> dict[str, Any]:
    params: dict[str, Any] = {
        "stateMachineArn": args.state_machine_arn,
        "input": json.dumps(args.input, separators=(",", ":")),
    }
    if args.name:
        params["name"] = args.name
    started = sfn.start_execution(**params)
    start = started.get("startDate")
    return {
        "execution_arn": started["executionArn"],
        "start_date": start.isoformat() if hasattr(start, "isoformat") else start,
    }


# --------------------------------------------------------------------------- entry point


def parse_args(tool: AwsTool, args: Any) -> ToolArgs:
    """Validate ``args`` against the tool's model; a failure is ``Relayflow.InvalidArgs``
    naming the first offending field."""
    if not isinstance(args, dict):
        raise InvalidArgsError(
            f"{tool.name}: args must be an object, got {type(args).__name__}", tool=tool.name
        )
    try:
        return tool.args_model.model_validate(args)
    except ValidationError as exc:
        problems = [
            ("args." + ".".join(str(p) for p in error["loc"])).rstrip(".") + f": {error['msg']}"
            for error in exc.errors(include_url=False)
        ]
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        raise InvalidArgsError(
            f"{tool.name}: " + "; ".join(problems), tool=tool.name, field=field
        ) from None


def run_aws_tool(name: str, args: Any) -> Any:
    """Perform the AWS tool ``name`` with rendered ``args`` for the acting tenant; the
    JSON-friendly result.

    A call that names one of Relayflow's own resources is refused
    (:func:`relayflow.tools.guard.check_tool_call`, ``Relayflow.InvalidArgs`` with
    ``details.rule`` ``tenant-boundary``), and so is one that reaches another tenant's data
    (:func:`relayflow.tools.tenant_data.check_tenant_data`; IAM refuses it on AWS).
    ``aws.events.put_events`` on the Relayflow bus goes through the stamped path: the tenant
    is stamped into its detail, a reserved source or detail type is refused, and Relayflow
    sends it; every other call is made with the tenant's identity
    (:mod:`relayflow.adapters.tenant_aws`)."""
    from relayflow.tenancy import acting_tenant
    from relayflow.tools.guard import check_tool_call
    from relayflow.tools.tenant_data import check_tenant_data

    tool = AWS_TOOLS[name]
    parsed = parse_args(tool, args)
    tenant = acting_tenant()
    if check_tool_call(name, parsed):
        return _put_on_relayflow_bus(name, tool, parsed, tenant)
    with aws_call(name, tool.service, tenant) as service_client:
        check_tenant_data(name, parsed, tenant)
        return tool.action(service_client, parsed, name)


def _put_on_relayflow_bus(name: str, tool: AwsTool, parsed: Any, tenant: str) -> Any:
    from relayflow.settings import get_settings
    from relayflow.tenancy import TenantBoundary
    from relayflow.triggers.publish import ReservedEvent, tenant_event

    try:
        detail = tenant_event(tenant, parsed.source, parsed.detail_type, parsed.detail)
    except ReservedEvent as exc:
        raise TenantBoundary(f"{name}: {exc}", tool=name, field=exc.field) from None
    stamped = parsed.model_copy(update={"detail": detail, "bus": get_settings().event_bus_name})
    with aws_call(name, tool.service) as service_client:
        return tool.action(service_client, stamped, name)


__all__ = [
    "AWS_TOOLS",
    "AwsTool",
    "aws_error",
    "from_dynamodb",
    "run_aws_tool",
    "to_dynamodb",
]
