"""Statements in docs/ that the code decides: kept true by reading both (issue 27, item 10)."""

from __future__ import annotations

import re
from pathlib import Path

from relayflow.definition.step_models import AVAILABLE_STEP_TYPES

DOCS = Path(__file__).parents[2] / "docs"


def test_no_doc_calls_an_available_step_type_unavailable():
    unavailable = re.compile(
        r"`(\w+)`[^.\n]{0,40}\((?:not available|unavailable)\)"
        r"|`(\w+)`(?: and `(\w+)`)? step types? (?:is|are) not in this build"
    )
    found = []
    for doc in sorted(DOCS.glob("*.md")):
        for match in unavailable.finditer(doc.read_text()):
            named = {name for name in match.groups() if name}
            found += [f"{doc.name}: {name}" for name in named & AVAILABLE_STEP_TYPES]
    assert found == []


def test_definitions_and_reliability_agree_that_cancelled_runs_are_compensated():
    # The recorder compensates a cancelled or timed-out saga run through its compensation
    # variant (relayflow.control.cancel_compensation); both documents must say so.
    from relayflow.control import cancel_compensation

    assert cancel_compensation.EXECUTION_SUFFIX == "_compensate"
    definitions = (DOCS / "definitions.md").read_text()
    section = definitions.split("### Compensation (`compensate`)", 1)[1].split("\n---", 1)[0]
    assert "A cancelled or timed-out run is compensated too" in section
    assert "not compensated (a timed-out or\ncancelled run)" not in section
    reliability = (DOCS / "reliability.md").read_text()
    assert "**Cancelled and timed-out runs are compensated after they stop**" in reliability
