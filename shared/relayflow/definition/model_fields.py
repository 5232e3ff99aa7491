"""The building blocks of the definition models: key and template types, the base model.

Shared by :mod:`relayflow.definition.step_models` and :mod:`relayflow.definition.models`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

STEP_KEY_PATTERN = r"^[a-z][a-z0-9_]*$"
WORKFLOW_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"

StepKey = Annotated[
    str,
    StringConstraints(pattern=STEP_KEY_PATTERN, max_length=64),
    Field(description="A step key: lower-case letters, digits and '_', starting with a letter."),
]
#: A string that may hold ``{{ expression }}`` placeholders.
Template = Annotated[str, Field(description="Text with optional {{ expression }} placeholders.")]
#: Any JSON value whose strings may hold placeholders.
TemplateValue = Annotated[Any, Field(description="JSON value; strings may hold placeholders.")]
#: What an acting step returns in a dry run instead of acting (docs/run-modes.md).
DryRunOutput = Annotated[
    Any,
    Field(
        description="Dry runs only: the step's output (a template) instead of acting; default "
        '{"dry_run": true, "simulated": true}.'
    ),
]
#: An HTTP header name (an RFC 9110 token of letters, digits and '-').
HeaderName = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9-]*$", max_length=128)
]


def _zone_spelling(value: str) -> str:
    """A known zone in the database's spelling (``utc`` → ``UTC``); an unknown one is left
    for the validator, which reports it with its path."""
    from relayflow.cron import UnknownTimeZone, zone_name

    try:
        return zone_name(value)
    except UnknownTimeZone:
        return value


TimeZoneName = Annotated[
    str,
    AfterValidator(_zone_spelling),
    Field(description="IANA time zone, e.g. Europe/Berlin (any case: utc is UTC)."),
]


class DefinitionModel(BaseModel):
    """The base of every definition model: unknown fields are refused, fields may be given
    by alias, and validators are built on first use."""

    # defer_build: a model's validator is built on first use, so a step function that
    # validates one step type does not pay for all of them at cold start.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)
