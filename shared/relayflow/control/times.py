"""Timestamps as the control plane stores them: ISO-8601 UTC to the millisecond with ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    """Now, as :func:`iso`."""
    return iso(datetime.now(UTC))


def iso(value: datetime) -> str:
    """ISO-8601 UTC to the millisecond with ``Z`` (the format of ``$.run.started_at``)."""
    value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_of_epoch(seconds: float) -> str:
    """Epoch seconds as :func:`iso`."""
    return iso(datetime.fromtimestamp(seconds, UTC))


def parse_iso(value: str) -> datetime:
    """The moment an ISO-8601 text (``Z`` or an offset) names."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def normalized_iso(value: str | None) -> str | None:
    """``value`` rewritten as :func:`iso` (``None`` and empty text stay as they are)."""
    return iso(parse_iso(value)) if value else None


def epoch(value: datetime) -> int:
    """Whole epoch seconds (a DynamoDB TTL)."""
    return int(value.timestamp())


def elapsed_ms(start: str, end: str) -> float:
    """Milliseconds from ``start`` to ``end`` (ISO texts), to the microsecond."""
    return round((parse_iso(end) - parse_iso(start)).total_seconds() * 1000.0, 3)
