"""Signatures of inbound webhook deliveries: HMAC-SHA256 over the exact raw body.

Three schemes, each the header its sender writes:

==========  ==========================  ===================================================
scheme      header                      value (hex HMAC-SHA256 with the signing secret)
==========  ==========================  ===================================================
relayflow   ``X-Relayflow-Signature``   ``t=<unix>,v1=<hmac of "<t>.<body>">``
github      ``X-Hub-Signature-256``     ``sha256=<hmac of body>`` (no timestamp)
            (or ``signature_header``)   e.g. the ``X-Webhook-Signature`` preset
stripe      ``Stripe-Signature``        ``t=<unix>,v1=<hmac of "<t>.<body>">[,v1=…]``
==========  ==========================  ===================================================

A timestamped signature is refused when ``t`` is more than the replay window away from now
(in either direction: a clock far ahead is as suspect as a replay). Several ``v1`` values and
several secrets (a rotation's current and previous version) are all tried; each comparison is
constant-time. Nothing here logs, and no error names a secret or the expected signature.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Scheme = Literal["relayflow", "github", "stripe"]

#: The header each scheme signs in (lower case: how :func:`verify_delivery` looks it up).
SIGNATURE_HEADERS: dict[str, str] = {
    "relayflow": "x-relayflow-signature",
    "github": "x-hub-signature-256",
    "stripe": "stripe-signature",
}
#: The documented preset for senders that sign like GitHub under another header name.
WEBHOOK_SIGNATURE_HEADER = "X-Webhook-Signature"
#: The header that names a delivery, per scheme (Stripe: the JSON body's ``id`` instead).
DELIVERY_HEADERS: dict[str, str | None] = {
    "relayflow": "x-relayflow-delivery",
    "github": "x-github-delivery",
    "stripe": None,
}
#: Headers that carry credentials or signatures: never handed to a transform or logged.
CREDENTIAL_HEADERS = frozenset(
    {
        *SIGNATURE_HEADERS.values(),
        WEBHOOK_SIGNATURE_HEADER.lower(),
        "x-hub-signature",
        "authorization",
        "proxy-authorization",
        "cookie",
        "x-api-key",
    }
)
#: A header longer than this is not a signature (Stripe sends a few ``v1`` values at most).
_MAX_HEADER = 2048


class SignatureRejected(Exception):
    """The delivery's signature is missing, malformed, outside the window or wrong.

    ``reason`` is one of ``missing``, ``malformed``, ``expired``, ``mismatch``.
    """

    MESSAGES: Mapping[str, str] = {
        "missing": "the delivery carries no {header} header",
        "malformed": "the {header} header is not in the scheme's format",
        "expired": "the signature's timestamp is outside the replay window of {window} s",
        "mismatch": "the signature does not match the body",
    }

    def __init__(self, reason: str, header: str, window: int) -> None:
        self.reason = reason
        self.header = header
        super().__init__(self.MESSAGES[reason].format(header=header, window=window))


@dataclass(frozen=True)
class _Parsed:
    timestamp: int | None
    digests: tuple[str, ...]


def _hmac_hex(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def signed_message(scheme: Scheme, body: bytes, timestamp: int | None) -> bytes:
    """The bytes a scheme's HMAC covers: the body, or ``"<t>.<body>"``."""
    if scheme == "github":
        return body
    return f"{timestamp}.".encode("ascii") + body


def sign(scheme: Scheme, body: bytes, secret: str, timestamp: int | None = None) -> str:
    """The header value a sender of ``scheme`` writes for ``body`` (the timestamp is required
    for relayflow and stripe). Used by tests, the docs and Relayflow's own senders."""
    digest = _hmac_hex(secret, signed_message(scheme, body, timestamp))
    if scheme == "github":
        return f"sha256={digest}"
    if timestamp is None:
        raise ValueError(f"the {scheme} scheme signs a timestamp")
    return f"t={timestamp},v1={digest}"


def _parse(scheme: Scheme, value: str) -> _Parsed | None:
    value = value.strip()
    if scheme == "github":
        prefix, _, digest = value.partition("=")
        if prefix.lower() != "sha256" or not _is_hex(digest):
            return None
        return _Parsed(None, (digest.lower(),))
    timestamp: int | None = None
    digests: list[str] = []
    for element in value.split(","):
        key, _, item = element.strip().partition("=")
        if key == "t":
            if timestamp is not None or not item.isdigit() or len(item) > 12:
                return None
            timestamp = int(item)
        elif key == "v1" and _is_hex(item):
            digests.append(item.lower())
        # Other keys (Stripe's v0, future versions) are ignored, as Stripe's libraries do.
    if timestamp is None or not digests:
        return None
    return _Parsed(timestamp, tuple(digests))


def _is_hex(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text)


def signature_header(scheme: Scheme, header: str | None = None) -> str:
    """The (lower-case) header a delivery of ``scheme`` is signed in: ``header`` when the
    trigger renames the github scheme's, else the scheme's own."""
    if header is not None:
        if scheme != "github":
            raise ValueError(f"the {scheme} scheme's header cannot be renamed")
        return header.lower()
    return SIGNATURE_HEADERS[scheme]


def without_signature(headers: Mapping[str, str], header: str | None) -> dict[str, str]:
    """``headers`` without a renamed signature header (the standard ones are in
    :data:`CREDENTIAL_HEADERS` already), before a transform or a log sees them."""
    name = header.lower() if header else None
    return {k: v for k, v in headers.items() if k != name}


def verify_delivery(
    scheme: Scheme,
    body: bytes,
    headers: Mapping[str, str],
    secrets: Iterable[str],
    *,
    now: float,
    window_seconds: int,
    header: str | None = None,
) -> str:
    """Accept the delivery or raise :class:`SignatureRejected`; answers the hex sha256 of
    what the signature covers (:func:`signed_message`), which a replay of the delivery
    shares whatever unsigned headers it changes, and which only the secret's holder can vary.

    ``headers`` has lower-case names. The signature must be one of ``secrets`` (every one is
    tried, so a rotation's previous version still verifies) over the exact ``body``; a
    timestamped one must lie within ``window_seconds`` of ``now``. ``header`` renames the
    github scheme's header (:func:`signature_header`).
    """
    header = signature_header(scheme, header)
    value = headers.get(header)
    if not value:
        raise SignatureRejected("missing", header, window_seconds)
    parsed = _parse(scheme, value) if len(value) <= _MAX_HEADER else None
    if parsed is None:
        raise SignatureRejected("malformed", header, window_seconds)
    if parsed.timestamp is not None and abs(now - parsed.timestamp) > window_seconds:
        raise SignatureRejected("expired", header, window_seconds)
    message = signed_message(scheme, body, parsed.timestamp)
    matched = False
    for secret in secrets:
        expected = _hmac_hex(secret, message).encode("ascii")
        for digest in parsed.digests:
            # No early exit: the time taken does not say which secret or value matched.
            matched |= hmac.compare_digest(expected, digest.encode("ascii"))
    if not matched:
        raise SignatureRejected("mismatch", header, window_seconds)
    return hashlib.sha256(message).hexdigest()
