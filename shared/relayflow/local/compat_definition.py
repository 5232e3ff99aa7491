"""Compatibility fix: ``CreateStateMachine`` and ``UpdateStateMachine`` refuse the definitions
Step Functions refuses.

moto only parses a definition (ANTLR): it accepts unreachable states, ``Next`` beside
``"End": true``, Wait seconds beyond 99,999,999, impossible timestamps, ``.$`` keys whose
values are no path, more than 10 intrinsic functions in a field, ``States.ALL`` before other
catchers, ``NaN``, definitions over 1 MiB… and then runs them. AWS answers ``InvalidDefinition``
at create time. With this fix the local runtime applies :mod:`relayflow.compiler.check` (the
same rules the compiler's output must pass) and answers ``InvalidDefinition`` too, so a test
can never pass locally on a definition AWS would reject.

The message follows AWS's shape, ``Invalid State Machine Definition: '<CODE>: <what> at
<where>'``, with AWS's diagnostic codes where one exists and the check's rule id in
brackets; its wording is the check's, not AWS's, so tests should assert the error code.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from relayflow.compiler.check import MAX_DEFINITION_BYTES, Violation, check_machine
from relayflow.local.compat_registry import Patches, fix

#: The ``ValidateStateMachineDefinition`` diagnostic code AWS uses for each rule of the check;
#: every other rule is a ``SCHEMA_VALIDATION_FAILED``.
AWS_CODES = {
    "start-at": "MISSING_TRANSITION_TARGET",
    "next-resolves": "MISSING_TRANSITION_TARGET",
    "terminal": "MISSING_END_STATE",
    "duplicate-state": "DUPLICATE_STATE_NAME",
    "state-name": "INVALID_STATE_NAME",
    "non-finite": "INVALID_JSON_DESCRIPTION",
    "json-type": "INVALID_JSON_DESCRIPTION",
}


def definition_problem(definition: str) -> str | None:
    """Why Step Functions would refuse ``definition`` (a definition string as sent to
    ``CreateStateMachine``), or ``None``."""
    size = len(definition.encode())
    if size > MAX_DEFINITION_BYTES:
        return (
            f"Invalid State Machine Definition: 'SCHEMA_VALIDATION_FAILED: [size] the definition "
            f"is {size:,} bytes; the quota is {MAX_DEFINITION_BYTES:,}'"
        )
    try:
        asl = json.loads(definition)
    except ValueError as exc:
        return f"Invalid State Machine Definition: 'INVALID_JSON_DESCRIPTION: {exc}'"
    violations = check_machine(asl)
    if not violations:
        return None
    return "Invalid State Machine Definition: '" + ", ".join(map(_diagnostic, violations)) + "'"


def _diagnostic(violation: Violation) -> str:
    code = AWS_CODES.get(violation.rule, "SCHEMA_VALIDATION_FAILED")
    where = f"state {violation.state!r}" if violation.state is not None else "the state machine"
    return f"{code}: [{violation.rule}] {violation.message} at {where}"


@fix("definition_check", "local runtime: definitions AWS refuses at create time")
def _definition_check(patches: Patches) -> None:
    """``CreateStateMachine`` and ``UpdateStateMachine`` (the parser backend validates both
    through ``_validate_definition``) answer ``InvalidDefinition`` for any definition that
    fails :func:`relayflow.compiler.check.check_machine`, exceeds 1 MiB or is not JSON, before
    moto's own parse. moto's parser errors reached boto3 with an empty error code; they now
    carry ``InvalidDefinition`` too."""
    from moto.core.exceptions import AWSError
    from moto.stepfunctions.parser.api import InvalidDefinition
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    original = StepFunctionsParserBackend.__dict__["_validate_definition"].__func__

    def validate_definition(definition: Any) -> None:
        problem = definition_problem(definition) if isinstance(definition, str) else None
        if problem:
            raise AWSError(problem, exception_type="InvalidDefinition")
        try:
            original(definition=definition)
        except InvalidDefinition as exc:
            raise AWSError(str(exc.message), exception_type="InvalidDefinition") from exc

    patches.set(
        StepFunctionsParserBackend, "_validate_definition", staticmethod(validate_definition)
    )


@functools.lru_cache(maxsize=256)
def decoded_escapes(definition: str) -> str:
    """``definition`` with every ``\\uXXXX`` escape of its JSON strings decoded (the same JSON
    value, written with its characters as they are); unchanged when it has none or is no JSON."""
    if "\\u" not in definition:
        return definition
    try:
        return json.dumps(json.loads(definition), ensure_ascii=False)
    except ValueError:
        return definition


@fix("definition_unicode", "local runtime: non-ASCII text in intrinsic literals and .$ keys")
def _definition_unicode(patches: Patches) -> None:
    """moto's ANTLR grammar reads the definition's JSON text, not its decoded value: a
    ``\\uXXXX`` escape (what ``json.dumps`` writes for every non-ASCII character, and what a
    client sends as it is) lost its backslash inside an intrinsic function's string literal
    (``States.Format('Grüße {}', …)`` gave ``Gru00fcu00dfe``) and stayed escaped in a ``.$``
    key (``ключ`` gave ``\\u043a…``). Step Functions decodes the JSON first, so the parser now
    gets the definition with its escapes decoded. Wraps the parser that is current when the
    fix is applied (the ``parse_cache`` fix's, normally, which then caches the decoded text);
    the decoding itself is cached by definition text too, so an execution pays it once."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    current = AmazonStateLanguageParser.parse

    def parse(definition: str) -> Any:
        return current(decoded_escapes(definition))

    patches.set(AmazonStateLanguageParser, "parse", staticmethod(parse))
