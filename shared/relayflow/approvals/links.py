"""Guest links: HMAC-SHA256 signed URLs that let someone without an API key answer one
approval with one option, until an expiry.

A link is ``<base>/guest/approvals/<approval id>?tenant=<t>&option=<o>&expires=<epoch>&sig=<hex>``.
The signature covers a versioned, length-prefixed encoding of the tenant, the approval id, the
option and the expiry, so changing any of them (or moving text from one part to another)
breaks it. Signatures are compared with :func:`hmac.compare_digest`.

The key is the value of a Secrets Manager secret (setting ``approval_signing_secret``), read
through :func:`relayflow.tools.secrets.read_platform_secret` and cached for a few minutes per warm
Lambda. It must live outside the secret prefix that tool steps may read: whoever can read it
can answer any tenant's approvals.

A link is single-use in effect: the approval itself accepts one decision (the control
service's conditional write), whichever link or API call comes first.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

#: The longest a link lives, even for an approval without a deadline (or a later one).
MAX_LINK_SECONDS = 7 * 24 * 3600
#: A key shorter than this is a configuration fault (the template generates 64 characters).
MIN_KEY_BYTES = 32
#: Path of the guest page, relative to the public base URL.
GUEST_PATH = "/guest/approvals/{approval_id}"
#: What a guest is told about any bad link: nothing that helps forge one.
PUBLIC_MESSAGE = "This link is invalid or has expired."

_DOMAIN = b"relayflow-approval-link/v1\n"
_SIGNATURE = re.compile(r"^[0-9a-f]{64}$")
_EXPIRES = re.compile(r"^[0-9]{1,12}$")
#: Tenant, approval id and option: 1-128 characters, no control characters (the encoding is
#: length-prefixed, so any other character is unambiguous).
_PART = re.compile(r"^[^\x00-\x1f\x7f]{1,128}$")


class LinkError(Exception):
    """A guest link that cannot be used. ``str()`` is for logs; guests only ever see
    :data:`PUBLIC_MESSAGE`."""

    public_message = PUBLIC_MESSAGE


class InvalidLink(LinkError):
    """Malformed, or the signature does not match (tampered, or another key)."""


class ExpiredLink(LinkError):
    """A correctly signed link whose expiry has passed."""


@dataclass(frozen=True)
class GuestLink:
    """The signed parts of a guest link, as read from its URL (not yet verified)."""

    tenant: str
    approval_id: str
    option: str
    expires_at: int
    signature: str

    @classmethod
    def from_query(cls, approval_id: str, query: Mapping[str, str | None]) -> GuestLink:
        """The link's parts from its path id and query parameters; :class:`InvalidLink` when
        one is missing or malformed."""
        tenant, option = query.get("tenant"), query.get("option")
        expires, signature = query.get("expires"), query.get("sig")
        for name, value in (("tenant", tenant), ("option", option), ("id", approval_id)):
            if not isinstance(value, str) or not _PART.fullmatch(value):
                raise InvalidLink(f"malformed {name}")
        if not isinstance(expires, str) or not _EXPIRES.fullmatch(expires):
            raise InvalidLink("malformed expires")
        if not isinstance(signature, str) or not _SIGNATURE.fullmatch(signature):
            raise InvalidLink("malformed sig")
        assert isinstance(tenant, str) and isinstance(option, str)
        return cls(tenant, approval_id, option, int(expires), signature)

    def verify(self, key: bytes, *, now: float | None = None) -> None:
        """:func:`verify_link` on these parts."""
        verify_link(
            tenant=self.tenant,
            approval_id=self.approval_id,
            option=self.option,
            expires_at=self.expires_at,
            signature=self.signature,
            key=key,
            now=time.time() if now is None else now,
        )


def _message(tenant: str, approval_id: str, option: str, expires_at: int) -> bytes:
    for name, value in (("tenant", tenant), ("approval_id", approval_id), ("option", option)):
        if not isinstance(value, str) or not _PART.fullmatch(value):
            raise ValueError(f"{name} cannot be put in a guest link: {value!r}")
    if isinstance(expires_at, bool) or not isinstance(expires_at, int) or expires_at < 0:
        raise ValueError(f"expires_at must be epoch seconds, got {expires_at!r}")
    parts = [tenant, approval_id, option, str(expires_at)]
    encoded = b"".join(b"%d:%s\n" % (len(p.encode()), p.encode()) for p in parts)
    return _DOMAIN + encoded


def _check_key(key: bytes) -> None:
    if not isinstance(key, bytes) or len(key) < MIN_KEY_BYTES:
        raise ValueError(f"the approval signing key must be at least {MIN_KEY_BYTES} bytes")


def signature(*, tenant: str, approval_id: str, option: str, expires_at: int, key: bytes) -> str:
    """The hex HMAC-SHA256 of a link's parts."""
    _check_key(key)
    message = _message(tenant, approval_id, option, expires_at)
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def sign_link(
    base_url: str, *, tenant: str, approval_id: str, option: str, expires_at: int, key: bytes
) -> str:
    """The guest link answering ``approval_id`` with ``option`` until ``expires_at``."""
    sig = signature(
        tenant=tenant, approval_id=approval_id, option=option, expires_at=expires_at, key=key
    )
    path = GUEST_PATH.format(approval_id=quote(approval_id, safe=""))
    query = urlencode({"tenant": tenant, "option": option, "expires": expires_at, "sig": sig})
    return f"{base_url.rstrip('/')}{path}?{query}"


