"""Failure notifications without the network: the definition's ``notifications`` field, the
notification a run end makes, and which run ends notify."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from relayflow.compiler import CompileOptions, compile_workflow
from relayflow.control.workflow_publish import same_triggers
from relayflow.dal import RunItem
from relayflow.definition.models import NotificationSettings
from relayflow.notify import (
    Delivery,
    EmailChannel,
    Notification,
    WebhookChannel,
    channels_from_config,
)
from relayflow.notify.failure import (
    CAUSE_LIMIT_BYTES,
    notify_run_end,
    run_end_notification,
    truncate_cause,
)
from relayflow.settings import override_settings
from relayflow.validation import load_workflow_text, validate_data

BASE: dict[str, Any] = {"id": "order-triage", "start": "a", "steps": {"a": {"type": "noop"}}}
HOOK = {"url": "https://hooks.example.com/relayflow", "secret": {"name": "relayflow/alerts"}}


def problems(notifications: Any) -> set[tuple[str, str]]:
    workflow, found = validate_data({**BASE, "notifications": notifications}, "wf.yaml")
    assert workflow is None
    return {(p.path, p.rule) for p in found}


def failed_run(**fields: Any) -> RunItem:
    values: dict[str, Any] = {
        "run_id": "3f2a9c1e-0000-4000-8000-000000000001",
        "tenant": "acme",
        "workflow_id": "order-triage",
        "version": 3,
        "status": "failed",
        "error": "Payment.Declined",
        "cause": "card declined",
        "failing_step": "charge_card",
        "started_at": "2030-01-01T09:00:00.000Z",
        "ended_at": "2030-01-01T09:00:04.000Z",
    }
    return RunItem(**{**values, **fields})


class Recording:
    """A channel that keeps what it was asked to send."""

    kind: ClassVar[str] = "recording"

    def __init__(self) -> None:
        self.sent: list[Notification] = []

    def send(self, notification: Notification) -> Delivery:
        self.sent.append(notification)
        return Delivery(channel=self.kind, ok=True)


# --------------------------------------------------------------------------- the definition


def test_a_yaml_definition_with_both_channels_parses_with_the_default_outcomes():
    # Given the documented YAML form (from: an alias; on: not a YAML 1.1 boolean)
    text = """
id: order-triage
start: a
steps: {a: {type: noop}}
notifications:
  webhook: {url: https://hooks.example.com/relayflow, secret: {name: relayflow/alerts},
            headers: {X-Team: payments}}
  email: {to: [ops@example.com], from: alerts@example.com}
