"""The compensation variant of a saga machine (``relayflow.compiler.compensation_variant``),
the pieces of ``relayflow.control.cancel_compensation`` that need no runtime, the verdict of a
compensated cancel, and the engine choice for a saga that can time out."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from relayflow.compiler import compile_workflow
from relayflow.compiler.check import assert_valid_machine
from relayflow.compiler.compensation_variant import END, compensation_variant
from relayflow.compiler.engine import choose_engine
from relayflow.control.cancel_compensation import (
    compensation_machine_name,
    is_compensation_execution,
    last_saga_document,
)
from relayflow.control.outcome import outcome_of
from relayflow.validation import load_workflow, validate_data

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def compiled(name: str) -> dict[str, Any]:
    return compile_workflow(load_workflow(GOLDEN / f"{name}.yaml")).asl


@pytest.mark.parametrize("case", ["saga", "saga_for_each"])
def test_the_variant_matches_its_golden_file_and_is_a_valid_machine(case):
    variant = compensation_variant(compiled(case))
    assert variant is not None
    got = json.dumps(variant, indent=2) + "\n"
    path = GOLDEN / f"{case}.compensation.asl.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(got)
    assert got == path.read_text(), f"{case}: the variant differs from {path.name}"
    assert_valid_machine(variant)


def test_the_variant_is_the_walk_alone_and_ends_in_success_with_the_done_list():
    asl = compiled("saga")
    variant = compensation_variant(asl)
    assert variant is not None
    states = variant["States"]
    # Only the walk: no step of the run, no saga init, nothing that fails the run
    assert variant["StartAt"] == "_saga.next"
    assert all(name.startswith("_saga.") for name in states)
    assert not {"_saga.init", "_saga.raise", "_saga.report", "_saga.fail"} & set(states)
    assert not any(s["Type"] == "Fail" for s in states.values())
    assert states[END] == {"Type": "Pass", "Parameters": {"done.$": "$.saga.done"}, "End": True}
    # Each compensation Task is the one the run's own walk runs (same function, step key,
    # retries), so its idempotency record is shared
    tasks = [n for n, s in states.items() if s["Type"] in ("Task", "Map")]
    assert tasks and all(states[n] == asl["States"][n] for n in tasks)
    # And every transition stays inside the variant
    targets = {s.get("Next") for s in states.values()} | {
        r["Next"] for s in states.values() for r in s.get("Choices", []) + s.get("Catch", [])
    }
    assert targets - {None} <= set(states)
    # And the compiled machine is left as it was
    assert "_saga.init" in asl["States"]


def test_a_machine_without_a_walk_has_no_variant():
    workflow, problems = validate_data(
        {
            "id": "plain",
            "start": "a",
            "steps": {"a": {"type": "webhook_out", "url": "https://example.com/a"}},
        }
    )
    assert workflow is not None, problems
    assert compensation_variant(compile_workflow(workflow).asl) is None


def test_the_last_document_holding_a_saga_is_the_newest():
    def entered(name: str, document: Any) -> dict[str, Any]:
        return {"stateEnteredEventDetails": {"name": name, "input": json.dumps(document)}}

    run = {"id": "r1"}
    older = {"run": run, "saga": {"todo": {"key": "a", "prev": {}}, "done": {}}}
    newer = {"run": run, "saga": {"todo": {"key": "b", "prev": older["saga"]["todo"]}}}
    history = [
        entered("a", older),
        {"stateExitedEventDetails": {"name": "b", "output": json.dumps(newer)}},
        entered("item", {"record": {"saga": "not a document"}}),  # an item's input
        {"taskScheduledEventDetails": {"parameters": "{}"}},
    ]
    assert last_saga_document(history) == newer
    assert last_saga_document([entered("x", {"run": run})]) is None
    assert last_saga_document(None) is None


def test_names_of_the_compensation_machine_and_executions():
    assert compensation_machine_name("dev", "acme", "order") == "relayflow-dev-acme_order.saga"
    assert is_compensation_execution("0f1e2d_compensate")
    assert not is_compensation_execution("0f1e2d")


def test_a_cancelled_run_that_compensated_has_the_compensation_verdict():
    assert outcome_of("aborted", fallbacks_used=False) == "cancelled"
    assert outcome_of("aborted", fallbacks_used=False, compensation="compensated") == (
        "compensated"
    )
    assert (
        outcome_of("timed_out", fallbacks_used=False, compensation="partially_compensated")
        == "partially_compensated"
    )


def saga_workflow(**settings: Any) -> Any:
    workflow, problems = validate_data(
        {
            "id": "quick-saga",
            "start": "a",
            "steps": {
                "a": {
                    "type": "webhook_out",
                    "url": "https://example.com/a",
                    "timeout_seconds": 10,
                    "retry": "none",
                    "compensate": {"type": "webhook_out", "url": "https://example.com/undo"},
                    "on_success": "b",
                },
                "b": {"type": "webhook_out", "url": "https://example.com/b", "retry": "none"},
            },
            **settings,
        }
    )
    assert workflow is not None, problems
    return workflow


def test_a_saga_that_can_reach_its_run_timeout_keeps_standard():
    # Given a short saga whose run timeout is shorter than its longest run
    choice = choose_engine(saga_workflow(engine="auto", run_timeout_seconds=5))
    # Then it runs on Standard: its compensation reads the execution history
    assert choice.engine == "standard"
    assert "timed-out saga run" in choice.reason
    # And the same saga that cannot time out may run on Express
    assert choose_engine(saga_workflow(engine="auto")).engine == "express"
