"""Trigger sync against moto's EventBridge Scheduler, EventBridge and DynamoDB, through the
control plane (PUT, DELETE, rollback), and schedule dispatch through the trigger function.

One runtime (and one event router, for firing schedules) serves the module; every test works
in its own tenant, and schedules and rules are looked up by that tenant's name prefix, so
tests share nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from relayflow_testing import load_event, load_handler

from relayflow.adapters.aws import client
from relayflow.control.errors import Conflict, InvalidDefinition
from relayflow.control.service import ControlPlane
from relayflow.cron import schedule_name
from relayflow.local.eventbridge import LocalEventRouter
from relayflow.local.lambda_endpoint import LambdaContext
from relayflow.settings import get_settings
from relayflow.triggers.sync import name_prefix, rule_name

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def router(runtime) -> Iterator[LocalEventRouter]:
    with LocalEventRouter(runtime) as events:
        yield events


@pytest.fixture
def plane(runtime, router) -> ControlPlane:
    return ControlPlane()


def definition(workflow_id: str = "report", *triggers: dict[str, Any], label: str = "v1") -> dict:
    return {
        "id": workflow_id,
        "start": "mark",
        "steps": {"mark": {"type": "transform", "mapping": {"label": label}}},
        "triggers": list(triggers),
    }


def cron(expression: str, timezone: str = "UTC", **input: Any) -> dict[str, Any]:
    return {"type": "cron", "cron": expression, "timezone": timezone, "input": input}


def schedules(tenant: str, workflow_id: str = "report") -> dict[str, dict[str, Any]]:
    """The workflow's schedules in the group, as GetSchedule describes them."""
    scheduler = client("scheduler")
    group = get_settings().schedule_group_name
    listed = scheduler.list_schedules(GroupName=group, NamePrefix=name_prefix(tenant, workflow_id))[
        "Schedules"
    ]
    return {
        s["Name"]: scheduler.get_schedule(Name=s["Name"], GroupName=group)
        for s in listed
        if s["Name"].startswith(name_prefix(tenant, workflow_id))
    }


def rules(tenant: str, workflow_id: str = "report") -> dict[str, dict[str, Any]]:
    events = client("events")
    bus = get_settings().event_bus_name
    listed = events.list_rules(EventBusName=bus, NamePrefix=name_prefix(tenant, workflow_id))
    return {
        r["Name"]: {
            **r,
            "Targets": events.list_targets_by_rule(Rule=r["Name"], EventBusName=bus)["Targets"],
        }
        for r in listed["Rules"]
        if r["Name"].startswith(name_prefix(tenant, workflow_id))
    }


# ----------------------------------------------------------------------------- schedules


