"""Trigger sync: make AWS hold exactly the schedules, event rules and webhook slugs a workflow
declares.

The control plane calls :func:`sync_triggers` after a PUT, a rollback and a DELETE:

* ``cron`` and ``at`` triggers become EventBridge Scheduler schedules in
  ``settings.schedule_group_name`` that invoke the trigger function
  (``settings.trigger_function_arn``, as ``settings.scheduler_role_arn``) with
  ``{"kind": "schedule", "tenant", "workflow_id", "trigger_index", "scheduled_time", "input"}``
  (``scheduled_time`` is Scheduler's ``<aws.scheduler.scheduled-time>``). ``at`` schedules
  delete themselves after they fire; one whose time has passed is not created.
* ``event`` triggers become rules on the Relayflow bus (``settings.event_bus_name``) whose
  pattern is the declared one (or ``source`` / ``detail-type``) **and**
  ``{"detail": {"relayflow_tenant": [tenant]}}``, so one tenant's events never reach another
  tenant's workflows. The target is the trigger function, with an InputTransformer that hands
  it ``{"kind": "event", "tenant", "workflow_id", "trigger_index", "event"}``.
* ``webhook`` triggers become slug registrations in DynamoDB (``HOOK#<slug>``, through the
  DAL). A slug registered to another tenant's or another workflow's trigger is a
  :class:`SlugConflict`.

Names are deterministic (:func:`relayflow.cron.schedule_name`, :func:`rule_name`),
and what a workflow has is *listed* (by its name prefix) rather than remembered, so a sync is
idempotent, never makes a duplicate, and removes whatever is no longer declared — including
what an interrupted earlier sync left behind. ``enabled=False`` (the workflow was deleted)
removes every schedule and rule and disables the slugs, which stay reserved for the workflow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from relayflow.triggers.bus import (
    EventBus,
    EventBusError,
    EventBusThrottled,
    InvalidPattern,
    RuleSpec,
)
from relayflow.triggers.scheduler import (
    ScheduleRejected,
    SchedulerError,
    SchedulerThrottled,
    Schedules,
    ScheduleSpec,
)

#: The detail field every Relayflow-published event carries and every subscription matches.
TENANT_FIELD = "relayflow_tenant"
#: Scheduler's context attribute for the time a schedule was due (ISO-8601, UTC).
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
#: EventBridge's InputTransformer variable for the whole original event (with ``detail``).
WHOLE_EVENT = "<aws.events.event.json>"


# ------------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class TriggerProblem:
    """A trigger AWS cannot carry out as declared (``path`` like ``triggers[0].cron``)."""

    path: str
    rule: str
    message: str


class TriggerSyncError(Exception):
    """Trigger sync could not make AWS match the declaration."""


class InvalidTriggers(TriggerSyncError):
    """Triggers that validate as a definition but cannot be registered; ``problems`` names
    each one with its path."""

    def __init__(self, problems: Sequence[TriggerProblem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(f"{p.path}: {p.message}" for p in self.problems))


class SlugConflict(TriggerSyncError):
    """A webhook slug belongs to another tenant's or another workflow's trigger."""

    def __init__(self, slug: str, index: int) -> None:
        self.slug = slug
        self.path = f"triggers[{index}].slug"
        super().__init__(
            f"webhook slug {slug!r} ({self.path}) is already used by another workflow; "
            "choose another slug"
        )


class SyncFailed(TriggerSyncError):
    """EventBridge or Scheduler failed a request; retrying the sync may work."""


class SyncThrottled(SyncFailed):
    """EventBridge or Scheduler throttled the sync."""


# ------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class TriggerPlan:
    """What a workflow's triggers need: schedules, rules and slugs, by trigger index."""

    schedules: list[tuple[int, ScheduleSpec]] = field(default_factory=list)
    rules: list[tuple[int, RuleSpec]] = field(default_factory=list)
    hooks: list[tuple[int, str]] = field(default_factory=list)
    #: Triggers deliberately left out (an ``at`` time that has passed), with the reason.
    skipped: list[str] = field(default_factory=list)


