"""EventBridge rule delivery to Lambda targets, locally.

moto stores buses, rules and targets and matches events against rule patterns, but it does
not invoke Lambda targets (a matching rule with one makes ``put_events`` fail). While a
:class:`LocalEventRouter` is open, every event put on a bus of the local runtime — by
``POST /events``, by the recorder, by a workflow's ``aws.eventbridge`` tool — goes through
moto's own pattern matcher; the targets of a matching rule that are Lambda functions get the
event (shaped by the target's ``Input``, ``InputPath`` or ``InputTransformer``, as EventBridge
shapes it) on a delivery thread, which calls the function's handler from ``functions/`` (or
the runtime's registered handlers). Other targets (SQS, logs, buses) are left to moto. A
handler that raises is retried as Lambda retries an asynchronous invocation; when the tries
run out, the function's on-failure destination (``failure_destinations``, the template's
``EventInvokeConfig``) gets Lambda's invocation record in SQS, and without one the event is
dropped. A target whose function has no handler sends the event to the rule target's
``DeadLetterConfig`` queue, as EventBridge does. Every delivery is kept in
:attr:`LocalEventRouter.deliveries`.

EventBridge Scheduler schedules do not fire on their own locally. :meth:`fire_schedule`
delivers a schedule's input to its target as Scheduler would at a given time.

    with LocalRuntime() as runtime, LocalEventRouter(runtime) as router:
        ...put_events...
        router.settle()
"""

from __future__ import annotations

import copy
import json
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from relayflow.local.lambda_endpoint import HandlerRegistry, LambdaContext, parse_function_ref
from relayflow.local.lifecycle import OpenedInWith
from relayflow.local.runtime import LocalRuntime

#: EventBridge retries a failed asynchronous invocation; locally a handler gets this many tries.
DEFAULT_ATTEMPTS = 3
_RETRY_PAUSE_SECONDS = 0.02

_lock = threading.Lock()
_active: LocalEventRouter | None = None
_original_send: Callable[..., Any] | None = None


@dataclass
class Delivery:
    """One event (or schedule) handed to one Lambda target."""

    rule: str
    function_name: str
    payload: Any
    result: Any = None
    error: str | None = None
    attempts: int = 0
    #: The rule target's DeadLetterConfig queue (ARN), if any.
    dead_letter_arn: str | None = None
    #: Where the failure went: a queue ARN, once it was sent there.
    dead_lettered_to: str | None = None
    done: threading.Event = field(default_factory=threading.Event, repr=False)


def _iso(value: Any) -> str:
    """EventBridge's event time (``2026-11-30T09:00:00Z``); moto keeps epoch seconds."""
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value)