def test_a_cron_trigger_becomes_one_schedule_that_invokes_the_trigger_function(plane, tenant):
    # When a workflow with a weekday-morning cron in Berlin time is PUT
    plane.put_workflow(
        tenant, "report", definition("report", cron("0 9 * * 1-5", "Europe/Berlin", kind="daily"))
    )
    # Then the group holds one schedule for it, under its deterministic name
    found = schedules(tenant)
    name = schedule_name(tenant, "report", 0, 0)
    assert list(found) == [name]
    schedule = found[name]
    # And it fires the AWS form of the expression, in the trigger's time zone
    assert schedule["ScheduleExpression"] == "cron(0 9 ? * MON-FRI *)"
    assert schedule["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert schedule["State"] == "ENABLED"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    # And it invokes the trigger function as the scheduler role, with the routing fields,
    # Scheduler's scheduled time and the declared input
    settings = get_settings()
    target = schedule["Target"]
    assert (target["Arn"], target["RoleArn"]) == (
        settings.trigger_function_arn,
        settings.scheduler_role_arn,
    )
    assert json.loads(target["Input"]) == {
        "kind": "schedule",
        "tenant": tenant,
        "workflow_id": "report",
        "trigger_index": 0,
        "scheduled_time": "<aws.scheduler.scheduled-time>",
        "input": {"kind": "daily"},
    }


def test_syncing_again_creates_no_duplicates(plane, tenant):
    # Given a workflow with a cron trigger
    with_cron = definition("report", cron("*/15 * * * *"))
    plane.put_workflow(tenant, "report", with_cron)
    before = schedules(tenant)
    # When the same definition is PUT again, and then one with another step
    plane.put_workflow(tenant, "report", with_cron)
    plane.put_workflow(tenant, "report", definition("report", cron("*/15 * * * *"), label="v2"))
    # Then the group still holds exactly the one schedule, unchanged
    after = schedules(tenant)
    assert list(after) == list(before)
    assert after[next(iter(after))]["ScheduleExpression"] == "cron(0/15 * * * ? *)"


def test_a_changed_cron_updates_its_schedule_in_place(plane, tenant):
    plane.put_workflow(tenant, "report", definition("report", cron("0 9 * * *")))
    # When only the trigger changes
    result = plane.put_workflow(
        tenant, "report", definition("report", cron("30 18 * * *", "America/New_York"))
    )
    # Then that is a new version (triggers are part of the definition) ...
    assert result.version == 2
    assert plane.get_workflow(tenant, "report").definition["triggers"][0]["cron"] == "30 18 * * *"
    # ... and the one schedule now fires the new expression in the new time zone
    (schedule,) = schedules(tenant).values()
    assert schedule["ScheduleExpression"] == "cron(30 18 * * ? *)"
    assert schedule["ScheduleExpressionTimezone"] == "America/New_York"


def test_day_of_month_or_day_of_week_becomes_two_schedules_and_both_go_with_it(plane, tenant):
    # When a cron restricts both day fields (cron fires when either matches)
    plane.put_workflow(tenant, "report", definition("report", cron("0 9 1 * MON")))
    # Then it takes two schedules, one per day field
    found = schedules(tenant)
    assert sorted(s["ScheduleExpression"] for s in found.values()) == [
        "cron(0 9 1 * ? *)",
        "cron(0 9 ? * MON *)",
    ]
    assert set(found) == {schedule_name(tenant, "report", 0, p) for p in (0, 1)}
    # When the trigger becomes a plain daily cron
    plane.put_workflow(tenant, "report", definition("report", cron("0 9 * * *")))
    # Then the second schedule is gone
    assert list(schedules(tenant)) == [schedule_name(tenant, "report", 0, 0)]


def test_an_at_trigger_is_a_one_time_schedule_that_deletes_itself(plane, tenant):
    # When a workflow declares a one-time start in Berlin time
    when = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0, tzinfo=None)
    at = {"type": "at", "at": when.isoformat(), "timezone": "Europe/Berlin", "input": {"n": 1}}
    result = plane.put_workflow(tenant, "report", definition("report", at))
    # Then it is an at() schedule in that time zone, deleted after it has fired
    (schedule,) = schedules(tenant).values()
    assert schedule["ScheduleExpression"] == f"at({when:%Y-%m-%dT%H:%M:%S})"
    assert schedule["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert result.warnings == []


def test_an_at_time_that_has_passed_makes_no_schedule_and_a_warning(plane, tenant):
    past = {"type": "at", "at": "2020-01-01T09:00:00", "timezone": "UTC"}
    result = plane.put_workflow(tenant, "report", definition("report", past))
    assert schedules(tenant) == {}
    assert len(result.warnings) == 1 and "has passed" in result.warnings[0]


def test_delete_removes_schedules_and_rules_and_put_brings_them_back(plane, tenant):
    # Given a workflow with a schedule and an event subscription
    declared = definition(
        "report", cron("0 9 * * *"), {"type": "event", "source": "shop", "detail_type": "sold"}
    )
    plane.put_workflow(tenant, "report", declared)
    assert len(schedules(tenant)) == 1 and len(rules(tenant)) == 1
    # When it is deleted (disabled)
    plane.delete_workflow(tenant, "report")
    # Then neither is left, and a repeated DELETE is fine
    assert schedules(tenant) == {} and rules(tenant) == {}
    plane.delete_workflow(tenant, "report")
    # When it is PUT again, it is enabled with both again
    plane.put_workflow(tenant, "report", declared)
    assert len(schedules(tenant)) == 1 and len(rules(tenant)) == 1


def test_triggers_removed_from_the_definition_lose_their_schedules_and_rules(plane, tenant):
    plane.put_workflow(
        tenant,
        "report",
        definition(
            "report", cron("0 9 * * *"), {"type": "event", "source": "shop"}, cron("0 18 * * *")
        ),
    )
    assert len(schedules(tenant)) == 2 and len(rules(tenant)) == 1
    # When the definition keeps only the first trigger
    plane.put_workflow(tenant, "report", definition("report", cron("0 9 * * *")))
    # Then only its schedule is left
    assert list(schedules(tenant)) == [schedule_name(tenant, "report", 0, 0)]
    assert rules(tenant) == {}


def test_rollback_registers_the_triggers_of_the_version_it_makes_live(plane, tenant):
    plane.put_workflow(tenant, "report", definition("report", cron("0 9 * * *")))
    plane.put_workflow(tenant, "report", definition("report", cron("0 21 * * *")))
    # When version 1 is made live again
    plane.rollback_workflow(tenant, "report", 1)
    # Then its schedule fires again
    (schedule,) = schedules(tenant).values()
    assert schedule["ScheduleExpression"] == "cron(0 9 * * ? *)"


def test_a_cron_scheduler_cannot_express_is_a_problem_at_its_path_and_nothing_is_stored(
    plane, tenant
):
    # When a cron that never fires (the 30th of February) is PUT
    with pytest.raises(InvalidDefinition) as info:
        plane.put_workflow(tenant, "report", definition("report", cron("0 0 30 2 *")))
    # Then the problem names the trigger's cron, and neither workflow nor schedule exists
    assert [p["path"] for p in info.value.details] == ["triggers[0].cron"]
    assert plane.dal.get_workflow(tenant, "report") is None
    assert schedules(tenant) == {}


# ----------------------------------------------------------------------------- event rules


def test_an_event_trigger_is_a_rule_scoped_to_the_tenant_targeting_the_trigger_function(
    plane, tenant
):
    # When a workflow subscribes by source and detail-type, and another by a full pattern
    plane.put_workflow(
        tenant,
        "report",
        definition(
            "report",
            {"type": "event", "source": "shop", "detail_type": "order.created"},
            {
                "type": "event",
                "pattern": {
                    "source": [{"prefix": "shop"}],
                    "detail": {"total": [{"numeric": [">", 100]}], "relayflow_tenant": ["x"]},
                },
            },
        ),
    )
    found = rules(tenant)
    # Then each gets a rule on the Relayflow bus that also requires the tenant
    first, second = (found[rule_name(tenant, "report", i)] for i in (0, 1))
    assert json.loads(first["EventPattern"]) == {
        "source": ["shop"],
        "detail-type": ["order.created"],
        "detail": {"relayflow_tenant": [tenant]},
    }
    assert json.loads(second["EventPattern"]) == {
        "source": [{"prefix": "shop"}],
        "detail": {"total": [{"numeric": [">", 100]}], "relayflow_tenant": [tenant]},
    }
    # And targets the trigger function with the routing fields and the whole event
    (target,) = first["Targets"]
    assert target["Arn"] == get_settings().trigger_function_arn
    template = target["InputTransformer"]["InputTemplate"]
    sample = json.loads(template.replace("<aws.events.event.json>", '{"id": "e-1"}'))
    assert sample == {
        "kind": "event",
        "tenant": tenant,
        "workflow_id": "report",
        "trigger_index": 0,
        "event": {"id": "e-1"},
    }


def test_a_malformed_event_pattern_is_a_problem_at_its_path(plane, tenant):
    bad = {"type": "event", "pattern": {"source": "shop"}}
    with pytest.raises(InvalidDefinition) as info:
        plane.put_workflow(tenant, "report", definition("report", bad))
    assert [p["path"] for p in info.value.details] == ["triggers[0].pattern.source"]
    assert rules(tenant) == {}


# ----------------------------------------------------------------------------- webhook slugs


def hook(slug: str) -> dict[str, Any]:
    return {"type": "webhook", "slug": slug}


def test_webhook_slugs_are_registered_moved_and_disabled_with_the_workflow(plane, tenant):
    slug = f"in-{tenant}"
    # When a workflow declares a webhook
    plane.put_workflow(tenant, "report", definition("report", cron("0 9 * * *"), hook(slug)))
    # Then its slug points at the workflow's trigger
    registered = plane.dal.get_hook(slug)
    assert (registered.tenant, registered.workflow_id, registered.trigger_index) == (
        tenant,
        "report",
        1,
    )
    assert registered.enabled
    # When the workflow is deleted, the slug stays reserved but disabled
    plane.delete_workflow(tenant, "report")
    assert plane.dal.get_hook(slug).enabled is False
    # When it is PUT again without the webhook, the slug is released
    plane.put_workflow(tenant, "report", definition("report"))
    assert plane.dal.get_hook(slug) is None


def test_a_slug_of_another_tenant_or_workflow_is_a_conflict_and_nothing_is_stored(plane, tenant):
    slug = f"in-{tenant}"
    plane.put_workflow(tenant, "report", definition("report", hook(slug)))
    other = f"o-{uuid.uuid4().hex[:10]}"
    # When another tenant, or another workflow of the same tenant, declares the same slug
    for who, workflow_id in ((other, "report"), (tenant, "second")):
        with pytest.raises(Conflict) as info:
            plane.put_workflow(
                who, workflow_id, definition(workflow_id, cron("0 9 * * *"), hook(slug))
            )
        # Then it is refused with the trigger's path, and nothing of it is stored
        assert info.value.details == {"path": "triggers[1].slug", "slug": slug}
        assert plane.dal.get_workflow(who, workflow_id) is None
        assert schedules(who, workflow_id) == {}
    assert plane.dal.get_hook(slug).tenant == tenant
    # And a deleted workflow's slug may be taken by another workflow of the same tenant
    plane.delete_workflow(tenant, "report")
    plane.put_workflow(tenant, "second", definition("second", hook(slug)))
    assert plane.dal.get_hook(slug).workflow_id == "second"


# ----------------------------------------------------------------------------- dispatch


def invoke_trigger(delivery: dict[str, Any]) -> dict[str, Any]:
    """The trigger function's handler, as Lambda calls it."""
    context = LambdaContext(
        function_name="relayflow-trigger", invoked_function_arn=get_settings().trigger_function_arn
    )
    return load_handler("trigger").handler(delivery, context)


def runs_of(plane: ControlPlane, tenant: str, workflow_id: str = "report") -> list[Any]:
    return plane.list_runs(tenant, workflow_id).items


def test_a_schedule_fired_twice_for_the_same_time_starts_one_run(plane, router, tenant):
    plane.put_workflow(tenant, "report", definition("report", cron("0 9 * * *", kind="daily")))
    name = schedule_name(tenant, "report", 0, 0)
    # When Scheduler delivers the same scheduled time twice (a retry)
    first = router.fire_schedule(name, "2026-12-01T09:00:00Z")
    again = router.fire_schedule(name, "2026-12-01T09:00:00Z")
    # Then the first starts a run and the second finds it
    assert first.result["status"] == "started" and again.result["status"] == "duplicate"
    assert first.result["run_id"] == again.result["run_id"]
    (run,) = runs_of(plane, tenant)
    assert run.run_id == first.result["run_id"]
    detail = plane.dal.get_run(tenant, run.run_id)
    assert (detail.trigger_type, detail.idempotency_key) == (
        "schedule",
        "schedule:0:2026-12-01T09:00:00Z",
    )
    assert json.loads(detail.input) == {"kind": "daily"}
    # When the next day's time fires, that is a second run
    following = router.fire_schedule(name, "2026-12-02T09:00:00Z")
    assert following.result["status"] == "started"
    assert len(runs_of(plane, tenant)) == 2


def test_a_schedule_of_a_disabled_workflow_starts_nothing(plane, tenant):
    plane.put_workflow(tenant, "report", definition("report", cron("0 9 * * *")))
    plane.delete_workflow(tenant, "report")
    delivery = {**load_event("trigger", "schedule"), "tenant": tenant, "workflow_id": "report"}
    # When a delivery still arrives (it was on its way when the workflow was deleted)
    result = invoke_trigger(delivery)
    # Then it is skipped, saying why
    assert result["status"] == "skipped" and "disabled" in result["reason"]
    assert runs_of(plane, tenant) == []


def test_a_schedule_whose_trigger_is_gone_from_the_live_version_starts_nothing(plane, tenant):
    plane.put_workflow(tenant, "report", definition("report"))
    delivery = {**load_event("trigger", "schedule"), "tenant": tenant, "workflow_id": "report"}
    result = invoke_trigger(delivery)
    assert result["status"] == "skipped" and "triggers[0]" in result["reason"]
    assert runs_of(plane, tenant) == []
