"""Replay what landed in a dead-letter queue: ``relayflow ops redrive <queue>``.

Three kinds of message reach Relayflow's queues (template.yaml):

* Lambda's on-failure destination record (the recorder, trigger and maintenance functions,
  ``EventInvokeConfig``): ``requestContext.functionArn`` and ``requestPayload``;
* an EventBridge rule target's dead letter: the event as the body, the target in the
  ``TARGET_ARN`` message attribute;
* an EventBridge Scheduler dead letter: the schedule's input as the body, ``TARGET_ARN`` too.

Each message is replayed by invoking its function synchronously with the original payload. A
message is deleted only once its replay succeeded; a replay that fails leaves it in the queue,
visible again at once for the next redrive, and is reported. Replays are idempotent because
the functions are: the recorder applies a status change once per execution and status, the
trigger starts one run per scheduled time or event id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: Function names a replay may invoke: Relayflow's own, never an ARN a message makes up.
FUNCTION_NAME_PREFIX = "relayflow-"


class RedriveError(Exception):
    """The queue cannot be read, or a message names no Relayflow function."""


@dataclass
class Replay:
    """One message: which function it went to, and how its replay ended."""

    message_id: str
    function_arn: str | None
    ok: bool
    error: str | None = None


@dataclass
class RedriveResult:
    queue_url: str
    replays: list[Replay] = field(default_factory=list)

    @property
    def replayed(self) -> int:
        return sum(1 for r in self.replays if r.ok)

    @property
    def failed(self) -> list[Replay]:
        return [r for r in self.replays if not r.ok]


def parse_message(message: dict[str, Any]) -> tuple[str, Any]:
    """The function ARN and the payload a dead-lettered message was meant to deliver."""
    try:
        body = json.loads(message.get("Body") or "null")
    except ValueError as exc:
        raise RedriveError(f"message {message.get('MessageId')}: the body is not JSON") from exc
    context = body.get("requestContext") if isinstance(body, dict) else None
    if isinstance(context, dict) and "requestPayload" in body:
        arn = str(context.get("functionArn") or "")
        payload = body["requestPayload"]
    else:
        attributes = message.get("MessageAttributes") or {}
        arn = str((attributes.get("TARGET_ARN") or {}).get("StringValue") or "")
        payload = body
    if not arn:
        raise RedriveError(f"message {message.get('MessageId')}: names no target function")
    name = arn.split(":")[6] if arn.startswith("arn:") and arn.count(":") >= 6 else arn
    if not name.startswith(FUNCTION_NAME_PREFIX):
        raise RedriveError(
            f"message {message.get('MessageId')}: target {name!r} is not a Relayflow function"
        )
    return arn, payload


def _queue_url(sqs: Any, queue: str) -> str:
    if queue.startswith(("https://", "http://")):
        return queue
    name = queue.rsplit(":", 1)[-1] if queue.startswith("arn:") else queue
    try:
        return str(sqs.get_queue_url(QueueName=name)["QueueUrl"])
    except Exception as exc:
        raise RedriveError(f"queue {queue!r} not found: {exc}") from exc


def redrive(
    queue: str,
    *,
    limit: int | None = None,
    visibility_timeout: int = 300,
    sqs: Any | None = None,
    lambda_client: Any | None = None,
) -> RedriveResult:
    """Replay up to ``limit`` messages of ``queue`` (a URL, ARN or name; default: until the
    queue reads empty). Each message received is replayed once per call."""
    from relayflow.adapters.aws import client

    sqs = sqs or client("sqs")
    invoker = lambda_client or client("lambda")
    result = RedriveResult(queue_url=_queue_url(sqs, queue))
    # Failed messages by id, with the receipt handle of their latest receive.
    held: dict[str, str] = {}
    while limit is None or len(result.replays) < limit:
        batch = min(10, limit - len(result.replays)) if limit is not None else 10
        messages = sqs.receive_message(
            QueueUrl=result.queue_url,
            MaxNumberOfMessages=batch,
            MessageAttributeNames=["All"],
            VisibilityTimeout=visibility_timeout,
            WaitTimeSeconds=0,
        ).get("Messages", [])
        fresh = [m for m in messages if m["MessageId"] not in held]
        for message in messages:
            if message["MessageId"] in held:
                held[message["MessageId"]] = message["ReceiptHandle"]
        if not fresh:
            break
        for message in fresh:
            replay = _replay(invoker, message)
            if replay.ok:
                sqs.delete_message(
                    QueueUrl=result.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
            else:
                held[message["MessageId"]] = message["ReceiptHandle"]
            result.replays.append(replay)
    # What failed is visible again at once for the next redrive (this one took each once).
    for receipt in held.values():
        sqs.change_message_visibility(
            QueueUrl=result.queue_url, ReceiptHandle=receipt, VisibilityTimeout=0
        )
    return result


def _replay(invoker: Any, message: dict[str, Any]) -> Replay:
    message_id = message["MessageId"]
    arn: str | None = None
    try:
        arn, payload = parse_message(message)
        answer = invoker.invoke(
            FunctionName=arn, InvocationType="RequestResponse", Payload=json.dumps(payload).encode()
        )
        failure = answer.get("FunctionError")
        if failure:
            body = answer["Payload"].read().decode(errors="replace")
            raise RedriveError(f"{failure}: {body[:500]}")
    except Exception as exc:
        return Replay(message_id, arn, ok=False, error=str(exc))
    return Replay(message_id, arn, ok=True)
