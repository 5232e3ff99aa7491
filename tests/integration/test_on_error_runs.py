"""on_error (park / resume / continue) and the run outcome, end to end on the control plane
and the local runtime: compiled park and fallback states, the park stored by the waitpoint
function, resume through the control plane, the recorder's verdict.

A recording server plays the step's remote API: it fails until told otherwise, so a test
sees how often the step acted. One runtime serves the module; every test has its own tenant.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import workflow_shapes as shapes
from relayflow_testing import Received, Reply, Server
from runs import settle

from relayflow.control.errors import Conflict, NotFound, Unprocessable
from relayflow.control.resume import ResumeRequest
from relayflow.control.service import ControlPlane
from relayflow.dal.parks import parks_partition
from relayflow.dal.schema import GSI1

pytestmark = pytest.mark.integration


class Events:
    """Captures the lifecycle events the recorder publishes."""

    def __init__(self) -> None:
        self.details: list[dict[str, Any]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.details += [json.loads(e["Detail"]) | {"type": e["DetailType"]} for e in Entries]
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e"}]}


@pytest.fixture
def failing(remote: Server) -> Server:
    """The remote API answers 500 until ``remote.reply`` is set to ``ok``."""
    return remote.answering(fail)


def fail(received: Received) -> Reply:
    return 500, {"Content-Type": "application/json"}, b'{"error": "down"}'


def ok(received: Received) -> Reply:
    return 200, {"Content-Type": "application/json"}, b'{"id": "ch_1"}'


def charging(url: str, on_error: dict[str, Any], **charge: Any) -> dict[str, Any]:
    """charge (a webhook_out with ``on_error``) → receipt; ``refund`` when charge routes to it."""
    receipt = {"charge": "{{ steps.charge.output }}", "note": "{{ trigger.note }}"}
    definition = shapes.charging(
        url, receipt, on_error, body={"order": "{{ trigger.order }}"}, **charge
    )
    if charge.get("on_failure") == "refund":
        definition["steps"]["refund"] = {
            "type": "transform",
            "mapping": {"refunded": "{{ trigger.order }}"},
        }
    return definition


def parked(plane: ControlPlane, tenant: str, run_id: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = plane.dal.get_run(tenant, run_id)
        if run is not None and run.status == "parked":
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not park")


def start(plane: ControlPlane, tenant: str, definition: dict[str, Any], trigger: Any) -> str:
    # Standard: the tests read the timeline from the execution history (an Express run's
    # timeline has only what its steps recorded).
    definition = {"engine": "standard", **definition}
    plane.put_workflow(tenant, definition["id"], definition)
    return plane.start_run(tenant, definition["id"], trigger).run_id


# --------------------------------------------------------------------------- park


def test_a_parked_run_is_listed_with_its_error_and_a_retry_acts_again(
    runtime, plane, tenant, failing
):
    # Given a charge that fails and parks the run
    run_id = start(
        plane, tenant, charging(failing.url, {"action": "park"}), {"order": "o-1", "note": ""}
    )
    run = parked(plane, tenant, run_id)
    # Then the run is parked at the step, with its error, and listed as parked
    assert run.parked["step"] == "charge"
    assert run.parked["error"]["Error"] == "Relayflow.HttpError"
    listed = plane.list_parked_runs(tenant).items
    assert [(r.run_id, r.status, r.parked.step) for r in listed] == [(run_id, "parked", "charge")]
    assert plane.get_run(tenant, run_id).status == "parked"
    assert [s.status for s in plane.get_run(tenant, run_id).steps] == ["parked"]
    # When the remote recovers and the run is resumed with retry
    failing.reply = ok
    answer = plane.resume_run(tenant, run_id, ResumeRequest(action="retry"))
    assert (answer.step, answer.status) == ("charge", "running")
    detail = settle(runtime, plane, tenant, run_id)
    # Then the step acted a second time and the run went on with its output
    assert len(failing.to("/charge")) == 2
    assert (detail.status, detail.outcome) == ("succeeded", "succeeded")
    receipt = next(s for s in detail.steps if s.key == "receipt")
    assert receipt.output["charge"]["body"] == {"id": "ch_1"}
    assert plane.list_parked_runs(tenant).items == []


def test_skip_goes_on_with_the_given_output_and_merges_the_context(runtime, plane, tenant, failing):
    run_id = start(
        plane, tenant, charging(failing.url, {"action": "park"}), {"order": "o-2", "note": ""}
    )
    parked(plane, tenant, run_id)
    # When a person skips the step with an output and adds to the run's context
    plane.resume_run(
        tenant,
        run_id,
        ResumeRequest(action="skip", output={"id": "manual"}, context={"note": "paid by phone"}),
    )
    detail = settle(runtime, plane, tenant, run_id)
    # Then the next step reads the given output and the merged context; the step acted once
    assert len(failing.to("/charge")) == 1
    receipt = next(s for s in detail.steps if s.key == "receipt")
    assert receipt.output == {"charge": {"id": "manual"}, "note": "paid by phone"}
    assert [s.status for s in detail.steps if s.key == "charge"] == ["skipped"]
    assert (detail.status, detail.outcome) == ("succeeded", "succeeded")


def test_fail_takes_the_steps_failure_route(runtime, plane, tenant, failing):
    definition = charging(failing.url, {"action": "park"}, on_failure="refund")
    run_id = start(plane, tenant, definition, {"order": "o-3", "note": ""})
    parked(plane, tenant, run_id)
    plane.resume_run(tenant, run_id, ResumeRequest(action="fail"))
    detail = settle(runtime, plane, tenant, run_id)
    # Then on_failure ran (with the step's own error at hand), and nothing acted again
    assert [s.key for s in detail.steps] == ["charge", "refund"]
    assert detail.steps[-1].output == {"refunded": "o-3"}
    assert len(failing.to("/charge")) == 1


def test_fail_without_a_failure_route_fails_the_run_with_the_steps_error(
    runtime, plane, tenant, failing
):
    run_id = start(
        plane, tenant, charging(failing.url, {"action": "park"}), {"order": "o-4", "note": ""}
    )
    parked(plane, tenant, run_id)
    events = Events()
    plane.resume_run(tenant, run_id, ResumeRequest(action="fail"))
    detail = settle(runtime, plane, tenant, run_id, events)
    assert (detail.status, detail.outcome, detail.error) == (
        "failed",
        "failed",
        "Relayflow.HttpError",
    )
    assert detail.parked is None
    # And the lifecycle event carries the verdict
    assert [(e["type"], e["outcome"]) for e in events.details] == [
        ("relayflow.run.failed", "failed")
    ]


def test_a_park_past_its_timeout_fails_with_park_timeout(runtime, plane, tenant, failing):
    definition = charging(failing.url, {"action": "park", "park_timeout": 1})
    run_id = start(plane, tenant, definition, {"order": "o-5", "note": ""})
    parked(plane, tenant, run_id)
    detail = settle(runtime, plane, tenant, run_id)
    assert (detail.status, detail.error, detail.outcome) == (
        "failed",
        "Relayflow.ParkTimeout",
        "failed",
    )
    # And a resume now is a conflict: the run is not parked any more
    with pytest.raises(Conflict):
        plane.resume_run(tenant, run_id, ResumeRequest(action="retry"))
    # And the list drops the ended run's park, which it marks expired
    assert plane.list_parked_runs(tenant).items == []
    assert plane.list_parked_runs(tenant).items == []
    (park,) = plane.dal.query(partition=parks_partition(tenant), index=GSI1)
    assert park["status"] == "expired"


def test_resume_refusals_leave_the_run_parked(runtime, plane, tenant, failing):
    run_id = start(
        plane, tenant, charging(failing.url, {"action": "park"}), {"order": "o-6", "note": ""}
    )
    before = parked(plane, tenant, run_id)
    # Reserved context keys: 422 naming each of them
    with pytest.raises(Unprocessable) as info:
        plane.resume_run(
            tenant,
            run_id,
            ResumeRequest(action="retry", context={"run": 1, "steps": {}, "error": 2, "ok": 3}),
        )
    assert [d["path"] for d in info.value.details] == [
        "context.error",
        "context.run",
        "context.steps",
    ]
    assert "error, run, steps" in info.value.message
    # Another tenant's run: 404, exactly like a run that does not exist
    with pytest.raises(NotFound):
        plane.resume_run("someone-else", run_id, ResumeRequest(action="fail"))
    # The run is unchanged by either
    after = plane.dal.get_run(tenant, run_id)
    assert (after.status, after.parked) == ("parked", before.parked)
    # When it is cancelled while parked, it ends aborted: outcome cancelled, no longer parked
    cancelled = plane.cancel_run(tenant, run_id)
    assert (cancelled.status, cancelled.outcome) == ("aborted", "cancelled")
    assert plane.list_parked_runs(tenant).items == []
    with pytest.raises(Conflict):
        plane.resume_run(tenant, run_id, ResumeRequest(action="retry"))


def test_resume_of_a_run_that_never_parked_is_a_conflict(runtime, plane, tenant, remote):
    remote.reply = ok
    run_id = start(
        plane, tenant, charging(remote.url, {"action": "park"}), {"order": "o-7", "note": ""}
    )
    settle(runtime, plane, tenant, run_id)
    with pytest.raises(Conflict) as info:
        plane.resume_run(tenant, run_id, ResumeRequest(action="skip"))
    assert "not parked" in info.value.message


# --------------------------------------------------------------------------- continue


def test_continue_goes_on_with_the_fallback_and_the_run_succeeds_with_fallbacks(
    runtime, plane, tenant, failing
):
    fallback = {"action": "continue", "output": {"id": None, "reason": "{{ error.Error }}"}}
    run_id = start(plane, tenant, charging(failing.url, fallback), {"order": "o-8", "note": "n"})
    events = Events()
    detail = settle(runtime, plane, tenant, run_id, events)
    # Then the next step read the rendered fallback, and the timeline says fallback
    receipt = next(s for s in detail.steps if s.key == "receipt")
    assert receipt.output == {"charge": {"id": None, "reason": "Relayflow.HttpError"}, "note": "n"}
    charge = next(s for s in detail.steps if s.key == "charge")
    assert (charge.status, charge.error) == ("fallback", "Relayflow.HttpError")
    # And the run's verdict records that a fallback was used, on the item and in the event
    assert (detail.status, detail.outcome) == ("succeeded", "succeeded_with_fallbacks")
    assert plane.dal.get_run(tenant, run_id).outcome == "succeeded_with_fallbacks"
    assert [(e["type"], e["outcome"]) for e in events.details] == [
        ("relayflow.run.succeeded", "succeeded_with_fallbacks")
    ]


def _fork(definition: dict[str, Any]) -> dict[str, Any]:
    """``definition`` with a parallel after ``receipt`` (on_error belongs to the main flow:
    fallbacks happen before or after a parallel, never inside it)."""
    steps = definition["steps"]
    steps["receipt"]["on_success"] = "fork"
    steps["fork"] = {"type": "parallel", "branches": ["left", "right"], "on_success": "joined"}
    steps["left"] = {"type": "transform", "mapping": {"side": "left"}}
    steps["right"] = {"type": "transform", "mapping": {"side": "right"}}
    steps["joined"] = {
        "type": "transform",
        "mapping": {"left": "{{ steps.left.output.side }}", "right": "{{ steps.right.output }}"},
    }
    return definition


def test_a_fallback_before_a_parallel_still_marks_the_run(runtime, plane, tenant, failing):
    # Given a step that continues with its fallback, followed by a parallel (which rebuilds
    # the state document from its branches)
    fallback = {"action": "continue", "output": {"id": None}}
    definition = _fork(charging(failing.url, fallback))
    run_id = start(plane, tenant, definition, {"order": "o-10", "note": ""})
    events = Events()

    # When the run ends
    detail = settle(runtime, plane, tenant, run_id, events)

    # Then the parallel ran, and the verdict still records the fallback: on the run's answer,
    # on the run item and in the lifecycle event
    joined = next(s for s in detail.steps if s.key == "joined")
    assert joined.output == {"left": "left", "right": {"side": "right"}}
    assert (detail.status, detail.outcome) == ("succeeded", "succeeded_with_fallbacks")
    assert plane.dal.get_run(tenant, run_id).outcome == "succeeded_with_fallbacks"
    assert [(e["type"], e["outcome"]) for e in events.details] == [
        ("relayflow.run.succeeded", "succeeded_with_fallbacks")
    ]


def test_a_parallel_without_fallbacks_leaves_the_run_plainly_succeeded(
    runtime, plane, tenant, failing
):
    # Given the same shape where every call succeeds
    failing.reply = ok
    definition = _fork(charging(failing.url, {"action": "continue", "output": {}}))
    run_id = start(plane, tenant, definition, {"order": "o-12", "note": ""})

    # When the run ends / Then its verdict is plain succeeded
    detail = settle(runtime, plane, tenant, run_id)
    assert (detail.status, detail.outcome) == ("succeeded", "succeeded")


def test_a_fallback_that_needs_an_expression_is_rendered_by_the_transform_function(
    runtime, plane, tenant, failing
):
    fallback = {"action": "continue", "output": {"late": "{{ size(trigger.order) > 3 }}"}}
    run_id = start(plane, tenant, charging(failing.url, fallback), {"order": "o-9", "note": ""})
    detail = settle(runtime, plane, tenant, run_id)
    receipt = next(s for s in detail.steps if s.key == "receipt")
    assert receipt.output["charge"] == {"late": False}
    assert detail.outcome == "succeeded_with_fallbacks"


def test_a_run_without_fallbacks_succeeds_plainly(runtime, plane, tenant, remote):
    remote.reply = ok
    fallback = {"action": "continue", "output": {"id": None}}
    run_id = start(plane, tenant, charging(remote.url, fallback), {"order": "o-10", "note": ""})
    detail = settle(runtime, plane, tenant, run_id)
    assert (detail.status, detail.outcome) == ("succeeded", "succeeded")


def test_context_needs_trigger_data_it_can_merge_into(runtime, plane, tenant, failing):
    # Given a run whose trigger data is a list, parked at its failed step
    run_id = start(plane, tenant, charging(failing.url, {"action": "park"}), ["o-11"])
    parked(plane, tenant, run_id)
    # When a resume brings a context, it is refused: nothing can merge into a list
    with pytest.raises(Unprocessable) as info:
        plane.resume_run(tenant, run_id, ResumeRequest(action="retry", context={"note": "x"}))
    assert [d["rule"] for d in info.value.details] == ["context-not-mergeable"]
    # And the run still waits for a decision
    assert plane.dal.get_run(tenant, run_id).status == "parked"
    plane.cancel_run(tenant, run_id)
