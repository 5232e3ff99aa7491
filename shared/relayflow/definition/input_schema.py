"""A workflow's declared input: ``input_schema:``, a JSON Schema (draft 2020-12) of the trigger
payload its runs start with.

It is checked as a schema when the definition is validated (rule ``json-schema``, or
``input-schema-size`` above :data:`MAX_INPUT_SCHEMA_BYTES`), and a run's input is checked
against it when the run starts (:func:`input_violations`): the API answers 422
``invalid_input``, ``relayflow run --input`` exits with an error, a sub_workflow child start or
an agent's workflow tool call fails with ``Relayflow.InvalidInput``. An agent that calls the
workflow as a tool is offered this schema as the tool's arguments (:mod:`relayflow.ai.tools`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, field_validator
from pydantic_core import PydanticCustomError

#: Largest ``input_schema`` as compact JSON: it travels in the compiled config of every agent
#: step that calls the workflow as a tool, and in the stored version.
MAX_INPUT_SCHEMA_BYTES = 16_384
#: The one dialect accepted (a ``$schema`` naming another draft is refused).
DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: At most this many violations are reported for one input.
MAX_REPORTED = 10


class InputSchemaSetting(BaseModel):
    """Mixed into :class:`relayflow.definition.models.Workflow`."""

    input_schema: dict[str, Any] | None = Field(
        None,
        description="JSON Schema (draft 2020-12) of the trigger payload a run starts with: "
        "API, webhook, event and schedule starts, sub_workflow children and agents' "
        "workflow tools are checked against it (docs/definitions.md#input_schema).",
    )

    @field_validator("input_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            check_input_schema(value)
        return value


def check_input_schema(schema: Mapping[str, Any]) -> None:
    """Raise :class:`PydanticCustomError` (rule ``input-schema-size`` or ``json-schema``)
    unless ``schema`` is a draft 2020-12 JSON Schema of at most
    :data:`MAX_INPUT_SCHEMA_BYTES`."""
    from jsonschema import SchemaError

    from relayflow.definition.tenant_schema import UnsupportedPattern, check_schema

    size = len(json.dumps(schema, separators=(",", ":"), default=str).encode())
    if size > MAX_INPUT_SCHEMA_BYTES:
        raise PydanticCustomError(
            "input_schema_size",
            "input_schema is {size} bytes as JSON; at most {limit} are allowed",
            {"size": size, "limit": MAX_INPUT_SCHEMA_BYTES},
        )
    declared = schema.get("$schema")
    if declared is not None and str(declared).rstrip("#") != DIALECT:
        raise PydanticCustomError(
            "json_schema",
            "input_schema must be draft 2020-12 ($schema {dialect}), not {declared}",
            {"dialect": DIALECT, "declared": str(declared)},
        )
    try:
        check_schema({**schema, "$schema": DIALECT})
    except UnsupportedPattern as exc:
        raise PydanticCustomError(
            "json_schema", "input_schema: {message}", {"message": exc.message}
        ) from None
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        raise PydanticCustomError(
            "json_schema",
            "input_schema is not a valid JSON Schema{at}: {message}",
            {"at": f" at /{where}" if where else "", "message": exc.message},
        ) from None


@dataclass(frozen=True)
class InputViolation:
    """One way an input breaks the schema: ``pointer`` (RFC 6901, ``""`` for the whole
    input) names the value, ``rule`` the schema keyword it breaks."""

    pointer: str
    rule: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"pointer": self.pointer, "rule": self.rule, "message": self.message}


def input_violations(schema: Mapping[str, Any] | None, value: Any) -> list[InputViolation]:
    """How ``value`` breaks ``schema`` (none when it matches or there is no schema), at most
    :data:`MAX_REPORTED`, in a stable order (by pointer, then rule)."""
    if schema is None:
        return []
    from relayflow.definition.tenant_schema import validator

    found = [
        InputViolation(_pointer(error.absolute_path), str(error.validator), error.message)
        for error in validator({**schema, "$schema": DIALECT}).iter_errors(value)
    ]
    found.sort(key=lambda v: (v.pointer, v.rule, v.message))
    return found[:MAX_REPORTED]


def describe(violations: list[InputViolation]) -> str:
    """One line naming the first violation (and how many more there are)."""
    first = violations[0]
    where = first.pointer or "the input"
    more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
    return f"{where}: {first.message} (rule {first.rule}){more}"


def _pointer(path: Any) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)