@dataclass
class SyncReport:
    """What a sync did. ``schedules``, ``rules`` and ``hooks`` are the names in place
    afterwards; ``created``, ``updated``, ``removed`` and ``disabled`` list changes as
    ``schedule:<name>``, ``rule:<name>``, ``hook:<slug>``; ``skipped`` says which triggers
    were left out and why."""

    schedules: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def rule_name(tenant: str, workflow_id: str, index: int) -> str:
    """The deterministic EventBridge rule name (≤ 64 characters) of trigger ``index``: the
    schedules' naming scheme (readable ids and a digest of the pair), so a workflow's rules
    are listed by the same prefix."""
    from relayflow.cron import schedule_name_prefix

    return f"{schedule_name_prefix(tenant, workflow_id)}{index}"


def name_prefix(tenant: str, workflow_id: str) -> str:
    """What every schedule and rule name of the workflow starts with."""
    from relayflow.cron import schedule_name_prefix

    return schedule_name_prefix(tenant, workflow_id)


def subscription_pattern(tenant: str, trigger: Any) -> dict[str, Any]:
    """The rule pattern of an event trigger: its ``pattern`` (if any), its ``source`` and
    ``detail_type`` (which win over the same keys in ``pattern``), and always
    ``detail.relayflow_tenant = [tenant]`` (which wins over anything the pattern says)."""
    pattern: dict[str, Any] = json.loads(json.dumps(trigger.pattern or {}))
    if trigger.source:
        pattern["source"] = [trigger.source]
    if trigger.detail_type:
        pattern["detail-type"] = [trigger.detail_type]
    detail = pattern.get("detail")
    pattern["detail"] = {**(detail if isinstance(detail, dict) else {}), TENANT_FIELD: [tenant]}
    return pattern


def event_input_template(tenant: str, workflow_id: str, index: int) -> str:
    """The InputTransformer template: literal routing fields, and the whole event."""
    head = json.dumps(
        {"kind": "event", "tenant": tenant, "workflow_id": workflow_id, "trigger_index": index},
        separators=(",", ":"),
    )
    return f'{head[:-1]},"event":{WHOLE_EVENT}}}'


def schedule_input(tenant: str, workflow_id: str, index: int, payload: Any) -> str:
    return json.dumps(
        {
            "kind": "schedule",
            "tenant": tenant,
            "workflow_id": workflow_id,
            "trigger_index": index,
            "scheduled_time": SCHEDULED_TIME,
            "input": payload,
        },
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )


def _pattern_problems(index: int, pattern: Any) -> list[TriggerProblem]:
    """What EventBridge would refuse in a declared pattern, found before anything is written:
    every leaf is a list of matchers, every inner node an object."""
    problems: list[TriggerProblem] = []

    def walk(node: Any, path: str) -> None:
        for key, value in node.items():
            where = f"{path}.{key}"
            if isinstance(value, dict):
                walk(value, where)
            elif key == "$or" and isinstance(value, list):
                for i, branch in enumerate(value):
                    if isinstance(branch, dict):
                        walk(branch, f"{where}[{i}]")
                    else:
                        problems.append(TriggerProblem(f"{where}[{i}]", "pattern", "not an object"))
            elif not isinstance(value, list) or not value:
                problems.append(
                    TriggerProblem(
                        where,
                        "pattern",
                        "an event pattern matches with a non-empty list of values or filters, "
                        'e.g. ["order.created"] or [{"prefix": "order."}]',
                    )
                )

    if isinstance(pattern, dict):
        walk(pattern, f"triggers[{index}].pattern")
        if "detail" in pattern and not isinstance(pattern["detail"], dict):
            problems.append(
                TriggerProblem(f"triggers[{index}].pattern.detail", "pattern", "not an object")
            )
    return problems


