"""Notification channels against a real HTTP server on 127.0.0.1 and SES, Secrets Manager in
moto: what a receiver gets, how failures come back (never raised), and a failed run's
notification end to end."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from relayflow_testing import Received, Reply, fresh_allowed_server

from relayflow.dal import RunItem
from relayflow.local import LocalRuntime
from relayflow.net.http import verify_signature
from relayflow.notify import EmailChannel, Notification, WebhookChannel
from relayflow.notify.failure import notify_run_end
from relayflow.observability import logger
from relayflow.settings import override_settings

pytestmark = pytest.mark.integration
ALERT_SECRET = "alert-signing-key"
SENDER = "alerts@example.com"


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with LocalRuntime() as rt:
        rt.client("secretsmanager").create_secret(
            Name="relayflow/local/acme/alerts", SecretString=ALERT_SECRET
        )
        rt.client("ses").verify_email_identity(EmailAddress=SENDER)
        yield rt


server = pytest.fixture(fresh_allowed_server, name="server")


def sent_emails(runtime: LocalRuntime) -> list[Any]:
    from moto.ses.models import ses_backends

    return ses_backends[runtime.account][runtime.region].sent_messages


def note(**fields: Any) -> Notification:
    values: dict[str, Any] = {
        "event": "relayflow.run.failed",
        "tenant": "acme",
        "subject": "Relayflow: wf run r1 failed",
        "text": "Run r1 failed.\n",
        "data": {"run_id": "r1", "note": "café"},
        "id": "r1:failed",
    }
    return Notification(**{**values, **fields})


def answers(*statuses: int) -> Any:
    """A reply function answering ``statuses`` in turn (the last one from then on)."""
    queue = list(statuses)

    def reply(received: Received) -> Reply:
        status = queue.pop(0) if len(queue) > 1 else queue[0]
        return status, {"Content-Type": "text/plain"}, b"nope" if status >= 300 else b"ok"

    return reply


# --------------------------------------------------------------------------- webhook


def test_a_webhook_posts_the_envelope_as_json_signed_over_the_exact_body(runtime, server):
    # Given a signed webhook channel with an extra header
    channel = WebhookChannel(f"{server.url}/alerts", {"name": "alerts"}, {"X-Team": "payments"})
    # When a notification goes out
    delivery = channel.send(note())
    # Then the receiver got one JSON POST whose signature verifies with the secret
    assert (delivery.ok, delivery.status, delivery.attempts) == (True, 200, 1)
    (sent,) = server.requests
    assert (sent.method, sent.path) == ("POST", "/alerts")
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["x-relayflow-event"] == "relayflow.run.failed"
    assert sent.headers["x-relayflow-delivery"] == "r1:failed"
    assert sent.headers["x-team"] == "payments"
    assert verify_signature(sent.body, ALERT_SECRET, sent.headers["x-relayflow-signature"])
    assert not verify_signature(
        sent.body + b" ", ALERT_SECRET, sent.headers["x-relayflow-signature"]
    )
    body = json.loads(sent.body)
    assert body.pop("sent_at").endswith("Z")
    assert body == {
        "id": "r1:failed",
        "event": "relayflow.run.failed",
        "tenant": "acme",
        "subject": "Relayflow: wf run r1 failed",
        "text": "Run r1 failed.\n",
        "data": {"run_id": "r1", "note": "café"},
    }


def test_a_webhook_without_a_secret_is_sent_unsigned(runtime, server):
    assert WebhookChannel(f"{server.url}/plain").send(note()).ok
    (sent,) = server.requests
    assert "x-relayflow-signature" not in sent.headers


def test_an_error_status_is_a_failed_delivery_not_an_exception_and_not_retried(runtime, server):
    server.reply = answers(500)
    delivery = WebhookChannel(f"{server.url}/alerts", retry_delay=0).send(note())
    assert (delivery.ok, delivery.status, delivery.attempts) == (False, 500, 1)
    assert delivery.detail.startswith("Relayflow.HttpError: POST ")
    assert len(server.requests) == 1


def test_a_transient_answer_is_retried_once(runtime, server):
    # Given a receiver that answers 503 once, then 200
    server.reply = answers(503, 200)
    # When a notification goes out, it is delivered on the second try
    delivery = WebhookChannel(f"{server.url}/alerts", retry_delay=0).send(note())
    assert (delivery.ok, delivery.status, delivery.attempts) == (True, 200, 2)
    # And a receiver that keeps answering 503 gets exactly two tries
    server.requests.clear()
    server.reply = answers(503)
    delivery = WebhookChannel(f"{server.url}/alerts", retry_delay=0).send(note())
    assert (delivery.ok, delivery.status, delivery.attempts) == (False, 503, 2)
    assert len(server.requests) == 2


def test_a_refused_url_is_never_requested(runtime):
    # A request that reached 169.254.169.254 would time out (Relayflow.Transient); the guard
    # refuses it before any connection.
    channel = WebhookChannel("http://169.254.169.254/latest/meta-data/", timeout=0.5)
    delivery = channel.send(note())
    assert delivery.ok is False and delivery.status is None
    assert delivery.detail.startswith("Relayflow.SsrfBlocked: ")


def test_a_redirect_to_a_refused_address_is_not_followed(runtime, server):
    server.reply = lambda r: (302, {"Location": "http://169.254.169.254/latest/"}, b"")
    delivery = WebhookChannel(f"{server.url}/alerts", retry_delay=0).send(note())
    assert delivery.ok is False and delivery.detail.startswith("Relayflow.SsrfBlocked: ")
    assert len(server.requests) == 1


def test_an_unreadable_secret_sends_nothing_and_says_which_secret(runtime, server):
    channel = WebhookChannel(f"{server.url}/alerts", {"name": "missing"})
    delivery = channel.send(note())
    assert delivery.ok is False
    assert "missing" in delivery.detail and "relayflow/local/acme/missing" not in delivery.detail
    assert server.requests == []


def test_the_failure_warning_shows_neither_the_path_nor_the_query(runtime, server, caplog):
    # Given a webhook URL that carries a token in its path and query, and a failing receiver
    server.reply = answers(404)
    channel = WebhookChannel(f"{server.url}/hooks/path-token-123?key=query-token-456")
    # When the delivery fails
    assert channel.send(note()).ok is False
    # Then the warning, as the function's log formatter writes it, names the origin only
    (record,) = [r for r in caplog.records if r.getMessage() == "notification not delivered"]
    line = json.loads(logger.registered_formatter.format(record))
    assert line["level"] == "WARNING" and line["status"] == 404
    assert line["target"] == f"{server.url}/…"
    assert "path-token-123" not in json.dumps(line) and "query-token-456" not in json.dumps(line)


# --------------------------------------------------------------------------- email


def test_an_email_is_sent_through_ses_from_the_verified_sender(runtime):
    before = len(sent_emails(runtime))
    delivery = EmailChannel(["ops@example.com", "oncall@example.com"], SENDER).send(note())
    assert delivery.ok and delivery.detail
    (message,) = sent_emails(runtime)[before:]
    assert message.source == SENDER
    assert message.destinations["ToAddresses"] == ["ops@example.com", "oncall@example.com"]
    assert message.subject == "Relayflow: wf run r1 failed"
    assert message.body == "Run r1 failed.\n"


def test_an_unverified_sender_is_a_failed_delivery(runtime):
    before = len(sent_emails(runtime))
    delivery = EmailChannel(["ops@example.com"], "stranger@example.com").send(note())
    assert delivery.ok is False
    assert "MessageRejected" in delivery.detail
    assert len(sent_emails(runtime)) == before


# --------------------------------------------------------------------------- run ends


def run_item(status: str) -> RunItem:
    return RunItem(
        run_id=f"run-{status}",
        tenant="acme",
        workflow_id="order-triage",
        version=2,
        status=status,
        error="Payment.Declined" if status == "failed" else None,
        cause="declined" if status == "failed" else None,
        failing_step="charge_card" if status == "failed" else None,
        started_at="2030-01-01T09:00:00.000Z",
        ended_at="2030-01-01T09:00:05.000Z",
    )


def test_a_failed_run_notifies_both_channels_and_a_succeeded_one_neither(runtime, server):
    # Given a workflow's notifications: a signed webhook and an email from the default sender
    config = {
        "webhook": {"url": f"{server.url}/relayflow", "secret": {"name": "alerts"}},
        "email": {"to": ["ops@example.com"]},
    }
    before = len(sent_emails(runtime))
    with override_settings(notification_sender=SENDER):
        # When a run fails, and another one succeeds
        deliveries = notify_run_end(run_item("failed"), config)
        assert notify_run_end(run_item("succeeded"), config) == []
        assert notify_run_end(run_item("aborted"), config) == []
    # Then the failure went out once through each channel
    assert [(d.channel, d.ok) for d in deliveries] == [("webhook", True), ("email", True)]
    (sent,) = server.requests
    assert verify_signature(sent.body, ALERT_SECRET, sent.headers["x-relayflow-signature"])
    data = json.loads(sent.body)["data"]
    assert data["type"] == "relayflow.run.failed"
    assert (data["run_id"], data["failing_step"], data["error"]) == (
        "run-failed",
        "charge_card",
        "Payment.Declined",
    )
    (email,) = sent_emails(runtime)[before:]
    assert email.source == SENDER
    assert email.subject == (
        "Relayflow: order-triage run run-fail… failed at charge_card (Payment.Declined)"
    )
    assert "Cause: declined" in email.body
