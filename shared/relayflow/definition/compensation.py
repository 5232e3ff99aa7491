"""Saga compensation in the definition format: an acting step's ``compensate:``.

``compensate`` names what undoes the step's effect when the run fails after the step
succeeded: the key of a ``tool`` / ``webhook_out`` / ``custom`` step that runs only as a
compensation, or such a call written inline (``{type: webhook_out, url: …, body: …}``). Its
templates see the compensated step's output as ``output`` (and as ``steps.<key>.output``).
``docs/reliability.md`` describes when compensations run; the compiler half is
:mod:`relayflow.compiler.compensation`, the validation rules are
:mod:`relayflow.validation.validate_compensation`; a compensation as a step model is
:func:`relayflow.definition.step_models.compensation_call`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

#: Step types that act on the world, and so may declare ``compensate``.
COMPENSABLE_TYPES = frozenset({"tool", "webhook_out", "custom", "code", "agent"})
#: The calls a compensation may be.
CALL_TYPES = ("tool", "webhook_out", "custom")
#: Fields a compensation call cannot have: it routes nowhere and is never compensated.
CALL_ROUTES = ("on_success", "on_failure", "branches")

_StepKey = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]


class CompensationCall(BaseModel):
    """An inline compensation: a ``tool``, ``webhook_out`` or ``custom`` step's fields, without
    routes. Validation checks the fields against that step type's model."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    type: Literal["tool", "webhook_out", "custom"] = Field(description="The call's step type.")


class Compensable(BaseModel):
    """The ``compensate`` field of the acting step types."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    compensate: _StepKey | CompensationCall | None = Field(
        None,
        description="What undoes this step when the run fails after it succeeded: a step key "
        "(a tool, webhook_out or custom step that only compensates) or an inline tool, "
        "webhook_out or custom call; its templates read this step's output as output.",
    )
