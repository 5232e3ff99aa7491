"""AWS's own ASL validators over distributed for_each steps: every combination of item
source (state document, S3 JSON / JSONL / CSV, templated keys), tolerance (none, count,
percentage), concurrency and item step kind compiles to a Distributed Map that both
validators (``tools/asl/validate.mjs``) and ``relayflow.compiler.check`` accept.

(The generated corpus of tests/deploy/test_asl_validators.py draws inline for_each steps; these
combinations are listed here so that the corpus keeps its distribution.)"""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
from asl_validators import REQUIRE_ENV, missing_tools, validate_definitions

from relayflow.compiler import compile_workflow
from relayflow.compiler.check import check_machine
from relayflow.validation import validate_data

SOURCES: dict[str, dict[str, Any]] = {
    "document": {"mode": "distributed", "items": "{{ trigger.orders }}", "max_items": 40_000},
    "json": {"items_from": "s3://app-exports/orders.json"},
    "jsonl": {"items_from": "s3://app-exports/{{ trigger.date }}/orders.jsonl"},
    "csv": {"items_from": "s3://app-exports.eu/{{ run.id }}-{{ trigger.date }}.csv"},
    "declared": {"items_from": "s3://app-x/exports/latest", "items_format": "jsonl"},
}
TOLERANCES: dict[str, dict[str, Any]] = {
    "none": {},
    "count": {"tolerated_failures": 0},
    "percentage": {"tolerated_failures": "100%"},
}
ITEM_STEPS: dict[str, dict[str, Any]] = {
    "native": {"type": "transform", "mapping": {"sku": "{{ item.sku }}", "i": "{{ index }}"}},
    "tool": {
        "type": "tool",
        "tool": "aws.sqs.send_message",
        "args": {"queue_url": "https://sqs.us-east-1.amazonaws.com/1/app-q", "body": "{{ item }}"},
        "retry": {"max_attempts": 3, "backoff": "exponential", "base_seconds": 2},
    },
    "sub_workflow": {"type": "sub_workflow", "workflow_id": "child", "input": {"o": "{{ item }}"}},
}


def definition(source: str, tolerance: str, item: str, concurrency: int) -> dict[str, Any]:
    each: dict[str, Any] = {"type": "for_each", "step": "work", **SOURCES[source]}
    each.update(TOLERANCES[tolerance])
    if concurrency:
        each["max_concurrency"] = concurrency
    if item == "sub_workflow":
        each["on_failure"] = "failed"  # a route as well: the Map's Catch
    steps: dict[str, Any] = {"each": each, "work": ITEM_STEPS[item], "failed": {"type": "noop"}}
    if "on_failure" not in each:
        del steps["failed"]
    return {"id": f"dist-{source}-{tolerance}-{item}", "start": "each", "steps": steps}


CASES = [
    definition(source, tolerance, item, concurrency)
    for (source, tolerance, item), concurrency in zip(
        itertools.product(SOURCES, TOLERANCES, ITEM_STEPS), itertools.cycle([0, 1, 1000])
    )
]


@pytest.fixture(scope="module")
def machines() -> dict[str, dict[str, Any]]:
    compiled: dict[str, dict[str, Any]] = {}
    for data in CASES:
        workflow, problems = validate_data(data, f"{data['id']}.yaml")
        assert workflow is not None, problems
        asl = compile_workflow(workflow).asl
        assert check_machine(asl) == [], data["id"]
        assert asl["States"]["each"]["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
        compiled[data["id"]] = asl
    return compiled


def test_every_combination_compiles_to_a_checked_distributed_map(machines):
    assert len(machines) == len(SOURCES) * len(TOLERANCES) * len(ITEM_STEPS)


def test_both_validators_accept_every_distributed_map(machines):
    reason = missing_tools()
    if reason is not None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)
    reports = validate_definitions(machines)
    failing = {name: [str(d) for d in r.diagnostics] for name, r in reports.items() if not r.ok}
    assert failing == {}
