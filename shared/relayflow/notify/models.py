"""What a channel sends (:class:`Notification`) and what it reports back (:class:`Delivery`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Longest subject kept; the rest is cut and marked with "…".
SUBJECT_MAX_CHARS = 200


class Notification(BaseModel):
    """One message for people (``subject``, ``text``) and machines (``data``)."""

    model_config = ConfigDict(extra="forbid")

    event: str = Field(
        min_length=1,
        max_length=128,
        description="What happened, e.g. relayflow.run.failed or relayflow.approval.requested.",
    )
    tenant: str = Field(min_length=1, description="The tenant the notification is about.")
    subject: str = Field(description="One line; line breaks become spaces.")
    text: str = Field(description="Plain-text body.")
    data: dict[str, Any] = Field(
        default_factory=dict, description="The structured payload (JSON values only)."
    )
    id: str | None = Field(
        None,
        max_length=256,
        description="Stable identifier: the same notification sent twice has the same id, so a "
        "receiver can drop the repeat (X-Relayflow-Delivery).",
    )

    @field_validator("subject")
    @classmethod
    def _one_line(cls, value: str) -> str:
        line = " ".join(value.split())
        if len(line) > SUBJECT_MAX_CHARS:
            line = line[: SUBJECT_MAX_CHARS - 1] + "…"
        return line


class Delivery(BaseModel):
    """The outcome of sending one notification through one channel."""

    model_config = ConfigDict(extra="forbid")

    channel: str = Field(description="The channel kind: webhook or email.")
    ok: bool
    status: int | None = Field(None, description="The HTTP status the receiver answered.")
    detail: str = Field(
        "", description="Why it failed, or the receiver's reference (SES message id)."
    )
    attempts: int = Field(
        1, ge=0, description="Tries made (0: nothing was tried, e.g. no sender configured)."
    )
