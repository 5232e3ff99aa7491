"""Checks of a compiled state machine before it is deployed (a version or one of its
variants)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.control.errors import CompilerBug, InvalidDefinition


def check_quotas(workflow: Any, asl: Mapping[str, Any], engine: str) -> None:
    """Refuse a compiled machine past a Step Functions quota its definition reaches
    (:mod:`relayflow.compiler.quotas`: the definition size with the child schemas and engine
    wrapper this deployment adds, the execution history of a Standard machine): the
    definition's problem, 422 ``invalid_definition``, before anything is deployed."""
    from relayflow.compiler.quotas import history_problems, size_problem

    problems = [p for p in (size_problem(asl),) if p is not None]
    if engine == "standard":
        problems += history_problems(workflow, asl)
    if problems:
        raise InvalidDefinition.from_problems(problems)


def check_compiled(asl: Mapping[str, Any], *, what: str = "the compiled state machine") -> None:
    """Refuse to deploy a compiled machine that fails :mod:`relayflow.compiler.check`. Over
    the definition size quota it is the definition's problem (422 ``invalid_definition``,
    rule ``compiled-size``; ``what`` names the machine); any other violation is a compiler
    bug, logged in full and answered with 500 ``compiler_bug``."""
    from relayflow.compiler.check import CompiledMachineInvalid, assert_valid_machine
    from relayflow.compiler.quotas import size_problem

    too_large = size_problem(asl, what=what)
    if too_large is not None:
        raise InvalidDefinition.from_problems([too_large])
    try:
        assert_valid_machine(asl)
    except CompiledMachineInvalid as exc:
        from relayflow.observability import logger

        logger.error("compiled state machine failed the check", extra={"reason": str(exc)})
        raise CompilerBug.from_violations(exc.violations) from exc
