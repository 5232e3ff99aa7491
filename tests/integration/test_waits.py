"""Approval and waitpoint steps on the local runtime: the compiled callback Tasks, the step
functions storing requests, and WaitService resuming the runs (SendTaskSuccess/Failure).

Each test starts a real execution, waits for the request the step stored, answers it through
the service and asserts the run's status, the step outputs and the stored item."""

from __future__ import annotations

from typing import Any

import pytest
from relayflow_testing import eventually, recorded_outputs

from relayflow.compiler import compile_workflow
from relayflow.control.errors import NotFound, Unprocessable
from relayflow.control.waits import (
    ApprovalDecided,
    ApprovalExpired,
    WaitpointCompleted,
    WaitpointExpired,
    WaitService,
)
from relayflow.dal.waits import WaitDal
from relayflow.document import execution_input
from relayflow.local import LocalRuntime
from relayflow.local.runtime import ExecutionRecord
from relayflow.validation import load_workflow_text

pytestmark = pytest.mark.integration
BARE_RUNTIME = True
TENANT = "acme"


@pytest.fixture
def waits(runtime: LocalRuntime) -> WaitService:
    return WaitService()


class Run:
    def __init__(self, runtime: LocalRuntime, definition: str, trigger: Any = None) -> None:
        workflow = load_workflow_text(definition, "test.yaml")
        document = execution_input(workflow.id, trigger or {}, tenant=TENANT)
        self.run_id = document["run"]["id"]
        self.runtime = runtime
        arn = runtime.create_state_machine(
            f"relayflow-{workflow.id}", compile_workflow(workflow).asl
        )
        self.execution = runtime.start_execution(arn, document, name=self.run_id)

    def wait(self) -> ExecutionRecord:
        return self.runtime.wait(self.execution, timeout=30)

    def steps(self) -> dict[str, Any]:
        record = self.wait()
        assert record.status == "SUCCEEDED", record
        return recorded_outputs(record)


def approval_of(waits: WaitService, run: Run) -> Any:
    return eventually(
        lambda: next(
            (a for a in waits.list_approvals(TENANT, status=None).items if a.run_id == run.run_id),
            None,
        )
    )


def waitpoint_of(waits: WaitService, run: Run) -> Any:
    return eventually(lambda: next(iter(waits.list_waitpoints(TENANT, run_id=run.run_id)), None))


# --------------------------------------------------------------------------- approvals

REFUND = """
id: refund
start: ask
steps:
  ask:
    type: approval
    title: "Refund {{ trigger.order }}"
    description: "Amount: {{ trigger.amount }} EUR"
    prompt: Pay it back?
    assigned_role: finance
    on_approve: pay
    on_reject: refuse
  pay: {type: transform, mapping: {paid: "{{ steps.ask.output.responder }}"}}
  refuse: {type: noop}
"""


@pytest.mark.parametrize(("option", "taken"), [("approve", "pay"), ("reject", "refuse")])
def test_a_decision_resumes_the_run_on_its_route(runtime, waits, option, taken):
    # Given a run waiting on a refund approval
    run = Run(runtime, REFUND, {"order": "o-17", "amount": 40})
    pending = approval_of(waits, run)
    # Then the request was rendered from the state document and waits for the tenant
    assert (pending.title, pending.description) == ("Refund o-17", "Amount: 40 EUR")
    assert (pending.status, pending.options, pending.assigned_role) == (
        "pending",
        ["approve", "reject"],
        "finance",
    )
    assert pending.approval_id in [a.approval_id for a in waits.list_approvals(TENANT).items]
    assert "task_token" not in pending.model_dump()
    # When alice decides
    decided = waits.respond(TENANT, pending.approval_id, option, responder="alice")
    # Then the run resumes on the decision's route with the decision as the step output
    assert decided.status == "decided"
    assert run.wait().status == "SUCCEEDED"
    steps = run.steps()
    assert steps["ask"]["option"] == option
    assert steps["ask"]["approved"] is (option == "approve")
    assert (steps["ask"]["responder"], steps["ask"]["timed_out"]) == ("alice", False)
    assert taken in steps and ({"pay", "refuse"} - {taken}).isdisjoint(steps)
    # And the stored item holds the decision and is no longer listed as pending
    item = WaitDal().get_approval(TENANT, pending.approval_id)
    assert item is not None and item.status == "decided"
    assert item.decision["option"] == option and item.decision["responder"] == "alice"
    assert pending.approval_id not in [a.approval_id for a in waits.list_approvals(TENANT).items]


def test_a_second_response_is_refused_as_already_decided(runtime, waits):
    run = Run(runtime, REFUND, {"order": "o-1", "amount": 1})
    pending = approval_of(waits, run)
    waits.respond(TENANT, pending.approval_id, "approve", responder="alice")
    # When bob answers too
    with pytest.raises(ApprovalDecided) as refused:
        waits.respond(TENANT, pending.approval_id, "reject", responder="bob")
    # Then he learns it was decided, by whom, and the run kept alice's decision
    assert refused.value.status == 409 and refused.value.code == "approval_decided"
    assert "already decided" in refused.value.message and "alice" in refused.value.message
    assert run.steps()["ask"]["option"] == "approve"


