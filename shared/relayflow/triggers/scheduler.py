"""Trigger sync's EventBridge Scheduler calls: the one module that talks to the Scheduler API.

Every ``ClientError`` becomes one of the exceptions below (``raise … from``). The client comes
from :func:`relayflow.adapters.aws.client` unless one is injected, and is looked up at each
call (a warm Lambda and a new local runtime both get the current one).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from relayflow.adapters.port import THROTTLING_CODES, AwsPort

#: What :meth:`Schedules.put` did.
PutOutcome = Literal["created", "updated", "unchanged"]


class SchedulerError(Exception):
    """EventBridge Scheduler refused or failed a request."""


class SchedulerThrottled(SchedulerError):
    """Scheduler throttled the request even after the client's retries."""


class ScheduleRejected(SchedulerError):
    """Scheduler refused a schedule's configuration (its expression, time zone, target)."""


class ScheduleMissing(SchedulerError):
    """No such schedule (or schedule group)."""


class ScheduleExists(SchedulerError):
    """A schedule of that name exists already."""


@dataclass(frozen=True)
class ScheduleSpec:
    """One schedule as trigger sync wants it: fires ``target_arn`` with ``input`` (JSON text)
    at ``expression`` (``cron(…)`` or ``at(…)``) in ``timezone``."""

    name: str
    expression: str
    timezone: str
    target_arn: str
    role_arn: str
    input: str
    description: str
    #: One-time (``at``) schedules delete themselves once they have fired.
    delete_after_completion: bool = False
    #: SQS queue for what Scheduler could not deliver (``settings.trigger_dead_letter_queue_arn``).
    dead_letter_arn: str | None = None

    def request(self, group: str) -> dict[str, Any]:
        """The CreateSchedule / UpdateSchedule parameters."""
        params: dict[str, Any] = {
            "Name": self.name,
            "GroupName": group,
            "ScheduleExpression": self.expression,
            "ScheduleExpressionTimezone": self.timezone,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED",
            "Description": self.description,
            "Target": {
                "Arn": self.target_arn,
                "RoleArn": self.role_arn,
                "Input": self.input,
                # Lambda's asynchronous invocation retries on its own; a run missed for a day
                # is better skipped than started late.
                "RetryPolicy": {"MaximumEventAgeInSeconds": 86_400, "MaximumRetryAttempts": 3},
            },
        }
        if self.dead_letter_arn:
            # Undeliverable after the retries: kept in the queue, not dropped.
            params["Target"]["DeadLetterConfig"] = {"Arn": self.dead_letter_arn}
        if self.delete_after_completion:
            params["ActionAfterCompletion"] = "DELETE"
        return params

    def matches(self, found: dict[str, Any]) -> bool:
        """Whether a GetSchedule answer already is this schedule."""
        target = found.get("Target") or {}
        action = found.get("ActionAfterCompletion") or "NONE"
        return (
            found.get("ScheduleExpression") == self.expression
            and (found.get("ScheduleExpressionTimezone") or "UTC") == self.timezone
            and found.get("State") == "ENABLED"
            and found.get("Description") == self.description
            and target.get("Arn") == self.target_arn
            and target.get("RoleArn") == self.role_arn
            and _same_json(target.get("Input"), self.input)
            and (target.get("DeadLetterConfig") or {}).get("Arn") == self.dead_letter_arn
            and action == ("DELETE" if self.delete_after_completion else "NONE")
        )


def _same_json(found: Any, wanted: str) -> bool:
    try:
        return isinstance(found, str) and json.loads(found) == json.loads(wanted)
    except ValueError:
        return False


class Schedules(AwsPort):
    """The schedules of one schedule group (``group``, e.g. ``settings.schedule_group_name``)."""

    service = "scheduler"
    error = SchedulerError
    errors = {
        **dict.fromkeys(THROTTLING_CODES, SchedulerThrottled),
        "ResourceNotFoundException": ScheduleMissing,
        "ConflictException": ScheduleExists,
        "ValidationException": ScheduleRejected,
    }

    def __init__(self, group: str, client: Any | None = None) -> None:
        super().__init__(client)
        self.group = group

    def get(self, name: str) -> dict[str, Any] | None:
        try:
            return self._call("get_schedule", Name=name, GroupName=self.group)
        except ScheduleMissing:
            return None

    def put(self, spec: ScheduleSpec) -> PutOutcome:
        """Create the schedule, or update the one of that name; nothing when it is already
        as wanted. Names are deterministic, so repeating this never makes a duplicate."""
        found = self.get(spec.name)
        if found is None:
            try:
                self._call("create_schedule", **spec.request(self.group))
                return "created"
            except ScheduleExists:
                found = self.get(spec.name) or {}  # created concurrently: update it
        if spec.matches(found):
            return "unchanged"
        if (found.get("ActionAfterCompletion") or "NONE") != (
            "DELETE" if spec.delete_after_completion else "NONE"
        ):
            # A trigger changed between cron and at: replace rather than update, so the
            # completion action is certain to follow.
            self.delete(spec.name)
            self._call("create_schedule", **spec.request(self.group))
            return "updated"
        self._call("update_schedule", **spec.request(self.group))
        return "updated"

    def delete(self, name: str) -> bool:
        """Delete a schedule; ``False`` when it did not exist (an ``at`` schedule deletes
        itself once it has fired)."""
        try:
            self._call("delete_schedule", Name=name, GroupName=self.group)
        except ScheduleMissing:
            return False
        return True

    def names(self, prefix: str | None = None) -> Iterator[str]:
        """Every schedule name in the group (all pages)."""
        params: dict[str, Any] = {"GroupName": self.group}
        if prefix:
            params["NamePrefix"] = prefix
        while True:
            try:
                response = self._call("list_schedules", **params)
            except ScheduleMissing:
                return  # no group: no schedules
            for schedule in response.get("Schedules", []):
                yield str(schedule["Name"])
            token = response.get("NextToken")
            if not token:
                return
            params["NextToken"] = token

    def ensure_group(self) -> bool:
        """Create the group unless it exists; returns whether it was created. On AWS the
        stack declares the group (and the API function may not create one): this is for the
        local runtime, whose moto starts without it."""
        try:
            self._call("get_schedule_group", Name=self.group)
        except ScheduleMissing:
            with contextlib.suppress(ScheduleExists):  # created concurrently
                self._call("create_schedule_group", Name=self.group)
            return True
        return False