def _schedule_spec(
    settings: Any,
    tenant: str,
    workflow_id: str,
    index: int,
    trigger: Any,
    part: int,
    expression: str,
    description: str,
    *,
    once: bool = False,
) -> ScheduleSpec:
    """Schedule ``part`` of cron or at trigger ``index``, firing the trigger function at
    ``expression``; ``once`` (an ``at`` trigger): deleted once it has fired."""
    from relayflow.cron import schedule_name

    return ScheduleSpec(
        name=schedule_name(tenant, workflow_id, index, part),
        expression=expression,
        timezone=trigger.timezone,
        target_arn=settings.trigger_function_arn,
        role_arn=settings.scheduler_role_arn,
        dead_letter_arn=settings.trigger_dead_letter_queue_arn,
        input=schedule_input(tenant, workflow_id, index, trigger.input),
        description=description,
        delete_after_completion=once,
    )


def plan_triggers(
    tenant: str,
    workflow_id: str,
    triggers: Sequence[Any],
    *,
    now: datetime | None = None,
) -> TriggerPlan:
    """The schedules, rules and slugs ``triggers`` need (no I/O). Raises
    :class:`InvalidTriggers` naming every trigger that cannot be registered: a cron
    expression Scheduler cannot express exactly, an ``at`` time that does not exist in its
    time zone, a malformed pattern, a slug declared twice."""
    from relayflow.cron import (
        UnsupportedCron,
        to_at_expression,
        to_scheduler_expressions,
        zone,
    )
    from relayflow.settings import get_settings

    settings = get_settings()
    moment = now or datetime.now(UTC)
    plan = TriggerPlan()
    problems: list[TriggerProblem] = []
    slugs: dict[str, int] = {}
    for index, trigger in enumerate(triggers):
        where = f"triggers[{index}]"
        kind = trigger.type
        description = f"Relayflow {tenant}/{workflow_id} {where} ({kind})"
        if kind == "cron":
            try:
                expressions = to_scheduler_expressions(trigger.cron)
            except UnsupportedCron as exc:
                problems.append(TriggerProblem(f"{where}.cron", "cron", str(exc)))
                continue
            for part, expression in enumerate(expressions):
                spec = _schedule_spec(
                    settings, tenant, workflow_id, index, trigger, part, expression, description
                )
                plan.schedules.append((index, spec))
        elif kind == "at":
            try:
                expression = to_at_expression(trigger.at, trigger.timezone)
            except ValueError as exc:
                problems.append(TriggerProblem(f"{where}.at", "at", str(exc)))
                continue
            at = trigger.at
            due = at if at.tzinfo else at.replace(tzinfo=zone(trigger.timezone))
            if due <= moment:
                plan.skipped.append(f"{where}: at {at.isoformat()} has passed")
                continue
            spec = _schedule_spec(
                settings, tenant, workflow_id, index, trigger, 0, expression, description, once=True
            )
            plan.schedules.append((index, spec))
        elif kind == "event":
            found = _pattern_problems(index, trigger.pattern)
            if found:
                problems.extend(found)
                continue
            spec = RuleSpec(
                name=rule_name(tenant, workflow_id, index),
                pattern=subscription_pattern(tenant, trigger),
                target_arn=settings.trigger_function_arn,
                input_template=event_input_template(tenant, workflow_id, index),
                description=description,
                dead_letter_arn=settings.trigger_dead_letter_queue_arn,
            )
            plan.rules.append((index, spec))
        elif kind == "subscription":
            # A cancel_on entry or a wait_for_event step (docs/flow-control.md): events of
            # its detail-type (and source) of this tenant go to the trigger function.
            pattern: dict[str, Any] = {
                "detail-type": [trigger.event],
                "detail": {TENANT_FIELD: [tenant]},
            }
            if trigger.source:
                pattern["source"] = [trigger.source]
            head = json.dumps(
                {
                    "kind": trigger.delivery,
                    "tenant": tenant,
                    "workflow_id": workflow_id,
                    "index": trigger.index,
                },
                separators=(",", ":"),
            )
            rule = RuleSpec(
                name=rule_name(tenant, workflow_id, index),
                pattern=pattern,
                target_arn=settings.trigger_function_arn,
                input_template=f'{head[:-1]},"event":{WHOLE_EVENT}}}',
                description=f"Relayflow {tenant}/{workflow_id} {trigger.delivery} {trigger.index}",
            )
            plan.rules.append((index, rule))
        elif kind == "webhook":
            if trigger.slug in slugs:
                problems.append(
                    TriggerProblem(
                        f"{where}.slug",
                        "unique",
                        f"slug {trigger.slug!r} is declared twice "
                        f"(first by triggers[{slugs[trigger.slug]}])",
                    )
                )
                continue
            slugs[trigger.slug] = index
            plan.hooks.append((index, trigger.slug))
    if problems:
        raise InvalidTriggers(problems)
    return plan


