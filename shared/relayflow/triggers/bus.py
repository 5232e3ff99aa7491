"""Trigger sync's and ``POST /events``' EventBridge calls: the one trigger module that talks to
the EventBridge API (rules and targets on the Relayflow bus, and publishing events).

Every ``ClientError`` becomes one of the exceptions below (``raise … from``). The client comes
from :func:`relayflow.adapters.aws.client` unless one is injected, and is looked up at each
call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relayflow.adapters.port import THROTTLING_CODES, AwsPort

#: The id of the one target every subscription rule has: the trigger function.
TARGET_ID = "relayflow-trigger"


class EventBusError(Exception):
    """EventBridge refused or failed a request."""


class EventBusThrottled(EventBusError):
    """EventBridge throttled the request even after the client's retries."""


class InvalidPattern(EventBusError):
    """EventBridge refused an event pattern."""


class RuleMissing(EventBusError):
    """No such rule (or bus)."""


class PublishRejected(EventBusError):
    """EventBridge accepted the request but refused the event (``FailedEntryCount``)."""


@dataclass(frozen=True)
class RuleSpec:
    """One subscription rule: ``pattern`` on the bus, delivering ``input_template`` (an
    InputTransformer template; ``<event>`` is the whole event) to ``target_arn``."""

    name: str
    pattern: Mapping[str, Any]
    target_arn: str
    input_template: str
    description: str
    #: SQS queue for events EventBridge could not deliver
    #: (``settings.trigger_dead_letter_queue_arn``).
    dead_letter_arn: str | None = None


class EventBus(AwsPort):
    """The rules of one bus (``name``, e.g. ``settings.event_bus_name``) and publishing to it."""

    service = "events"
    error = EventBusError
    errors = {
        **dict.fromkeys(THROTTLING_CODES, EventBusThrottled),
        "InvalidEventPatternException": InvalidPattern,
        "ResourceNotFoundException": RuleMissing,
    }

    def __init__(self, name: str, client: Any | None = None) -> None:
        super().__init__(client)
        self.name = name

    # -- rules -------------------------------------------------------------------------------

    def put_rule(self, spec: RuleSpec) -> None:
        """Create or replace the rule and its one target (both calls are idempotent)."""
        self._call(
            "put_rule",
            Name=spec.name,
            EventBusName=self.name,
            EventPattern=json.dumps(spec.pattern, separators=(",", ":"), sort_keys=True),
            State="ENABLED",
            Description=spec.description,
        )
        target: dict[str, Any] = {
            "Id": TARGET_ID,
            "Arn": spec.target_arn,
            "InputTransformer": {"InputTemplate": spec.input_template},
            "RetryPolicy": {"MaximumRetryAttempts": 4, "MaximumEventAgeInSeconds": 3600},
        }
        if spec.dead_letter_arn:
            target["DeadLetterConfig"] = {"Arn": spec.dead_letter_arn}
        response = self._call(
            "put_targets", Rule=spec.name, EventBusName=self.name, Targets=[target]
        )
        if response.get("FailedEntryCount"):
            failed = response.get("FailedEntries") or [{}]
            raise EventBusError(
                f"put_targets: {failed[0].get('ErrorCode')}: {failed[0].get('ErrorMessage')}"
            )

    def delete_rule(self, name: str) -> bool:
        """Remove the rule's targets, then the rule; ``False`` when it did not exist."""
        found = self.describe(name)
        if found is None:
            return False
        ids = [t["Id"] for t in found[1]]
        if ids:
            self._call("remove_targets", Rule=name, EventBusName=self.name, Ids=ids)
        self._call("delete_rule", Name=name, EventBusName=self.name)
        return True

    def rule_names(self, prefix: str) -> list[str]:
        """The names of the bus's rules that start with ``prefix`` (all pages)."""
        params: dict[str, Any] = {"EventBusName": self.name, "NamePrefix": prefix}
        names: list[str] = []
        while True:
            response = self._call("list_rules", **params)
            names.extend(
                str(rule["Name"])
                for rule in response.get("Rules", [])
                if str(rule["Name"]).startswith(prefix)
            )
            token = response.get("NextToken")
            if not token:
                return names
            params["NextToken"] = token

    def describe(self, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """The rule and its targets, or ``None``."""
        try:
            rule = self._call("describe_rule", Name=name, EventBusName=self.name)
        except RuleMissing:
            return None
        targets = self._call("list_targets_by_rule", Rule=name, EventBusName=self.name)
        return rule, list(targets.get("Targets", []))

    # -- events ------------------------------------------------------------------------------

    def publish(self, source: str, detail_type: str, detail: Mapping[str, Any]) -> str:
        """Put one event on the bus; returns its id."""
        response = self._call(
            "put_events",
            Entries=[
                {
                    "EventBusName": self.name,
                    "Source": source,
                    "DetailType": detail_type,
                    "Detail": json.dumps(detail, separators=(",", ":"), ensure_ascii=False),
                }
            ],
        )
        entry = (response.get("Entries") or [{}])[0]
        if response.get("FailedEntryCount") or "EventId" not in entry:
            raise PublishRejected(
                f"put_events: {entry.get('ErrorCode')}: {entry.get('ErrorMessage')}"
            )
        return str(entry["EventId"])
