"""The ``engine:`` setting of a workflow (its own module: ``models.py`` is full)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class EngineSetting(BaseModel):
    """Mixed into :class:`relayflow.definition.models.Workflow`."""

    engine: Literal["auto", "standard", "express"] = Field(
        "auto",
        description="Step Functions engine: auto picks Express when it cannot change what the "
        "workflow does (short, no callbacks or child runs, idempotent acting steps), else "
        "Standard; express is refused when unsafe, naming the step (docs/engines.md).",
    )
