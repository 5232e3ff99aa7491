"""An Express run's estimated cost on the local runtime: the machine records its own end (no
recorder, no history, so no counts), and ``GET /runs/{id}`` still prices it by its request,
its duration and its recording; a Standard run keeps its count-based estimate. The execution
log an Express machine writes is the one ``relayflow compile --cost`` models."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from relayflow.compiler import CompileOptions, compile_workflow
from relayflow.control.service import ControlPlane
from relayflow.cost import prices
from relayflow.cost.bill import PLATFORM, express_billed_ms, platform_lines
from relayflow.cost.estimate import DEFAULT_LOG_EVENT_BYTES, machine_paths
from relayflow.cost.logs import deployed_execution_arn, execution_log_bytes
from relayflow.cost.runs import run_cost_usd
from relayflow.local import LocalRuntime
from relayflow.validation import validate_data

pytestmark = pytest.mark.integration

SHORT: dict[str, Any] = {
    "id": "quick",
    "start": "shape",
    "steps": {"shape": {"type": "transform", "mapping": {"greeting": "hi {{ trigger.name }}"}}},
}


@pytest.fixture
def plane(runtime: LocalRuntime) -> ControlPlane:
    runtime.reset_invocations()
    return ControlPlane()


def finished(runtime: LocalRuntime, plane: ControlPlane, tenant: str, run_id: str) -> Any:
    run = plane.dal.get_run(tenant, run_id)
    assert run is not None and run.execution_arn
    runtime.wait(run.execution_arn, timeout=30)
    return plane.get_run(tenant, run_id)


def test_an_express_run_gets_an_estimate_from_its_duration(runtime, plane):
    # Given a short workflow on an Express machine / When a run ends (recorded natively)
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    plane.put_workflow(tenant, "quick", SHORT)
    started = plane.start_run(tenant, "quick", {"name": "Ada"})
    assert started.engine == "express"
    run = finished(runtime, plane, tenant, started.run_id)
    # Then the run says Express, has no counts (no history) but a duration and an estimate
    assert (run.status, run.engine) == ("succeeded", "express")
    assert run.transitions is None and run.lambda_invocations is None
    assert run.duration_ms is not None
    recording = sum(line.dollars for line in platform_lines("express", PLATFORM, start=False))
    billed_gb_s = express_billed_ms(run.duration_ms) / 1000 * 64 / 1024
    expected = prices.EXPRESS_PER_REQUEST + billed_gb_s * prices.EXPRESS_PER_GB_SECOND + recording
    assert run.estimated_cost_usd == pytest.approx(round(expected, 6))
    # And the list shows the same estimate
    listed = plane.list_runs(tenant, "quick").items
    assert [(r.engine, r.estimated_cost_usd) for r in listed] == [
        ("express", run.estimated_cost_usd)
    ]


def test_a_failed_express_run_is_priced_too(runtime, plane):
    # Given an Express workflow whose code step raises / When its run fails (recorded by the
    # machine's catch-all path)
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    failing = {
        "id": "failing",
        "start": "boom",
        "steps": {"boom": {"type": "code", "code": "raise ValueError('no stock')"}},
    }
    plane.put_workflow(tenant, "failing", failing)
    started = plane.start_run(tenant, "failing", {})
    run = finished(runtime, plane, tenant, started.run_id)
    # Then it has a duration and an estimate from it
    assert (run.status, run.engine) == ("failed", "express")
    assert run.duration_ms is not None
    assert run.estimated_cost_usd == run_cost_usd(
        None, None, None, duration_ms=run.duration_ms, engine="express"
    )
    assert run.estimated_cost_usd is not None and run.estimated_cost_usd > 0


def test_an_express_estimate_is_cheaper_than_the_same_run_on_standard(runtime, plane):
    # The same recorded run priced per engine: Standard by its 4 transitions (_run wrapper
    # included), Express by its request and duration.
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    plane.put_workflow(tenant, "quick", SHORT)
    started = plane.start_run(tenant, "quick", {"name": "Ada"})
    run = finished(runtime, plane, tenant, started.run_id)
    standard = run_cost_usd(4, 0, 0.0)
    assert standard is not None and run.estimated_cost_usd is not None
    assert run.estimated_cost_usd < standard


def test_a_running_express_run_has_no_estimate_and_standard_needs_counts():
    assert run_cost_usd(None, None, None, engine="express") is None
    assert run_cost_usd(None, None, None, duration_ms=500.0) is None
    # Counted step Lambdas are added to an Express estimate
    bare = run_cost_usd(None, None, None, duration_ms=50.0, engine="express")
    counted = run_cost_usd(None, 2, 200.0, duration_ms=50.0, engine="express")
    assert bare is not None and counted is not None
    assert counted - bare == pytest.approx(
        2 * prices.LAMBDA_PER_REQUEST + 0.2 * 0.5 * prices.LAMBDA_PER_GB_SECOND, abs=2e-6
    )


def test_an_express_execution_logs_the_events_the_estimate_models(runtime, plane):
    # Given a short workflow run on its Express machine (the _run wrapper and the native record)
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    plane.put_workflow(tenant, "quick", SHORT)
    started = plane.start_run(tenant, "quick", {"name": "Ada"})
    run = plane.dal.get_run(tenant, started.run_id)
    assert run is not None and run.execution_arn
    runtime.wait(run.execution_arn, timeout=30)
    events = runtime.describe(run.execution_arn).events
    # Then the estimate's model counts every event Express logs: the execution's start and
    # end, the _run Parallel (4), its Pass (2), the record Task (5) and the Succeed (2)
    workflow, problems = validate_data(SHORT)
    assert workflow is not None, problems
    asl = compile_workflow(workflow, CompileOptions(express=True)).asl
    cheapest, dearest = machine_paths(asl)
    assert len(events) == cheapest.events + 2 == dearest.events + 2 == 15
    # And a record of a deployed Express execution is about the modelled size (the ARN, the
    # state names and the details set it; the clock does not)
    arn = deployed_execution_arn("quick", started.run_id, express=True)
    logged = execution_log_bytes(events, arn, "ALL")
    assert logged / len(events) == pytest.approx(DEFAULT_LOG_EVENT_BYTES, rel=0.15)
    # Standard's ERROR level writes nothing for this run
    assert execution_log_bytes(events, arn, "ERROR") == 0