def test_another_tenants_approval_is_not_found(runtime, waits):
    run = Run(runtime, REFUND, {"order": "o-2", "amount": 2})
    pending = approval_of(waits, run)
    with pytest.raises(NotFound):
        waits.get_approval("other", pending.approval_id)
    with pytest.raises(NotFound):
        waits.respond("other", pending.approval_id, "approve", responder="mallory")
    assert waits.list_approvals("other").items == []
    # And the approval still waits for its own tenant
    assert waits.get_approval(TENANT, pending.approval_id).status == "pending"
    waits.respond(TENANT, pending.approval_id, "reject", responder="alice")
    assert run.wait().status == "SUCCEEDED"


FORM = """
id: shipping
start: ask
steps:
  ask:
    type: approval
    title: Ship the order?
    options: [ship, hold, cancel]
    form_schema:
      type: object
      required: [carrier]
      properties:
        carrier: {type: string, enum: [dhl, ups]}
        note: {type: string}
      additionalProperties: false
    branches: {ship: ship, hold: hold, cancel: cancel}
  ship: {type: transform, mapping: {carrier: "{{ steps.ask.output.data.carrier }}"}}
  hold: {type: noop}
  cancel: {type: noop}
"""


def test_a_form_response_is_checked_against_the_schema_and_routes_by_option(runtime, waits):
    run = Run(runtime, FORM)
    pending = approval_of(waits, run)
    assert pending.form_schema["required"] == ["carrier"]
    # When the data breaks the form schema, or the option is not offered
    with pytest.raises(Unprocessable) as bad_data:
        waits.respond(TENANT, pending.approval_id, "ship", {"carrier": "fedex"}, responder="a")
    with pytest.raises(Unprocessable):
        waits.respond(TENANT, pending.approval_id, "approve", {"carrier": "dhl"}, responder="a")
    # Then nothing was decided
    assert "carrier" in bad_data.value.details[0]["path"]
    assert waits.get_approval(TENANT, pending.approval_id).status == "pending"
    # When valid data comes with a declared option
    waits.respond(TENANT, pending.approval_id, "ship", {"carrier": "ups"}, responder="ops")
    # Then the run takes that option's branch with the form data
    steps = run.steps()
    assert steps["ask"]["data"] == {"carrier": "ups"}
    assert steps["ask"]["approved"] is True  # no 'approve' option: the first one approves
    assert steps["ship"] == {"carrier": "ups"}
    assert "hold" not in steps and "cancel" not in steps


EXPIRING = """
id: expiring
start: ask
steps:
  ask:
    type: approval
    title: Quick decision
    timeout_seconds: 1
    timeout_action: {action}
{routes}
  yes: {{type: noop}}
  no: {{type: noop}}
  late: {{type: noop}}
"""
ROUTES = {
    "fail": "    on_approve: yes\n    on_reject: no\n    on_failure: late",
    "approve": "    on_approve: yes\n    on_reject: no\n    on_failure: late",
    "reject": "    on_approve: yes\n    on_reject: no\n    on_failure: late",
    "route": "    on_approve: yes\n    on_reject: no\n    on_timeout: late",
}


@pytest.mark.parametrize(
    ("action", "taken"), [("fail", "late"), ("approve", "yes"), ("reject", "no"), ("route", "late")]
)
def test_expiry_takes_the_timeout_action(runtime, waits, action, taken):
    # Given an approval that expires after a second
    run = Run(runtime, EXPIRING.format(action=action, routes=ROUTES[action]))
    pending = approval_of(waits, run)
    record = run.wait()
    # Then the run went where the timeout action says
    assert record.status == "SUCCEEDED"
    steps = run.steps()
    assert taken in steps and ({"yes", "no", "late"} - {taken}).isdisjoint(steps)
    if action in ("approve", "reject"):
        assert steps["ask"] == {
            "approved": action == "approve",
            "option": action,
            "data": None,
            "responder": None,
            "responded_at": None,
            "timed_out": True,
        }
    else:
        assert record.output["error"]["Error"] == "States.Timeout"
    # And a late response is refused as expired, and the item says so
    with pytest.raises(ApprovalExpired) as late:
        waits.respond(TENANT, pending.approval_id, "approve", responder="slowpoke")
    assert late.value.code == "approval_expired"
    assert WaitDal().get_approval(TENANT, pending.approval_id).status == "expired"


def test_expiry_without_a_failure_route_fails_the_run_with_states_timeout(runtime, waits):
    run = Run(
        runtime,
        "id: strict\nstart: ask\nsteps:\n  ask: {type: approval, title: t, timeout_seconds: 1}\n",
    )
    approval_of(waits, run)
    record = run.wait()
    assert (record.status, record.error) == ("FAILED", "States.Timeout")


