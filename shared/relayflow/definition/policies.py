"""Failure policies of the definition format: a step's retry policy, the workflow's
``defaults`` for the steps that act on the world, and a parallel step's ``settle`` mode.

How the defaults reach each step (and what ``relayflow compile --effective`` prints) is
:mod:`relayflow.definition.effective`; ``docs/definitions.md`` lists every default in one table.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

ErrorName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_.]*$", max_length=128)]

#: The step types that act on the world: the defaults' retry and timeout apply to them.
ACTING_STEP_TYPES: tuple[str, ...] = ("tool", "webhook_out", "custom", "code", "agent")


class _PolicyModel(BaseModel):
    # As the definition models: unknown fields are errors, validators are built on first use.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class RetryPolicy(_PolicyModel):
    """How a failed step is retried before its ``on_failure`` route is taken.

    ``max_attempts`` counts every attempt, the first one included. The delay before retry
    *n* (1-based) is ``base_seconds`` (fixed), ``base_seconds × n`` (linear) or
    ``base_seconds × 2^(n-1)`` (exponential), never more than ``max_delay_seconds``; with
    ``jitter`` the delay is drawn uniformly from ``[0, delay]`` (AWS "FULL" jitter).
    """

    max_attempts: int = Field(
        3, ge=1, le=25, description="Attempts in total, the first one included."
    )
    backoff: Literal["fixed", "linear", "exponential"] = Field(
        "exponential", description="How the delay grows between attempts."
    )
    base_seconds: int = Field(2, ge=1, le=86_400, description="Delay before the first retry.")
    max_delay_seconds: int | None = Field(
        None, ge=1, le=86_400, description="Cap on any single delay (exponential/linear)."
    )
    jitter: bool = Field(False, strict=True, description="Randomise each delay in [0, delay].")
    retry_on: list[ErrorName] | None = Field(
        None,
        description=(
            "Error names that are retried (e.g. Relayflow.Transient, States.Timeout). "
            "Default: every error except those that cannot succeed on retry."
        ),
        min_length=1,
    )

    @model_validator(mode="after")
    def _consistent(self) -> RetryPolicy:
        if self.max_delay_seconds is not None and self.max_delay_seconds < self.base_seconds:
            raise ValueError("max_delay_seconds must be at least base_seconds")
        if self.retry_on and "States.ALL" in self.retry_on and len(self.retry_on) > 1:
            raise ValueError("States.ALL matches every error; list it alone in retry_on")
        if self.backoff == "linear" and self.jitter:
            raise ValueError("jitter is available with fixed and exponential backoff only")
        return self


#: What a step's ``retry`` may say: a policy, ``none`` (one attempt, no default policy), or
#: nothing (an acting step takes the workflow's ``defaults.retry``).
RetrySetting = RetryPolicy | Literal["none"] | None

#: The seed engine's retry: transient failures only, 3 attempts, 10 s then 20 s (full jitter).
DEFAULT_RETRY = RetryPolicy(
    max_attempts=3,
    backoff="exponential",
    base_seconds=10,
    max_delay_seconds=300,
    jitter=True,
    retry_on=["Relayflow.Transient"],
)
DEFAULT_TIMEOUT_SECONDS = 30
DEFAULT_DELAY_SECONDS = 60


class StepDefaults(_PolicyModel):
    """The workflow's ``defaults`` block: what a step gets for a setting it leaves out."""

    HELP: ClassVar[str] = (
        "Defaults for steps that leave a setting out: retry and timeout_seconds apply to "
        "acting steps (tool, webhook_out, custom, code, agent), delay_seconds to delay steps."
    )

    retry: RetryPolicy | Literal["none"] = Field(
        default_factory=lambda: DEFAULT_RETRY.model_copy(),
        description="Retry policy of acting steps without one; none: one attempt.",
    )
    timeout_seconds: Annotated[int, Field(ge=1, le=31_536_000)] | Literal["none"] = Field(
        DEFAULT_TIMEOUT_SECONDS,
        description="Task timeout (States.Timeout) of acting steps without one; none: no timeout.",
    )
    delay_seconds: int = Field(
        DEFAULT_DELAY_SECONDS,
        ge=0,
        le=99_999_999,
        description="How long a delay step without seconds or until waits.",
    )


SETTLE_HELP = (
    "fail_fast: the first failing branch fails the step and stops the others. all: every "
    "branch runs to its end; a failed step's record holds its error instead of its output."
)
FAIL_WHEN_HELP = (
    "With settle: all. any: fail the step with Relayflow.BranchesFailed when a branch "
    "failed (after all ended); never (the default): the step succeeds."
)


def check_settle(step: Any) -> Any:
    """A parallel step's ``fail_when`` is only meaningful when its branches settle."""
    if step.fail_when is not None and step.settle != "all":
        raise ValueError("fail_when applies with settle: all only (fail_fast fails at once)")
    return step
