"""``catch_up`` of a cron trigger: run the ticks it missed, once each, oldest first.

A tick is *missed* when no run started for it: the workflow was disabled (its schedules
deleted), its breaker was open (the tick was skipped), or a deploy gap dropped it. For a
trigger with ``catch_up``, the trigger function records the latest tick that started a run
(a mark per trigger, :meth:`AdmissionDal.advance_tick`). Missed ticks are caught up

* when the workflow is enabled again (a PUT or rollback syncs its triggers):
  :func:`relayflow.control.dispatch.catch_up_workflow` runs the ticks after the mark up to now;
* when the next tick arrives (after an open breaker or a gap): the ticks between the mark
  and that tick run before it.

Ticks at most ``window`` old run (idempotently: the key is the one a Scheduler delivery of
that tick would have, ``schedule:<index>:<time>``); older ones are recorded as one skip
beside the workflow's breaker (``GET /breakers``' skipped runs), naming how many and when.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from relayflow.triggers.deliveries import DispatchResult, ScheduleDelivery

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


class TickStarter(Protocol):
    """What starts a tick's run (:class:`relayflow.control.dispatch.Dispatcher`)."""

    @property
    def control(self) -> Any:
        """The ControlPlane the runs start on."""
        ...

    def start_tick(self, delivery: ScheduleDelivery, trigger: dict[str, Any]) -> DispatchResult:
        """Start the run of one scheduled tick."""
        ...


def catch_up(
    dispatcher: TickStarter,
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
