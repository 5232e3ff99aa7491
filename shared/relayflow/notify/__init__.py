"""Notifications: one message, sent through channels (a signed webhook, an SES email).

:class:`Notification` is what is said, a :class:`Channel` says it and answers with a
:class:`Delivery`. Channels never raise for a delivery problem (a refused URL, an error
status, an unreadable secret, SES refusing the sender): the delivery says ``ok=False`` and
why, and a warning is logged without secrets or URL paths and queries. The recorder uses them for
per-workflow failure notifications (:mod:`relayflow.notify.failure`); approval requests reuse
them.

Importing this package loads no HTTP client and no boto3: each channel loads what it needs
when it sends.
"""

from __future__ import annotations

from relayflow.notify.channels import (
    Channel,
    EmailChannel,
    WebhookChannel,
    channels_from_config,
)
from relayflow.notify.models import Delivery, Notification

__all__ = [
    "Channel",
    "Delivery",
    "EmailChannel",
    "Notification",
    "WebhookChannel",
    "channels_from_config",
]