# ------------------------------------------------------------------------------- syncing


class TriggerSync:
    """Applies trigger plans. ``dal``, ``schedules`` and ``bus`` are created lazily when not
    given (the DAL, ``settings.schedule_group_name``, ``settings.event_bus_name``)."""

    def __init__(
        self,
        dal: Any | None = None,
        schedules: Schedules | None = None,
        bus: EventBus | None = None,
    ) -> None:
        self._dal = dal
        self._schedules = schedules
        self._bus = bus

    @property
    def dal(self) -> Any:
        if self._dal is not None:
            return self._dal
        from relayflow.dal import get_dal

        return get_dal()

    @property
    def schedules(self) -> Schedules:
        if self._schedules is not None:
            return self._schedules
        from relayflow.settings import get_settings

        return Schedules(get_settings().schedule_group_name)

    @property
    def bus(self) -> EventBus:
        if self._bus is not None:
            return self._bus
        from relayflow.settings import get_settings

        return EventBus(get_settings().event_bus_name)

    def check(self, tenant: str, workflow_id: str, triggers: Sequence[Any]) -> TriggerPlan:
        """Plan the triggers and check that every slug is free for this workflow, writing
        nothing: what the control plane calls before it stores a version."""
        plan = plan_triggers(tenant, workflow_id, triggers)
        for index, slug in plan.hooks:
            owner = self.dal.get_hook(slug)
            if owner is not None and not _may_take(owner, tenant, workflow_id):
                raise SlugConflict(slug, index)
        return plan

    def sync(
        self, tenant: str, workflow_id: str, triggers: Sequence[Any], *, enabled: bool
    ) -> SyncReport:
        """Make AWS hold exactly what ``triggers`` need (``enabled``), or nothing but
        disabled slugs (not ``enabled``). Idempotent."""
        try:
            if enabled:
                return self._sync(tenant, workflow_id, triggers)
            return self._disable(tenant, workflow_id)
        except (SchedulerThrottled, EventBusThrottled) as exc:
            raise SyncThrottled(str(exc)) from exc
        except (SchedulerError, EventBusError) as exc:
            raise SyncFailed(str(exc)) from exc

    def _sync(self, tenant: str, workflow_id: str, triggers: Sequence[Any]) -> SyncReport:
        from relayflow.dal import SlugTaken

        plan = plan_triggers(tenant, workflow_id, triggers)
        report = SyncReport()
        report.skipped.extend(plan.skipped)
        # Slugs first: a conflict stops the sync before anything else changes.
        for index, slug in plan.hooks:
            try:
                self.dal.put_hook(slug, tenant, workflow_id, index, True)
            except SlugTaken as exc:
                raise SlugConflict(slug, index) from exc
            report.hooks.append(slug)
        declared = {slug for _, slug in plan.hooks}
        for hook in self.dal.list_hooks(tenant, workflow_id):
            released = hook.slug not in declared and self.dal.delete_hook(
                hook.slug, tenant, workflow_id=workflow_id
            )
            if released:
                report.removed.append(f"hook:{hook.slug}")

        prefix = name_prefix(tenant, workflow_id)
        schedules, bus = self.schedules, self.bus
        for index, spec in plan.schedules:
            try:
                outcome = schedules.put(spec)
            except ScheduleRejected as exc:
                field_name = "at" if spec.delete_after_completion else "cron"
                raise InvalidTriggers(
                    [
                        TriggerProblem(
                            f"triggers[{index}].{field_name}",
                            "schedule",
                            f"EventBridge Scheduler refused the schedule: {exc}",
                        )
                    ]
                ) from exc
            report.schedules.append(spec.name)
            if outcome != "unchanged":
                getattr(report, outcome).append(f"schedule:{spec.name}")
        wanted = {spec.name for _, spec in plan.schedules}
        for name in list(schedules.names(prefix)):
            if name.startswith(prefix) and name not in wanted and schedules.delete(name):
                report.removed.append(f"schedule:{name}")

        for index, rule in plan.rules:
            try:
                bus.put_rule(rule)
            except InvalidPattern as exc:
                raise InvalidTriggers(
                    [
                        TriggerProblem(
                            f"triggers[{index}].pattern",
                            "pattern",
                            f"EventBridge refused the event pattern: {exc}",
                        )
                    ]
                ) from exc
            report.rules.append(rule.name)
        kept = {rule.name for _, rule in plan.rules}
        for name in bus.rule_names(prefix):
            if name not in kept and bus.delete_rule(name):
                report.removed.append(f"rule:{name}")
        return report

    def _disable(self, tenant: str, workflow_id: str) -> SyncReport:
        from relayflow.dal import SlugTaken

        report = SyncReport()
        for hook in self.dal.list_hooks(tenant, workflow_id):
            if hook.workflow_id != workflow_id:
                continue
            if hook.enabled:
                try:
                    self.dal.put_hook(hook.slug, tenant, workflow_id, hook.trigger_index, False)
                except SlugTaken:
                    continue  # another workflow took it over meanwhile
                report.disabled.append(f"hook:{hook.slug}")
            report.hooks.append(hook.slug)
        prefix = name_prefix(tenant, workflow_id)
        schedules, bus = self.schedules, self.bus
        for name in list(schedules.names(prefix)):
            if name.startswith(prefix) and schedules.delete(name):
                report.removed.append(f"schedule:{name}")
        for name in bus.rule_names(prefix):
            if bus.delete_rule(name):
                report.removed.append(f"rule:{name}")
        return report


