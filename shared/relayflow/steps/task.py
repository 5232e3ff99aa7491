"""Parse a step Task payload and shape a step's result."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from relayflow.document import StepResult, StepTask
from relayflow.errors import InvalidArgsError


def parse_task(event: Any) -> StepTask:
    """The Task payload as a model; a malformed one is ``Relayflow.InvalidArgs``."""
    try:
        return StepTask.model_validate(event)
    except ValidationError as exc:
        raise InvalidArgsError(f"malformed step payload: {exc.errors(include_url=False)}") from exc


def result(output: Any, branch: str | None = None) -> dict[str, Any]:
    """A step Lambda's return value (:class:`StepResult`); ``output`` is kept even when null."""
    shaped = StepResult(output=output, branch=branch)
    return {"output": shaped.output, **({"branch": shaped.branch} if shaped.branch else {})}
