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


#: Empty on purpose while both pinned validators accept every construct the compiler emits
#: (checked against the golden files, the examples and the generated corpus).
KNOWN_FALSE_POSITIVES: tuple[KnownFalsePositive, ...] = ()


def known_false_positive(
    diagnostic: Diagnostic, definition: Any | None = None
) -> KnownFalsePositive | None:
    """The exception that excuses ``diagnostic``, or ``None`` when it stands."""
    for entry in KNOWN_FALSE_POSITIVES:
        if entry.validator == diagnostic.validator and re.search(entry.message, diagnostic.message):
            return entry
    return None