# --------------------------------------------------------------------------- waitpoints

CALLBACK = """
id: callback
start: wait
steps:
  wait:
    type: waitpoint
    label: "partner signs {{ trigger.contract }}"
    timeout_seconds: {timeout}
    on_success: done
    on_failure: broken
    on_timeout: late
  done: {{type: transform, mapping: {{signed_by: "{{{{ steps.wait.output.by }}}}"}}}}
  broken: {{type: transform, mapping: {{why: "{{{{ error.Cause }}}}"}}}}
  late: {{type: noop}}
"""


def test_completing_a_waitpoint_resumes_the_run_with_its_data(runtime, waits):
    run = Run(runtime, CALLBACK.format(timeout=60), {"contract": "c-9"})
    waitpoint = waitpoint_of(waits, run)
    assert (waitpoint.status, waitpoint.step) == ("pending", "wait")
    done = waits.complete_waitpoint(TENANT, waitpoint.waitpoint_id, {"by": "partner-co"})
    assert done.status == "completed"
    steps = run.steps()
    assert steps["wait"] == {"by": "partner-co"}
    assert steps["done"] == {"signed_by": "partner-co"}
    item = WaitDal().get_waitpoint(TENANT, waitpoint.waitpoint_id)
    assert item is not None and (item.status, item.result) == ("completed", {"by": "partner-co"})
    # And a second completion is refused
    with pytest.raises(WaitpointCompleted) as twice:
        waits.complete_waitpoint(TENANT, waitpoint.waitpoint_id, {"by": "someone else"})
    assert twice.value.code == "waitpoint_completed" and twice.value.status == 409
    with pytest.raises(WaitpointCompleted):
        waits.fail_waitpoint(TENANT, waitpoint.waitpoint_id, "too late")


def test_failing_a_waitpoint_takes_the_failure_route_with_the_message(runtime, waits):
    run = Run(runtime, CALLBACK.format(timeout=60), {"contract": "c-10"})
    waitpoint = waitpoint_of(waits, run)
    waits.fail_waitpoint(TENANT, waitpoint.waitpoint_id, "partner refused", error="REFUSED")
    record = run.wait()
    assert record.status == "SUCCEEDED"
    assert record.output["error"]["Error"] == "Relayflow.WaitpointFailed"
    assert run.steps()["broken"] == {"why": "REFUSED: partner refused"}
    assert WaitDal().get_waitpoint(TENANT, waitpoint.waitpoint_id).status == "failed"


def test_an_expired_waitpoint_takes_on_timeout_and_refuses_completion(runtime, waits):
    run = Run(runtime, CALLBACK.format(timeout=1), {"contract": "c-11"})
    waitpoint = waitpoint_of(waits, run)
    steps = run.steps()
    assert "late" in steps and "done" not in steps
    with pytest.raises(WaitpointExpired) as late:
        waits.complete_waitpoint(TENANT, waitpoint.waitpoint_id, {})
    assert late.value.code == "waitpoint_expired"


def test_another_tenants_waitpoint_is_not_found(runtime, waits):
    run = Run(runtime, CALLBACK.format(timeout=60), {"contract": "c-12"})
    waitpoint = waitpoint_of(waits, run)
    with pytest.raises(NotFound):
        waits.complete_waitpoint("other", waitpoint.waitpoint_id, {})
    assert waits.list_waitpoints("other", run_id=run.run_id) == []
    waits.complete_waitpoint(TENANT, waitpoint.waitpoint_id, {"by": "x"})
    assert run.wait().status == "SUCCEEDED"


KEYED = """
id: keyed
start: wait
steps:
  wait:
    type: waitpoint
    idempotency_key: "contract-{{ trigger.contract }}"
    timeout_seconds: 30
"""


def test_an_idempotency_key_reuses_the_waitpoint_and_resumes_the_newest_run(runtime, waits):
    # Given a run waiting on a keyed waitpoint, and a second run with the same key
    first = Run(runtime, KEYED, {"contract": "k-1"})
    original = waitpoint_of(waits, first)
    second = Run(runtime, KEYED, {"contract": "k-1"})
    # Then both share one waitpoint id, now pointing at the second run
    rearmed = eventually(
        lambda: next(iter(waits.list_waitpoints(TENANT, run_id=second.run_id)), None)
    )
    assert rearmed.waitpoint_id == original.waitpoint_id
    (found,) = waits.list_waitpoints(TENANT, idempotency_key="contract-k-1")
    assert found.run_id == second.run_id
    # When it is completed, the second run resumes with the data
    waits.complete_waitpoint(TENANT, original.waitpoint_id, {"ok": True})
    assert second.steps()["wait"] == {"ok": True}
    # And a third run with the key resumes at once with the recorded outcome
    third = Run(runtime, KEYED, {"contract": "k-1"})
    assert third.steps()["wait"] == {"ok": True}
    runtime.stop_execution(first.execution)
