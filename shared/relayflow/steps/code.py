"""The code step: user Python run in a separate, limited process (:mod:`relayflow.sandbox`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from relayflow.errors import CodeError, InvalidArgsError
from relayflow.expressions import render
from relayflow.observability import logger
from relayflow.sandbox import Limits, run_code
from relayflow.settings import get_settings
from relayflow.steps.task import parse_task, result

if TYPE_CHECKING:
    from relayflow.definition.step_models import CodeStep


def run(event: Any) -> dict[str, Any]:
    """Run the step's code against the state document; its return value is the output.

    The code sees ``steps``, ``trigger``, ``run`` and ``input`` (the step's ``input`` template
    rendered against the document). Its limits are the settings' ceilings, lowered by the
    step's own ``cpu_seconds``, ``memory_mb`` and ``wall_seconds``. Failures are
    ``Relayflow.CodeError`` or ``Relayflow.CodeLimitExceeded``."""
    task = parse_task(event)
    step = _code_step(task.step.config)
    doc = task.doc
    limits = Limits.for_step(
        get_settings(),
        cpu_seconds=step.cpu_seconds,
        memory_mb=step.memory_mb,
        wall_seconds=step.wall_seconds,
    )
    try:
        outcome = run_code(
            step.code,
            steps=doc.get("steps") or {},
            trigger=doc.get("trigger"),
            input=render(step.input, doc),
            run=doc.get("run") or {},
            limits=limits,
        )
    except CodeError as exc:
        if exc.details.get("stdout"):
            logger.info("code output", extra={"stdout": exc.details["stdout"]})
        raise
    logger.info(
        "code finished",
        extra={
            "duration_ms": round(outcome.duration_ms, 1),
            "cpu_ms": round(outcome.cpu_ms, 1),
            **({"stdout": outcome.stdout} if outcome.stdout else {}),
        },
    )
    return result(outcome.value, task=task)


def _code_step(config: dict[str, Any]) -> CodeStep:
    # The step models are a fifth of import boto3: loaded with the first step, not at init.
    from relayflow.definition.step_models import CodeStep

    try:
        return CodeStep.model_validate({**config, "type": "code"})
    except ValidationError as exc:
        raise InvalidArgsError(
            f"malformed code step config: {exc.errors(include_url=False)}"
        ) from exc
