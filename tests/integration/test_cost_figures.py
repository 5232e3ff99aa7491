"""The counts in the docs' cost tables are what the examples do now.

README.md's and docs/cost.md's tables are written by ``tools/gen_cost_docs.py`` from one run of
``bench/cost_bench.py``. Their dollars move with the machine; their counts do not. Each
example runs here on the local runtime, as the bench runs it, and its executions' histories are
counted with ``relayflow.cost.counts.count_history`` (what the recorder stores on a run): the
transitions, Lambda invocations and history events (what Express logs) must be the tables'.
A change to the compiler that adds states (a guard, a recording state) fails here until the
tables are generated again.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from relayflow_testing import ROOT

from relayflow.cost.counts import count_history
from relayflow.local import LocalRuntime
from relayflow.local.resources import load_resources
from relayflow.runner import run_workflow
from relayflow.validation import load_workflow

pytestmark = pytest.mark.integration
BARE_RUNTIME = True
EXAMPLES_DIR = ROOT / "workflows" / "examples"


@dataclass(frozen=True)
class Counts:
    transitions: int
    lambda_invocations: int
    log_events: int


def _bench(name: str) -> Any:
    """A module of bench/ (the examples the cost bench runs, and the docs generator)."""
    for folder in (ROOT / "bench", ROOT / "tools"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    return importlib.import_module(name)


def generated_rows(path: Path, name: str) -> list[list[str]]:
    """The cells of each body row of the ``generated:<name>`` table in ``path``."""
    found = re.search(
        rf"<!-- generated:{name} -->\n(.*?)\n<!-- end generated:{name} -->",
        path.read_text(),
        re.DOTALL,
    )
    assert found, f"{path.name} has no generated:{name} table (tools/gen_cost_docs.py)"
    lines = found.group(1).splitlines()[2:]  # past the header and its rule
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def counted(rt: LocalRuntime, example: tuple[str, str, str, str | None]) -> Counts:
    """Run one of the cost bench's examples and count its executions (its children's too)."""
    _, workflow_file, event_file, resources_file = example
    children = {
        child.id: child
        for child in (load_workflow(EXAMPLES_DIR / name) for name in _bench("cost_bench").CHILDREN)
    }
    resources = load_resources(EXAMPLES_DIR / "local" / resources_file) if resources_file else None
    trigger = json.loads((ROOT / "events" / "examples" / event_file).read_text())
    before = set(rt.list_executions())
    result = run_workflow(
        load_workflow(EXAMPLES_DIR / workflow_file),
        trigger,
        runtime=rt,
        resources=resources,
        workflows=children,
    )
    assert result.status == "succeeded", (result.error, result.cause)
    histories = [rt.describe(arn).events for arn in sorted(set(rt.list_executions()) - before)]
    counts = [count_history(events) for events in histories]
    return Counts(
        transitions=sum(c.transitions for c in counts),
        lambda_invocations=sum(c.lambda_invocations for c in counts),
        log_events=sum(len(events) for events in histories),
    )


def test_the_cost_tables_counts_are_the_examples_counts(runtime: LocalRuntime) -> None:
    # Given the examples the cost bench prices
    examples = _bench("cost_bench").EXAMPLES
    # When each runs on the local runtime and its executions are counted
    measured = {example[0]: counted(runtime, example) for example in examples}
    # Then docs/cost.md's table shows those transitions, invocations and log events
    documented = {
        row[0]: Counts(int(row[1]), int(row[2]), int(row[4]))
        for row in generated_rows(ROOT / "docs" / "cost.md", "cost-examples")
    }
    assert documented == measured, "run .venv/bin/python tools/gen_cost_docs.py"
    # And README's summary the same transitions, example by example
    summary = generated_rows(ROOT / "README.md", "cost-summary")
    assert [int(row[1]) for row in summary] == [c.transitions for c in measured.values()]
    generator = _bench("gen_cost_docs")
    labels = [generator.README_LABELS.get(label, label) for label in measured]
    assert [row[0].split(" (")[0] for row in summary] == labels


def test_the_cost_prose_quotes_the_tables_transitions() -> None:
    # Given docs/cost.md's example of what transitions alone cost on Standard
    text = (ROOT / "docs" / "cost.md").read_text()
    rows = {row[0]: row for row in generated_rows(ROOT / "docs" / "cost.md", "cost-examples")}
    quoted = re.search(r"A (\d+)-transition run \(order_triage\) costs\s+\$(\d+)\s+per", text)
    # Then it is order_triage's count in the table, at $25 per million transitions
    assert quoted, "docs/cost.md no longer quotes order_triage's transitions"
    transitions = int(rows["order_triage"][1])
    assert (int(quoted.group(1)), int(quoted.group(2))) == (transitions, 25 * transitions)
