"""The channels: :class:`WebhookChannel` (signed JSON POST) and :class:`EmailChannel` (SES).

A webhook goes out through the SSRF-guarded client (:func:`relayflow.net.http.request`), signed
like the webhook_out step: ``X-Relayflow-Signature: sha256=<hex HMAC-SHA256 of the exact
body>``. The body carries ``sent_at``, so a receiver that wants replay protection checks it
after the signature. One transient failure (network error, timeout, 408/429/502/503/504) is
retried once; any other answer is final. Nothing here raises for a delivery problem.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from relayflow.errors import RelayflowError, TransientError
from relayflow.net.ssrf import redact_url
from relayflow.notify.models import Delivery, Notification
from relayflow.observability import logger

if TYPE_CHECKING:
    from relayflow.definition.models import NotificationSettings, SecretRef

#: Seconds a webhook receiver gets to connect and to answer (each).
WEBHOOK_TIMEOUT_SECONDS = 5.0
#: Pause before the one retry of a transient failure.
WEBHOOK_RETRY_DELAY_SECONDS = 0.5
#: Headers the channel sets itself; configured headers cannot replace them.
_OWN_HEADERS = (
    "content-type",
    "x-relayflow-event",
    "x-relayflow-delivery",
    "x-relayflow-signature",
)


@runtime_checkable
class Channel(Protocol):
    """Sends a notification somewhere. ``send`` returns ``ok=False`` for any delivery problem
    and raises only for programming errors."""

    kind: ClassVar[str]

    def send(self, notification: Notification) -> Delivery: ...


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _failed(kind: str, notification: Notification, target: str, delivery: Delivery) -> Delivery:
    logger.warning(
        "notification not delivered",
        extra={
            "channel": kind,
            "notification_event": notification.event,
            "target": target,
            "status": delivery.status,
            "reason": delivery.detail,
            "attempts": delivery.attempts,
        },
    )
    return delivery


class WebhookChannel:
    """POST each notification as JSON to ``url``, signed with ``secret`` when one is named.

    The body is ``{"id", "event", "tenant", "subject", "text", "data", "sent_at"}`` (compact
    JSON, UTF-8); the headers add ``X-Relayflow-Event``, ``X-Relayflow-Delivery`` (the
    notification id) and, with a secret, ``X-Relayflow-Signature``. A 2xx answer is delivered.
    """

    kind: ClassVar[str] = "webhook"

    def __init__(
        self,
        url: str,
        secret: SecretRef | Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        timeout: float = WEBHOOK_TIMEOUT_SECONDS,
        retry_delay: float = WEBHOOK_RETRY_DELAY_SECONDS,
    ) -> None:
        if not isinstance(url, str) or not url.strip():
            raise ValueError("a webhook channel needs a URL")
        if timeout <= 0 or retry_delay < 0:
            raise ValueError("timeout must be positive and retry_delay not negative")
        self.url = url.strip()
        self.secret = secret
        self.headers = {
            str(k): str(v) for k, v in (headers or {}).items() if str(k).lower() not in _OWN_HEADERS
        }
        self.timeout = timeout
        self.retry_delay = retry_delay

    @property
    def target(self) -> str:
        """The URL as logs show it: origin only (a path or query may hold a token)."""
        return redact_url(self.url)

    def body(self, notification: Notification) -> bytes:
        """The exact bytes sent (and signed) for ``notification``."""
        envelope = {
            "id": notification.id,
            "event": notification.event,
            "tenant": notification.tenant,
            "subject": notification.subject,
            "text": notification.text,
            "data": notification.data,
            "sent_at": _now_iso(),
        }
        return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def send(self, notification: Notification) -> Delivery:
        from relayflow.net.http import SIGNATURE_HEADER, raise_for_status, request, sign_body

        content = self.body(notification)
        sent = {
            **self.headers,
            "Content-Type": "application/json",
            "X-Relayflow-Event": notification.event,
        }
        if notification.id:
            sent["X-Relayflow-Delivery"] = notification.id
        attempts = 0
        try:
            if self.secret:
                from relayflow.tools.secrets import resolve_secret

                # The workflow's tenant's secret, read as that tenant.
                key = resolve_secret(self.secret, tenant=notification.tenant or None)
                sent[SIGNATURE_HEADER] = sign_body(content, key)
            while True:
                attempts += 1
                try:
                    response = request(
                        "POST", self.url, headers=sent, content=content, timeout=self.timeout
                    )
                    raise_for_status(response)
                except TransientError:
                    if attempts >= 2:
                        raise
                    time.sleep(self.retry_delay)
                    continue
                return Delivery(
                    channel=self.kind, ok=True, status=response.status_code, attempts=attempts
                )
        except RelayflowError as exc:
            status = exc.details.get("status")
            delivery = Delivery(
                channel=self.kind,
                ok=False,
                status=status if isinstance(status, int) else None,
                detail=f"{exc.error_name}: {exc.message}",
                attempts=attempts,
            )
            return _failed(self.kind, notification, self.target, delivery)


class EmailChannel:
    """Send each notification as a plain-text email through SES (``SendEmail``).

    ``sender`` must be an SES identity verified in the account (and, in the SES sandbox, so
    must every recipient). ``ses`` is a boto3 SES client; by default
    ``relayflow.adapters.aws.client("ses")``. Throttling is retried by the client's own
    retry mode; a refusal (unverified sender, bad address, quota) is ``ok=False``.
    """

    kind: ClassVar[str] = "email"

    def __init__(self, to: Sequence[str], sender: str | None, *, ses: Any | None = None) -> None:
        if isinstance(to, str) or not to:
            raise ValueError("an email channel needs a list of recipients")
        self.to = [str(address) for address in to]
        self.sender = sender or None
        self._ses = ses

    @property
    def target(self) -> str:
        """The recipients as logs show them: a count, not the addresses."""
        return f"{len(self.to)} recipient(s)"

    def send(self, notification: Notification) -> Delivery:
        if self.sender is None:
            delivery = Delivery(
                channel=self.kind,
                ok=False,
                detail="no sender: set notifications.email.from or the deployment's "
                "notification sender (RELAYFLOW_NOTIFICATION_SENDER)",
                attempts=0,
            )
            return _failed(self.kind, notification, self.target, delivery)
        from botocore.exceptions import BotoCoreError, ClientError

        ses = self._ses
        if ses is None:
            from relayflow.adapters.aws import client

            ses = client("ses")
        try:
            answer = ses.send_email(
                Source=self.sender,
                Destination={"ToAddresses": self.to},
                Message={
                    "Subject": {"Data": notification.subject, "Charset": "UTF-8"},
                    "Body": {"Text": {"Data": notification.text, "Charset": "UTF-8"}},
                },
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code") or "ClientError")
            delivery = Delivery(
                channel=self.kind,
                ok=False,
                status=exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode"),
                detail=f"SES refused the email: {code}: {error.get('Message') or ''}".rstrip(),
            )
            return _failed(self.kind, notification, self.target, delivery)
        except BotoCoreError as exc:
            delivery = Delivery(
                channel=self.kind, ok=False, detail=f"SES unreachable: {type(exc).__name__}"
            )
            return _failed(self.kind, notification, self.target, delivery)
        return Delivery(channel=self.kind, ok=True, detail=str(answer.get("MessageId") or ""))


def channels_from_config(
    config: NotificationSettings | Mapping[str, Any],
    *,
    default_sender: str | None = None,
) -> list[Channel]:
    """The channels a workflow's ``notifications`` names: the webhook first, then the email.

    ``config`` is the parsed :class:`~relayflow.definition.models.NotificationSettings` or its
    JSON form (validated here; an invalid one raises ``pydantic.ValidationError``). An email
    without ``from`` is sent from ``default_sender``, else from the ``notification_sender``
    setting."""
    from relayflow.definition.models import NotificationSettings

    settings = (
        config
        if isinstance(config, NotificationSettings)
        else NotificationSettings.model_validate(config)
    )
    channels: list[Channel] = []
    if settings.webhook is not None:
        hook = settings.webhook
        channels.append(WebhookChannel(hook.url, hook.secret, hook.headers))
    if settings.email is not None:
        if settings.email.sender:
            sender: str | None = settings.email.sender
        elif default_sender:
            sender = default_sender
        else:
            from relayflow.settings import get_settings

            sender = get_settings().notification_sender
        channels.append(EmailChannel(settings.email.to, sender))
    return channels
