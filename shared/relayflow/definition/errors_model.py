"""``on_error``: what a step's failure does besides its ``on_failure`` route (issue 13).

* ``{action: park}``: the run waits, its error recorded, until ``POST /runs/{id}/resume``
  retries the step, skips it with an output, or fails it; ``park_timeout`` (default 7 days)
  fails it with ``Relayflow.ParkTimeout``.
* ``{action: continue, output: <template>}``: the step's output becomes the rendered fallback
  (which may read ``error``) and the run goes on along the step's success route.

Precedence: ``on_error`` takes the step's failure once its retries are spent. A parked step
that is failed (by ``resume`` or its timeout) then takes ``on_failure`` (or the workflow's
``errors.on_failure``), else fails the run. ``continue`` never fails, so it excludes
``on_failure`` (validation rule ``on-error-conflict``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from relayflow.definition.admission import Duration
from relayflow.definition.model_fields import DefinitionModel

#: A parked run waits this long for a resume by default.
DEFAULT_PARK_TIMEOUT = 7 * 86_400
#: The longest a run may stay parked (a Standard execution lives at most a year).
MAX_PARK_TIMEOUT = 31_536_000
#: Step types that may declare ``on_error`` (the kinds whose failure a Catch routes).
ON_ERROR_TYPES = (
    "tool",
    "webhook_out",
    "code",
    "custom",
    "agent",
    "llm_batch",
    "sub_workflow",
    "parallel",
    "for_each",
)


class ParkOnError(DefinitionModel):
    """Park the run for a person to triage, then resume it (retry, skip or fail)."""

    action: Literal["park"]
    park_timeout: Duration = Field(
        DEFAULT_PARK_TIMEOUT,
        ge=1,
        le=MAX_PARK_TIMEOUT,
        description="How long the run waits for a resume (seconds, or '30m', '7d'); then it "
        "fails with Relayflow.ParkTimeout. Default 7 days.",
    )


class ContinueOnError(DefinitionModel):
    """Go on with a fallback output: the step's status reads ``fallback``."""

    action: Literal["continue"]
    output: Annotated[
        Any, Field(description="The step's output instead (a template; may read error).")
    ] = None


OnError = Annotated[ParkOnError | ContinueOnError, Field(discriminator="action")]
