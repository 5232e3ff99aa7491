"""What the trigger function does: start a run for a schedule that fired or an event that
matched a subscription rule.

Both deliveries name the tenant, the workflow and the index of the trigger in its definition
(trigger sync wrote them into the schedule's input and the rule's input template). The live
version's definition is read to confirm that trigger still exists (a stale schedule or rule
starts nothing) and, for events, to find its filter.

* **schedule** ``{"kind": "schedule", "tenant", "workflow_id", "trigger_index",
  "scheduled_time", "input"}``: the run's trigger is the declared ``input``; its idempotency
  key is ``schedule:<index>:<scheduled_time>``, so a redelivery for the same scheduled time
  (and both halves of a cron split in two) start one run.
* **event** ``{"kind": "event", "tenant", "workflow_id", "trigger_index", "event"}``: the
  run's trigger (and the filter's ``trigger``) is the event as :func:`event_trigger` shapes it;
  the idempotency key is ``event:<event id>``, so a redelivered event starts no second run of
  the workflow. A filter that is false skips the run; a filter that fails is logged and skips
  only this subscription (other rules are separate deliveries).

A disabled or unknown workflow, a trigger the live version no longer declares, an event of
another tenant: nothing starts, the result says why, and a log line records it. A workflow
whose circuit breaker is open skips the run too, and the skip is also recorded as an item
beside the breaker and counted in the ``RunSkipped`` metric; a half-open breaker lets one run
through as its trial. A trigger whose payload breaks the workflow's ``input_schema`` starts
nothing either: it is kept as a run that ended ``failed`` with ``Relayflow.InvalidInput``
(:func:`relayflow.control.run_input.record_refused_run`), result ``invalid_input``. AWS failures
raise, so that Lambda's asynchronous retries deliver again (the idempotency key makes that
safe).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from relayflow.control.catch_up import catch_up, parse_tick
from relayflow.triggers.deliveries import (
    DispatchResult,
    DispatchStatus,
    EventDelivery,
    InvalidDelivery,
    ScheduleDelivery,
    TriggerDelivery,
    event_tenant,
    event_trigger,
    parse_delivery,
)


class Dispatcher:
    """Starts runs for deliveries through ``control`` (a ControlPlane, wired by the caller: the
    trigger function passes the process's)."""

    def __init__(self, control: Any) -> None:
        self.control = control

    def dispatch(self, event: Mapping[str, Any]) -> DispatchResult:
        delivery = parse_delivery(event)
        if isinstance(delivery, ScheduleDelivery):
            result = self._schedule(delivery)
        else:
            result = self._event(delivery)
        _log(result)
        return result

    def _schedule(self, delivery: ScheduleDelivery) -> DispatchResult:
        trigger, refused = self._live_trigger(delivery, ("cron", "at"))
        if refused is not None:
            return refused
        trigger = trigger or {}
        if trigger.get("type") == "cron" and trigger.get("catch_up"):
            # Ticks missed before this one (an open breaker, a gap) run first, oldest first.
            upto = parse_tick(delivery.scheduled_time)
            catch_up(
                self,
                delivery.tenant,
                delivery.workflow_id,
                delivery.trigger_index,
                trigger,
                upto=upto,
                include_upto=False,
            )
        return self.start_tick(delivery, trigger)

    def start_tick(self, delivery: ScheduleDelivery, trigger: dict[str, Any]) -> DispatchResult:
        """Start the run of one scheduled tick (its overlap rule applies); with
        ``catch_up``, a tick that started (or was deliberately skipped) moves the mark."""
        key = f"schedule:{delivery.trigger_index}:{delivery.scheduled_time}"
        mode = trigger.get("overlap") or "allow"
        overlap = None if mode == "allow" else (mode, f"schedule:{delivery.trigger_index}")
        result = self._start(delivery, delivery.input, key, "schedule", overlap=overlap)
        handled = result.status in ("started", "duplicate", "queued") or (
            result.status == "skipped" and result.run_id is not None  # an overlap skip
        )
        if handled and trigger.get("catch_up"):
            self.control.admission.store.advance_tick(
                delivery.tenant,
                delivery.workflow_id,
                delivery.trigger_index,
                delivery.scheduled_time,
                int(self.control.admission.clock()),
            )
        return result

    def _event(self, delivery: EventDelivery) -> DispatchResult:
        from relayflow.errors import ExpressionError
        from relayflow.expressions import evaluate_condition

        event = delivery.event
        owner = event_tenant(event)
        if owner != delivery.tenant:
            # The rule pattern already requires the tenant; this guards a misconfigured rule.
            return _result(delivery, "skipped", reason="the event belongs to another tenant")
        event_id = event.get("id")
        if not isinstance(event_id, str) or not event_id:
            raise InvalidDelivery("the event has no id")
        trigger, refused = self._live_trigger(delivery, ("event",))
        if refused is not None:
            return refused
        payload = event_trigger(event)
        condition = (trigger or {}).get("filter")
        if condition:
            try:
                matched = evaluate_condition(condition, {"trigger": payload})
            except ExpressionError as exc:
                return _result(delivery, "filter_error", reason=str(exc))
            if not matched:
                return _result(delivery, "filtered", reason=f"filter {condition!r} is false")
        return self._start(delivery, payload, f"event:{event_id}", "event")

    def _live_trigger(
        self, delivery: TriggerDelivery, kinds: tuple[str, ...]
    ) -> tuple[dict[str, Any] | None, DispatchResult | None]:
        """The trigger the live version declares at ``trigger_index``, or the result that
        says why nothing starts."""
        dal = self.control.dal
        head = dal.get_workflow(delivery.tenant, delivery.workflow_id)
        if head is None:
            return None, _result(delivery, "skipped", reason="no such workflow")
        if not head.enabled:
            return None, _result(delivery, "skipped", reason="the workflow is disabled")
        version = dal.get_version(delivery.tenant, delivery.workflow_id, head.live_version)
        triggers = (json.loads(version.definition).get("triggers") or []) if version else []
        index = delivery.trigger_index
        trigger = triggers[index] if index < len(triggers) else None
        if not isinstance(trigger, dict) or trigger.get("type") not in kinds:
            return None, _result(
                delivery,
                "skipped",
                reason=f"version {head.live_version} declares no {' or '.join(kinds)} trigger "
                f"at triggers[{index}]",
            )
        return trigger, None

    def _start(
        self,
        delivery: TriggerDelivery,
        payload: Any,
        key: str,
        trigger_type: str,
        *,
        overlap: tuple[str, str] | None = None,
    ) -> DispatchResult:
        from relayflow.control.errors import ApiError, BreakerOpen, Conflict, NotFound
        from relayflow.control.run_input import InvalidInput, record_refused_run

        # Only a schedule with an overlap rule passes one (docs/flow-control.md).
        extra = {"overlap": overlap} if overlap is not None else {}
        try:
            started = self.control.start_run(
                delivery.tenant,
                delivery.workflow_id,
                payload,
                idempotency_key=key,
                trigger_type=trigger_type,
                **extra,
            )
        except BreakerOpen as exc:
            self._record_skip(delivery, key, trigger_type, exc)
            return _result(delivery, "skipped", reason=exc.message)
        except (Conflict, NotFound) as exc:
            # Disabled or deleted between the check and the start.
            return _result(delivery, "skipped", reason=exc.message)
        except InvalidInput as exc:
            run_id = record_refused_run(
                self.control, delivery.tenant, delivery.workflow_id, payload, key, trigger_type, exc
            )
            # The reason is logged: pointers and rules only, never the payload's values.
            broken = ", ".join(f"{d['pointer'] or '/'} ({d['rule']})" for d in exc.details or [])
            reason = f"the input breaks the workflow's input_schema at {broken}"
            return _result(delivery, "invalid_input", run_id=run_id, reason=reason)
        except ApiError as exc:
            if exc.status >= 500 or exc.status == 429:
                raise  # transient: let the invocation be retried
            return _result(delivery, "skipped", reason=f"{exc.code}: {exc.message}")
        if started.admission == "skipped":
            reason = f"run {started.run_id} is running (singleton or schedule overlap)"
            return _result(delivery, "skipped", run_id=started.run_id, reason=reason)
        status: DispatchStatus = "started" if started.created else "duplicate"
        if started.admission in ("queued", "debounced", "batched"):
            status = started.admission
        return _result(delivery, status, run_id=started.run_id)

    def _record_skip(
        self, delivery: TriggerDelivery, key: str, trigger_type: str, exc: Any
    ) -> None:
        """Keep a record of a run the open breaker did not let start (an item next to the
        breaker, keyed by the idempotency key so a redelivery writes it once) and count it in
        the ``RunSkipped`` metric. A failed write raises, and the delivery is retried."""
        from relayflow.observability import logger, record_metric

        details = exc.details or {}
        self.control.breakers.record_skip(
            delivery.tenant,
            delivery.workflow_id,
            idempotency_key=key,
            trigger_type=trigger_type,
            reason=exc.message,
            reopens_at=details.get("reopens_at"),
        )
        logger.warning(
            "run skipped: the workflow's circuit breaker is open",
            extra={
                "tenant": delivery.tenant,
                "workflow_id": delivery.workflow_id,
                "breaker_id": details.get("breaker_id"),
                "reopens_at": details.get("reopens_at"),
                "trigger_type": trigger_type,
            },
        )
        record_metric("RunSkipped", 1, Reason="BreakerOpen")


def catch_up_workflow(control: Any, tenant: str, workflow_id: str, triggers: list[Any]) -> int:
    """The workflow is enabled again: catch up each cron trigger with ``catch_up`` up to now.
    Returns how many runs were asked for."""
    dispatcher = Dispatcher(control)
    now = datetime.fromtimestamp(control.admission.clock(), UTC)
    asked = 0
    for index, trigger in enumerate(triggers):
        if getattr(trigger, "type", None) != "cron" or getattr(trigger, "catch_up", None) is None:
            continue
        raw = trigger.model_dump(mode="json")
        asked += len(
            catch_up(dispatcher, tenant, workflow_id, index, raw, upto=now, include_upto=True)
        )
    return asked


def _result(
    delivery: TriggerDelivery,
    status: DispatchStatus,
    *,
    run_id: str | None = None,
    reason: str | None = None,
) -> DispatchResult:
    return DispatchResult(
        status=status,
        tenant=delivery.tenant,
        workflow_id=delivery.workflow_id,
        trigger_index=delivery.trigger_index,
        run_id=run_id,
        reason=reason,
    )


def _log(result: DispatchResult) -> None:
    from relayflow.observability import logger

    extra = result.model_dump(exclude_none=True)
    if result.status == "filter_error":
        logger.warning("trigger filter failed; this subscription is skipped", extra=extra)
    elif result.status == "skipped":
        logger.warning("trigger skipped", extra=extra)
    elif result.status == "invalid_input":
        logger.warning("trigger refused by the input_schema; recorded as a failed run", extra=extra)
    else:
        logger.info(f"trigger {result.status}", extra=extra)


def handle_trigger(event: Mapping[str, Any], *, control: Any) -> dict[str, Any]:
    """Dispatch one schedule or event delivery (what ``functions/trigger`` does); returns
    :class:`DispatchResult` as a dict. Raises :class:`InvalidDelivery` for anything else.
    A run admission deadline (debounce, batch) goes to
    :func:`relayflow.control.admission.handle_deferred`, a ``cancel_on`` event to
    :func:`relayflow.control.cancel_on.handle_cancel`, an event a ``wait_for_event`` step
    waits for to :func:`relayflow.control.event_waits.handle_wait_event`."""
    from relayflow.control.admission import DEFERRED_KIND, handle_deferred
    from relayflow.control.cancel_on import CANCEL_KIND, handle_cancel
    from relayflow.control.event_waits import WAIT_EVENT_KIND, handle_wait_event

    if event.get("kind") == DEFERRED_KIND:
        return handle_deferred(dict(event), control=control)
    if event.get("kind") == CANCEL_KIND:
        return handle_cancel(event, control=control)
    if event.get("kind") == WAIT_EVENT_KIND:
        return handle_wait_event(event)
    return Dispatcher(control).dispatch(event).model_dump(mode="json")