def _as_delivered(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event as EventBridge delivers it (moto's copy has epoch times and an extra
    ``ingestion-time``)."""
    delivered = {k: copy.deepcopy(v) for k, v in event.items() if k != "ingestion-time"}
    delivered["time"] = _iso(event.get("time"))
    return delivered


def _is_lambda(arn: str) -> bool:
    parts = arn.split(":")
    return len(parts) > 2 and parts[2] == "lambda"


def target_input(rule: Any, target: Mapping[str, Any], event: Mapping[str, Any]) -> Any:
    """What a target receives for ``event``: ``Input`` (constant JSON), ``InputPath`` (a
    part of the event), ``InputTransformer`` (variables from ``InputPathsMap`` and the
    predefined ``aws.events.*`` ones in ``InputTemplate``), or else the whole event."""
    delivered = _as_delivered(event)
    if "Input" in target:
        return json.loads(target["Input"])
    if "InputPath" in target:
        from jsonpath_ng.ext import parse

        matches = parse(target["InputPath"]).find(delivered)
        return matches[0].value if matches else None
    transformer = target.get("InputTransformer")
    if not transformer:
        return delivered
    template = str(transformer.get("InputTemplate", ""))
    without_detail = {k: v for k, v in delivered.items() if k != "detail"}
    predefined = {
        "aws.events.event.json": json.dumps(delivered),
        "aws.events.event": json.dumps(without_detail),
        "aws.events.rule-arn": rule.arn,
        "aws.events.rule-name": rule.name,
        "aws.events.event.ingestion-time": _iso(event.get("ingestion-time", time.time())),
    }
    for name in sorted(predefined, key=len, reverse=True):
        template = template.replace(f"<{name}>", predefined[name])
    paths = transformer.get("InputPathsMap")
    if paths:
        from moto.events.utils import EventTemplateParser

        return EventTemplateParser.parse(
            input_template=template,
            input_paths_map=paths,
            event={**delivered, "ingestion-time": event.get("ingestion-time", time.time())},
        )
    try:
        return json.loads(template)
    except ValueError:
        return template  # a text template: the target gets the text


def _send_to_targets(rule: Any, original_event: Any, transform_input: bool = True) -> None:
    """moto's ``Rule.send_to_targets`` with Lambda targets delivered by the open router."""
    router = _active
    assert _original_send is not None
    if router is None:
        _original_send(rule, original_event, transform_input)
        return
    if not rule.event_pattern.matches_event(original_event):
        return
    functions = [t for t in rule.targets if _is_lambda(str(t.get("Arn", "")))]
    others = [t for t in rule.targets if t not in functions]
    if others:
        rest = copy.copy(rule)
        rest.targets = others
        _original_send(rest, original_event, transform_input)
    for target in functions:
        payload = (
            target_input(rule, target, original_event)
            if transform_input
            else _as_delivered(original_event)
        )
        name, _ = parse_function_ref(str(target["Arn"]))
        dead_letter = (target.get("DeadLetterConfig") or {}).get("Arn")
        router.enqueue(
            Delivery(
                rule=rule.name, function_name=name, payload=payload, dead_letter_arn=dead_letter
            )
        )


class LocalEventRouter(OpenedInWith):
    """Delivers events of the runtime's buses to Lambda targets (see the module docstring);
    a context manager. One router is open at a time (it patches moto, process-wide)."""

    def __init__(
        self,
        runtime: LocalRuntime,
        *,
        attempts: int = DEFAULT_ATTEMPTS,
        failure_destinations: Mapping[str, str] | None = None,
    ) -> None:
        self.runtime = runtime
        self.attempts = attempts
        #: Function name → SQS queue ARN of its on-failure destination.
        self.failure_destinations = dict(failure_destinations or {})
        #: Every delivery so far, in the order they were made.
        self.deliveries: list[Delivery] = []
        self._queue: queue.Queue[Delivery | None] = queue.Queue()
        self._pending = 0
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None
        self._registry: HandlerRegistry | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        """Create the schedule group trigger sync uses, patch moto, start delivering."""
        global _active, _original_send
        from moto.events.models import Rule

        from relayflow.settings import get_settings
        from relayflow.triggers.scheduler import Schedules

        group = get_settings().schedule_group_name
        Schedules(group, self.runtime.client("scheduler")).ensure_group()
        self._registry = HandlerRegistry(
            self.runtime.handlers,
            self.runtime.functions_dir,
            region=self.runtime.region,
            account=self.runtime.account,
        )
        with _lock:
            if _active is not None:
                raise RuntimeError("another LocalEventRouter is open in this process")
            if _original_send is None:
                _original_send = Rule.send_to_targets
                Rule.send_to_targets = _send_to_targets  # type: ignore[method-assign]
            _active = self
        self._thread = threading.Thread(target=self._run, name="relayflow-events", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop delivering (what is queued is dropped) and restore moto."""
        global _active, _original_send
        from moto.events.models import Rule

        with _lock:
            if _active is self:
                _active = None
                if _original_send is not None:
                    Rule.send_to_targets = _original_send  # type: ignore[method-assign]
                    _original_send = None
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=5)
            self._thread = None

    # -- delivering --------------------------------------------------------------------------

    def enqueue(self, delivery: Delivery) -> None:
        with self._idle:
            self._pending += 1
            self.deliveries.append(delivery)
        self._queue.put(delivery)

    def settle(self, timeout: float = 10.0) -> bool:
        """Wait until every queued delivery has been handled; whether they all were."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def _run(self) -> None:
        while True:
            delivery = self._queue.get()
            if delivery is None:
                return
            try:
                self._deliver(delivery)
            finally:
                delivery.done.set()
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def _deliver(self, delivery: Delivery) -> None:
        from relayflow.observability import logger

        assert self._registry is not None
        handler = self._registry.resolve(delivery.function_name)
        if handler is None:
            delivery.error = f"no local handler for function {delivery.function_name}"
            logger.warning("event target has no local handler", extra={"rule": delivery.rule})
            if delivery.dead_letter_arn:
                self._dead_letter(delivery)
            return
        for attempt in range(1, self.attempts + 1):
            delivery.attempts = attempt
            context = LambdaContext(
                function_name=delivery.function_name,
                invoked_function_arn=self._registry.function_arn(delivery.function_name),
            )
            try:
                delivery.result = handler(copy.deepcopy(delivery.payload), context)
                delivery.error = None
                return
            except Exception as exc:
                delivery.error = f"{type(exc).__name__}: {exc}"
                logger.warning(
                    "event delivery failed",
                    extra={"rule": delivery.rule, "attempt": attempt, "reason": str(exc)},
                )
                time.sleep(_RETRY_PAUSE_SECONDS * attempt)
        destination = self.failure_destinations.get(delivery.function_name)
        if destination:
            self._on_failure(delivery, destination)

    def _send(self, queue_arn: str, body: Any, attributes: Mapping[str, str]) -> None:
        sqs = self.runtime.client("sqs")
        name = queue_arn.rsplit(":", 1)[-1]
        sqs.send_message(
            QueueUrl=sqs.get_queue_url(QueueName=name)["QueueUrl"],
            MessageBody=json.dumps(body),
            MessageAttributes={
                key: {"DataType": "String", "StringValue": value}
                for key, value in attributes.items()
            },
        )

    def _on_failure(self, delivery: Delivery, queue_arn: str) -> None:
        """Lambda's on-failure destination record (``RetriesExhausted``) for ``delivery``."""
        assert self._registry is not None
        error_type, _, message = (delivery.error or "").partition(": ")
        record = {
            "version": "1.0",
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "requestContext": {
                "requestId": f"local-{time.time_ns()}",
                "functionArn": f"{self._registry.function_arn(delivery.function_name)}:$LATEST",
                "condition": "RetriesExhausted",
                "approximateInvokeCount": delivery.attempts,
            },
            "requestPayload": delivery.payload,
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST"},
            "responsePayload": {"errorType": error_type, "errorMessage": message},
        }
        self._send(queue_arn, record, {})
        delivery.dead_lettered_to = queue_arn

    def _dead_letter(self, delivery: Delivery) -> None:
        """EventBridge's DLQ message: the event, with the target and the error as attributes."""
        assert self._registry is not None and delivery.dead_letter_arn
        self._send(
            delivery.dead_letter_arn,
            delivery.payload,
            {
                "ERROR_CODE": "ResourceNotFoundException",
                "ERROR_MESSAGE": delivery.error or "",
                "RULE_ARN": delivery.rule,
                "TARGET_ARN": self._registry.function_arn(delivery.function_name),
            },
        )
        delivery.dead_lettered_to = delivery.dead_letter_arn

    # -- schedules ---------------------------------------------------------------------------

    def fire_schedule(
        self,
        name: str,
        scheduled_time: datetime | str | None = None,
        *,
        group: str | None = None,
        wait: bool = True,
    ) -> Delivery:
        """Deliver schedule ``name``'s input to its target as EventBridge Scheduler does when
        it is due at ``scheduled_time`` (default: now); with ``wait``, return once handled."""
        from relayflow.settings import get_settings

        group = group or get_settings().schedule_group_name
        schedule = self.runtime.client("scheduler").get_schedule(Name=name, GroupName=group)
        if isinstance(scheduled_time, datetime):
            moment = scheduled_time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        else:
            moment = scheduled_time or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        target = schedule["Target"]
        text = str(target.get("Input") or "{}")
        text = text.replace("<aws.scheduler.scheduled-time>", moment)
        text = text.replace("<aws.scheduler.schedule-arn>", str(schedule.get("Arn", "")))
        text = text.replace("<aws.scheduler.execution-id>", f"local-{time.time_ns()}")
        text = text.replace("<aws.scheduler.attempt-number>", "1")
        function, _ = parse_function_ref(str(target["Arn"]))
        delivery = Delivery(
            rule=f"schedule/{group}/{name}", function_name=function, payload=json.loads(text)
        )
        self.enqueue(delivery)
        if wait:
            delivery.done.wait(30)
        return delivery