def _may_take(owner: Any, tenant: str, workflow_id: str) -> bool:
    """The DAL's rule for :meth:`~relayflow.dal.Dal.put_hook`: free, this workflow's, or a
    disabled registration of the same tenant."""
    return owner.tenant == tenant and (owner.workflow_id == workflow_id or not owner.enabled)


def triggers_of(
    definition: Mapping[str, Any] | str, *, with_subscriptions: bool = False
) -> list[Any]:
    """The trigger models of a stored definition (a version item's JSON); with
    ``with_subscriptions``, followed by the subscriptions of its ``cancel_on`` entries and
    ``wait_for_event`` steps."""
    from pydantic import TypeAdapter

    from relayflow.definition.admission import subscriptions_of
    from relayflow.definition.models import Trigger

    data = json.loads(definition) if isinstance(definition, str) else definition
    raw = (data.get("triggers") or []) if isinstance(data, Mapping) else []
    triggers: list[Any] = list(TypeAdapter(list[Trigger]).validate_python(raw))
    if with_subscriptions and isinstance(data, Mapping):
        triggers.extend(subscriptions_of(dict(data)))
    return triggers


def check_triggers(tenant: str, workflow_id: str, triggers: Sequence[Any]) -> TriggerPlan:
    """:meth:`TriggerSync.check` with the default clients."""
    return TriggerSync().check(tenant, workflow_id, triggers)


def sync_triggers(
    tenant: str, workflow_id: str, triggers: Sequence[Any], *, enabled: bool
) -> SyncReport:
    """:meth:`TriggerSync.sync` with the default clients (see the module docstring)."""
    return TriggerSync().sync(tenant, workflow_id, triggers, enabled=enabled)
