"""The ONE place where a diagnostic of an ASL validator is excused as the validator's own bug.

Every entry names the validator, what it says, the construct the compiler legitimately emits,
why AWS accepts that construct, and the upstream reference. A document is never skipped:
only a diagnostic that matches an entry here is dropped, and every other diagnostic of the
same document still fails the test. An entry that no longer matches anything should be
deleted (``tests/deploy/test_asl_validators.py`` lists which entries fired).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asl_validators import Diagnostic


@dataclass(frozen=True)
class KnownFalsePositive:
    validator: str  # "language_service" or "asl_validator"
    #: Matched against the diagnostic's message with ``re.search``.
    message: str
    construct: str
    reason: str
    reference: str


KNOWN_FALSE_POSITIVES: tuple[KnownFalsePositive, ...] = (
    KnownFalsePositive(
        validator="asl_validator",
        # Only an array element of a payload template (…/<index> is invalid …).
        message=r"/Parameters/.*/\d+ is invalid\. must match exactly one schema in oneOf$",
        construct="a `null` element inside a list of a native transform's output, e.g. "
        '`mapping: {labels: ["a", null]}` compiles to `"Parameters": {"output": {"labels": '
        '["a", null]}}`',
        reason="A payload template is any JSON (ASL specification, 'Payload Template'), null "
        "included, and the language service accepts the same document; asl-validator 4.0.0's "
        "schema gives an array element of a payload template a oneOf that null does not "
        "satisfy exactly once. A key ending in .$ never reaches this case (the compiler keeps "
        "those out of native states).",
        reference="https://github.com/ChristopheBougere/asl-validator/issues/104 (the same "
        "oneOf on arrays inside Parameters)",
    ),
)


def known_false_positive(
    diagnostic: Diagnostic, definition: Any | None = None
) -> KnownFalsePositive | None:
    """The exception that excuses ``diagnostic``, or ``None`` when it stands."""
    for entry in KNOWN_FALSE_POSITIVES:
        if entry.validator == diagnostic.validator and re.search(entry.message, diagnostic.message):
            return entry
    return None
