"""Definition models that stand apart from the step graph: the workflow's ``events``
settings (per-step lifecycle events, ``docs/run-modes.md``) and the email address type the
notification settings use."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

_EMAIL = re.compile(r"^[^@\s<>,;]+@[^@\s<>,;]+\.[^@\s<>,;]+$")


def _email_address(value: str) -> str:
    if not _EMAIL.match(value):
        raise PydanticCustomError(
            "email", "'{value}' is not an email address, e.g. ops@example.com", {"value": value}
        )
    return value


EmailAddress = Annotated[str, StringConstraints(max_length=254), AfterValidator(_email_address)]


class EventSettings(BaseModel):
    """Which lifecycle events the workflow's runs publish on the Relayflow bus, besides the
    run events every run publishes."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    steps: bool = Field(
        False,
        description="Publish relayflow.step.started|succeeded|failed|retrying|parked|waiting "
        "for every step (from the state machine's CloudWatch Logs; they cost, see "
        "docs/run-modes.md).",
    )
