"""Local stand-in for EventBridge Scheduler's one-time schedules of run admission.

Schedules do not fire on their own in moto. The debounce and batch deadlines
(:mod:`relayflow.control.admission`, names ``rf-adm-…``) are ``at()`` schedules that delete
themselves after firing; :func:`fire_due_deadlines` does what Scheduler does with them once
their time has come: delivers the input to the trigger function, oldest first, then deletes
the schedule. ``relayflow serve`` calls it on its maintenance interval; tests call it with a
controllable clock's time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

#: What every admission deadline's name starts with.
DEADLINE_PREFIX = "rf-adm-"


def fire_due_deadlines(router: Any, scheduler: Any, now: float) -> int:
    """Fire every admission deadline due at ``now`` (epoch seconds), oldest first, until
    none is due (a firing may schedule a later one); returns how many fired."""
    from relayflow.settings import get_settings

    group = get_settings().schedule_group_name
    fired = 0
    while True:
        due: list[tuple[datetime, str]] = []
        params: dict[str, Any] = {"GroupName": group, "NamePrefix": DEADLINE_PREFIX}
        while True:
            page = scheduler.list_schedules(**params)
            for entry in page.get("Schedules", []):
                found = scheduler.get_schedule(Name=entry["Name"], GroupName=group)
                expression = str(found["ScheduleExpression"])  # at(yyyy-mm-ddThh:mm:ss), UTC
                moment = datetime.fromisoformat(expression[3:-1]).replace(tzinfo=UTC)
                if moment.timestamp() <= now:
                    due.append((moment, entry["Name"]))
            if not page.get("NextToken"):
                break
            params["NextToken"] = page["NextToken"]
        if not due:
            return fired
        for moment, name in sorted(due):
            router.fire_schedule(name, moment, wait=True)
            scheduler.delete_schedule(Name=name, GroupName=group)
            fired += 1