def verify_link(
    *,
    tenant: str,
    approval_id: str,
    option: str,
    expires_at: int,
    signature: str,
    key: bytes,
    now: float,
) -> None:
    """Accept a link or raise: :class:`InvalidLink` for malformed parts or a signature that
    does not match, :class:`ExpiredLink` for a genuine link past its expiry. The signature is
    checked first, so an altered expiry is invalid, never merely expired."""
    _check_key(key)
    if not isinstance(signature, str) or not _SIGNATURE.fullmatch(signature):
        raise InvalidLink("malformed signature")
    try:
        message = _message(tenant, approval_id, option, expires_at)
    except ValueError as exc:
        raise InvalidLink(str(exc)) from None
    expected = hmac.new(key, message, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        raise InvalidLink("signature mismatch")
    if now >= expires_at:
        raise ExpiredLink("link expired")


def link_expiry(deadline: int | None, now: float) -> int:
    """When a link made ``now`` stops working: the approval's deadline, but at most
    :data:`MAX_LINK_SECONDS` away."""
    longest = int(now) + MAX_LINK_SECONDS
    return longest if deadline is None else min(int(deadline), longest)


def _field(approval: Any, *names: str) -> Any:
    for name in names:
        value = (
            approval.get(name) if isinstance(approval, Mapping) else getattr(approval, name, None)
        )
        if value is not None:
            return value
    return None


def _option_ids(options: Sequence[Any]) -> list[str]:
    ids = []
    for option in options:
        value = option if isinstance(option, str) else _field(option, "id", "value", "name")
        if isinstance(value, str):
            ids.append(value)
    return ids


def to_epoch(value: Any) -> int | None:
    """Epoch seconds of a deadline given as epoch seconds, a datetime or ISO-8601 text
    (naive means UTC); ``None`` for none."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    moment = value if isinstance(value, datetime.datetime) else None
    if moment is None:
        text = str(value).strip()
        if text.isdigit():
            return int(text)
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp())


def decision_deadline(approval: Any) -> Any:
    """The decision deadline of an approval item (``deadline``) or view (``expires_at`` as
    ISO text; an item's integer ``expires_at`` is its TTL, not the deadline)."""
    deadline = _field(approval, "deadline")
    if deadline is None:
        expires = _field(approval, "expires_at")
        deadline = expires if isinstance(expires, str) else None
    return deadline


def guest_links(approval: Any, base_url: str, key: bytes, now: float) -> dict[str, str]:
    """One guest link per option of ``approval`` (an approval item or mapping with
    ``approval_id``, ``tenant``, ``options`` and its deadline), each expiring at
    :func:`link_expiry`. What the approval function puts in notifications."""
    approval_id = _field(approval, "approval_id", "id")
    tenant = _field(approval, "tenant")
    if not isinstance(approval_id, str) or not isinstance(tenant, str):
        raise ValueError("guest links need the approval's approval_id and tenant")
    deadline = to_epoch(decision_deadline(approval))
    expires_at = link_expiry(deadline, now)
    options = _option_ids(_field(approval, "options") or ["approve", "reject"])
    return {
        option: sign_link(
            base_url,
            tenant=tenant,
            approval_id=approval_id,
            option=option,
            expires_at=expires_at,
            key=key,
        )
        for option in options
    }


# ----------------------------------------------------------------------------- the key


def signing_secret_name() -> str:
    """The secret holding the signing key (settings, or the stage's default name)."""
    from relayflow.settings import get_settings

    settings = get_settings()
    return settings.approval_signing_secret or (
        f"relayflow-internal/{settings.stage}/approval-signing-key"
    )


def signing_key() -> bytes:
    """The current signing key, from Secrets Manager (cached per warm Lambda). A missing or
    short secret is a configuration fault and raises; its value is never logged."""
    from relayflow.tools.secrets import read_platform_secret

    key = read_platform_secret(signing_secret_name(), "secretsmanager").encode()
    _check_key(key)
    return key


def approval_guest_links(approval: Any, *, now: float | None = None) -> dict[str, str]:
    """:func:`guest_links` with the configured public base URL and key; empty when no
    ``public_base_url`` is set (then notifications carry no guest links)."""
    from relayflow.settings import get_settings

    settings = get_settings()
    base_url = settings.public_base_url
    if not base_url and settings.public_base_url_parameter:
        from relayflow.tools.secrets import read_platform_secret

        base_url = read_platform_secret(settings.public_base_url_parameter, "ssm")
    if not base_url:
        return {}
    return guest_links(approval, base_url, signing_key(), time.time() if now is None else now)
