"""``catch_up`` of a cron trigger: run the ticks it missed, once each, oldest first.

A tick is *missed* when no run started for it: the workflow was disabled (its schedules
deleted), its breaker was open (the tick was skipped), or a deploy gap dropped it. For a
trigger with ``catch_up``, the trigger function records the latest tick that started a run
(a mark per trigger, :meth:`AdmissionDal.advance_tick`). Missed ticks are caught up

* when the workflow is enabled again (a PUT or rollback syncs its triggers):
  :func:`catch_up_workflow` runs the ticks after the mark up to now;
* when the next tick arrives (after an open breaker or a gap): the ticks between the mark
  and that tick run before it.

Ticks at most ``window`` old run (idempotently: the key is the one a Scheduler delivery of
that tick would have, ``schedule:<index>:<time>``); older ones are recorded as one skip
beside the workflow's breaker (``GET /breakers``' skipped runs), naming how many and when.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from relayflow.triggers.dispatch import Dispatcher, DispatchResult

#: The most ticks one catch-up looks at (an every-minute schedule missed for 10 weeks).
MAX_TICKS = 100_000


def tick_text(moment: datetime) -> str:
    """A tick as Scheduler's ``<aws.scheduler.scheduled-time>`` writes it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_tick(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def missed_ticks(
    cron: str, tz: str, after: datetime, upto: datetime, *, include_upto: bool
) -> list[datetime]:
    """The fire times of ``cron`` in ``tz`` after ``after`` and before (or at) ``upto``."""
    from croniter import croniter

    from relayflow.cron import cron_fields, zone

    where = zone(tz)
    it = croniter(" ".join(cron_fields(cron)), after.astimezone(where))
    found: list[datetime] = []
    while len(found) < MAX_TICKS:
        tick = it.get_next(datetime).astimezone(UTC)
        if tick > upto or (tick == upto and not include_upto):
            break
        found.append(tick)
    return found


def catch_up(
    dispatcher: Dispatcher,
    tenant: str,
    workflow_id: str,
    index: int,
    trigger: dict[str, Any],
    *,
    upto: datetime,
    include_upto: bool,
) -> list[DispatchResult]:
    """Run the ticks of cron trigger ``index`` missed since its mark (none without a mark:
    a trigger that never started a run has nothing to catch up)."""
    from relayflow.definition.admission import CatchUpSettings
    from relayflow.triggers.dispatch import ScheduleDelivery

    control = dispatcher.control
    store = control.admission.store
    mark = store.last_tick(tenant, workflow_id, index)
    if mark is None or not trigger.get("catch_up"):
        return []
    window = CatchUpSettings.model_validate(trigger["catch_up"]).window
    now = datetime.fromtimestamp(control.admission.clock(), UTC)
    ticks = missed_ticks(
        trigger["cron"],
        trigger.get("timezone") or "UTC",
        parse_tick(mark),
        upto,
        include_upto=include_upto,
    )
    oldest = now - timedelta(seconds=window)
    late = [t for t in ticks if t < oldest]
    if late:
        first, last = tick_text(late[0]), tick_text(late[-1])
        control.breakers.record_skip(
            tenant,
            workflow_id,
            idempotency_key=f"catch_up:{index}:{first}:{last}",
            trigger_type="schedule",
            reason=f"{len(late)} missed tick(s) of triggers[{index}] from {first} to {last} "
            f"are older than the catch_up window ({window} s)",
            reopens_at=None,
        )
    results = []
    for tick in (t for t in ticks if t >= oldest):
        delivery = ScheduleDelivery(
            kind="schedule",
            tenant=tenant,
            workflow_id=workflow_id,
            trigger_index=index,
            scheduled_time=tick_text(tick),
            input=trigger.get("input"),
        )
        results.append(dispatcher.start_tick(delivery, trigger))
    return results


def catch_up_workflow(control: Any, tenant: str, workflow_id: str, triggers: list[Any]) -> int:
    """The workflow is enabled again: catch up each cron trigger with ``catch_up`` up to now.
    Returns how many runs were asked for."""
    from relayflow.triggers.dispatch import Dispatcher

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