"""
    # When it is loaded
    workflow = load_workflow_text(text)
    # Then both channels and the default outcomes are there
    settings = workflow.notifications
    assert settings is not None
    assert settings.on == ["failed", "timed_out"]
    assert settings.webhook is not None and settings.webhook.secret is not None
    assert settings.webhook.secret.name == "relayflow/alerts"
    assert settings.webhook.headers == {"X-Team": "payments"}
    assert settings.email is not None
    assert (settings.email.to, settings.email.sender) == (["ops@example.com"], "alerts@example.com")


def test_notifications_without_a_channel_are_refused_at_notifications():
    assert problems({"on": ["failed"]}) == {("notifications", "notification-channel")}


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("ftp://hooks.example.com/x", "url"),
        ("hooks.example.com/x", "url"),
        ("https:///no-host", "url"),
        ("http://[::1", "url"),
        ("https://hooks.example.com/{{ run.id }}", "notification-url"),
    ],
)
def test_a_webhook_url_must_be_a_literal_http_url(url, rule):
    assert problems({"webhook": {"url": url}}) == {("notifications.webhook.url", rule)}


def test_email_addresses_are_checked_where_they_are():
    found = problems({"email": {"to": ["ops@example.com", "not-an-address"], "from": "a b@x.io"}})
    assert found == {("notifications.email.to[1]", "email"), ("notifications.email.from", "email")}


def test_only_bad_outcomes_can_notify():
    found = problems({"on": ["failed", "succeeded"], "webhook": HOOK})
    assert found == {("notifications.on[1]", "literal-error")}
    assert problems({"on": [], "webhook": HOOK}) == {("notifications.on", "too-short")}


def test_notifications_are_not_compiled_but_still_make_a_new_version():
    # Given the same workflow with and without notifications
    plain = load_workflow_text(json.dumps(BASE), fmt="json")
    with_hook = load_workflow_text(json.dumps({**BASE, "notifications": {"webhook": HOOK}}))
    # Then their state machines are identical
    options = CompileOptions()
    assert compile_workflow(plain, options).asl == compile_workflow(with_hook, options).asl
    # And yet the control plane does not take one for the other
    one_hook = {**BASE, "notifications": {"webhook": HOOK}}
    other_hook = {**BASE, "notifications": {"webhook": HOOK, "on": ["aborted"]}}
    assert not same_triggers(json.dumps(BASE), json.dumps(one_hook))
    assert not same_triggers(json.dumps(one_hook), json.dumps(other_hook))
    assert same_triggers(json.dumps(other_hook), json.dumps(other_hook))


def test_the_json_schema_documents_the_field():
    from relayflow.definition.models import Workflow

    schema = json.dumps(Workflow.model_json_schema(by_alias=True))
    assert "NotificationSettings" in schema and '"from"' in schema


# --------------------------------------------------------------------------- channels from config


def test_channels_come_webhook_first_and_email_falls_back_to_the_sender_setting():
    settings = NotificationSettings.model_validate(
        {"webhook": HOOK, "email": {"to": ["ops@example.com"]}}
    )
    with override_settings(notification_sender="relayflow@example.com"):
        webhook, email = channels_from_config(settings)
    assert isinstance(webhook, WebhookChannel) and isinstance(email, EmailChannel)
    assert webhook.url == HOOK["url"] and webhook.secret == settings.webhook.secret
    assert (email.to, email.sender) == (["ops@example.com"], "relayflow@example.com")


def test_a_webhook_channel_keeps_its_own_headers():
    channel = WebhookChannel(
        "https://h.example.com/", headers={"X-Relayflow-Signature": "forged", "X-Team": "a"}
    )
    assert channel.headers == {"X-Team": "a"}


def test_an_email_without_any_sender_is_not_sent_and_says_why():
    with override_settings(notification_sender=None):
        (email,) = channels_from_config({"email": {"to": ["ops@example.com"]}})
    delivery = email.send(run_end_notification(failed_run()))
    assert (delivery.ok, delivery.attempts) == (False, 0)
    assert "no sender" in delivery.detail


# --------------------------------------------------------------------------- run ends


def test_a_failed_run_notification_names_the_run_the_step_and_the_error():
    # Given a run that failed at charge_card
    run = failed_run()
    # When its notification is made
    note = run_end_notification(run)
    # Then subject, payload and body say what happened
    assert note.subject == (
        "Relayflow: order-triage run 3f2a9c1e… failed at charge_card (Payment.Declined)"
    )
    assert note.event == "relayflow.run.failed" and note.tenant == "acme"
    assert note.id == f"{run.run_id}:1:failed"
    assert note.data == {
        "type": "relayflow.run.failed",
        "tenant": "acme",
        "workflow_id": "order-triage",
        "run_id": run.run_id,
        "attempt": 1,
        "version": 3,
        "status": "failed",
        "failing_step": "charge_card",
        "error": "Payment.Declined",
        "cause": "card declined",
        "started_at": "2030-01-01T09:00:00.000Z",
        "ended_at": "2030-01-01T09:00:04.000Z",
    }
    assert "Failing step: charge_card\nError: Payment.Declined\nCause: card declined" in note.text


def test_a_timed_out_run_without_a_failing_step_reads_naturally():
    note = run_end_notification(
        failed_run(status="timed_out", failing_step=None, error="States.Timeout", run_id="r1")
    )
    assert note.subject == "Relayflow: order-triage run r1 timed out (States.Timeout)"
    assert "Failing step" not in note.text


def test_a_long_cause_is_cut_to_about_two_kilobytes_without_splitting_a_character():
    cause = "é" * 5000  # two bytes each
    cut = truncate_cause(cause)
    assert cut is not None and cut.endswith("…")
    assert len(cut[:-1].encode("utf-8")) <= CAUSE_LIMIT_BYTES
    assert run_end_notification(failed_run(cause=cause)).data["cause"] == cut
    assert truncate_cause("short") == "short" and truncate_cause(None) is None


def test_a_subject_stays_on_one_line():
    note = run_end_notification(failed_run(error="Bad.Thing\r\nBcc: x@example.com"))
    assert "\n" not in note.subject and "\r" not in note.subject


@pytest.mark.parametrize(
    ("status", "on", "sends"),
    [
        ("failed", None, True),
        ("timed_out", None, True),
        ("aborted", None, False),
        ("aborted", ["aborted"], True),
        ("failed", ["timed_out"], False),
        ("succeeded", ["failed", "timed_out", "aborted"], False),
        ("running", ["failed", "timed_out", "aborted"], False),
    ],
)
def test_a_run_end_notifies_only_for_the_outcomes_listed_in_on(status, on, sends):
    # Given notifications (default or explicit on) and a run that ended with status
    config: dict[str, Any] = {"webhook": HOOK, **({"on": on} if on is not None else {})}
    channel = Recording()
    # When the run end is handled
    deliveries = notify_run_end(failed_run(status=status), config, channels=[channel])
    # Then the channel was used exactly when the status is listed
    assert [n.data["status"] for n in channel.sent] == ([status] if sends else [])
    assert len(deliveries) == (1 if sends else 0)


def test_no_notifications_configured_sends_nothing():
    assert notify_run_end(failed_run(), None) == []
