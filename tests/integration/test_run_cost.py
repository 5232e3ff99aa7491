"""The run item carries its transition and invocation counts, and ``GET /runs/{id}`` shows an
estimated cost: runs on the local runtime, started through the control API and recorded by the
recorder, against counts made by hand from the compiled machine."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from workflow_shapes import priced

from relayflow.cost.runs import run_cost_usd
from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration

#: Compiles to: double (Lambda Task) → each.size (Pass) → each.check (Choice) → each (Map:
#: price, a Lambda Task, per item) → done (Pass).
#: Standard (``auto`` would pick Express, whose wrapper adds 3 states: see
#: test_express_run_cost.py for Express runs' estimate).
PRICED = priced(engine="standard")
#: Compiles to: charge (Lambda Task, 2 retries of Relayflow.ExpressionError) → its error
#: route record_failure (Pass).
RETRIED = {
    "id": "retried",
    "engine": "standard",
    "start": "charge",
    "errors": {"on_failure": "record_failure"},
    "steps": {
        "charge": {
            "type": "transform",
            "mapping": {"cents": "{{ int(trigger.cents) }}"},
            "retry": {
                "max_attempts": 3,
                "backoff": "fixed",
                "base_seconds": 1,
                "retry_on": ["Relayflow.ExpressionError"],
            },
        },
        "record_failure": {"type": "noop"},
    },
}


def run_to_end(server: LocalServer, api: httpx.Client, definition: dict[str, Any], trigger: Any):
    assert api.put(f"/workflows/{definition['id']}", json=definition).is_success
    started = api.post(f"/workflows/{definition['id']}/runs", json={"input": trigger})
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    for _ in range(200):
        server.settle()
        run = api.get(f"/runs/{run_id}").json()
        if run["status"] not in ("running", "queued"):
            return run
    raise AssertionError(f"run {run_id} did not end")


def test_a_finished_run_carries_its_counts_and_an_estimated_cost(server, api):
    # Given a run whose for_each prices 3 items
    run = run_to_end(server, api, PRICED, {"n": 2, "items": [1, 2, 3]})
    assert run["status"] == "succeeded"
    # Then: 6 top-level states (the for_each's list check, count, limit check and Map among
    # them) + 3 iterations of 1 state = 9 transitions; double + 3 × price
    # = 4 Lambda invocations
    assert (run["transitions"], run["lambda_invocations"]) == (9, 4)
    assert run["lambda_ms"] >= 4  # each invocation bills at least 1 ms
    assert run["estimated_cost_usd"] == run_cost_usd(9, 4, run["lambda_ms"])
    # And the list of runs shows the same figures
    listed = api.get("/workflows/priced/runs").json()["items"]
    mine = next(item for item in listed if item["run_id"] == run["run_id"])
    assert mine["estimated_cost_usd"] == run["estimated_cost_usd"]


def test_retries_count_as_transitions_and_invocations(server, api):
    # Given a step that fails its 3 attempts, then takes its error route
    run = run_to_end(server, api, RETRIED, {"cents": "declined"})
    assert run["status"] == "succeeded"
    # Then: charge entered once + 2 retries + record_failure = 4 transitions; 3 invocations
    assert (run["transitions"], run["lambda_invocations"]) == (4, 3)
    more_transitions = run_cost_usd(5, 3, run["lambda_ms"])
    assert more_transitions is not None and run["estimated_cost_usd"] < more_transitions


def test_a_running_run_has_no_counts_yet(server, api):
    slow = {"id": "slow", "start": "nap", "steps": {"nap": {"type": "delay", "seconds": 30_000}}}
    assert api.put("/workflows/slow", json=slow).is_success
    started = api.post("/workflows/slow/runs", json={"input": {}}).json()
    server.settle()
    run = api.get(f"/runs/{started['run_id']}").json()
    assert run["status"] == "running"
    assert (run["transitions"], run["lambda_invocations"], run["estimated_cost_usd"]) == (
        None,
        None,
        None,
    )
    api.post(f"/runs/{started['run_id']}/cancel")


def test_the_openapi_document_declares_the_counts_and_the_estimate(api):
    schemas = api.get("/openapi.json").json()["components"]["schemas"]
    for model in ("RunSummary", "RunDetail"):
        properties = schemas[model]["properties"]
        for field, kind in (
            ("transitions", "integer"),
            ("lambda_invocations", "integer"),
            ("lambda_ms", "number"),
            ("estimated_cost_usd", "number"),
        ):
            types = {option.get("type") for option in properties[field]["anyOf"]}
            assert types == {kind, "null"}, (model, field, properties[field])
