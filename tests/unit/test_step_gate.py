"""The step-through gate releases itself when ``to_end`` was set while it was stored: it
completes its own waitpoint as ``continue`` would, without the control plane (a step
function never reaches it). DynamoDB answered in-process by moto; Step Functions faked."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from relayflow_testing import moto_table

from relayflow.dal.waits import WaitDal
from relayflow.document import StepRef
from relayflow.steps import step_gate


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with moto_table(monkeypatch):
        yield


class FakeStepFunctions:
    """Answers ``send_task_success`` (recording it), or fails with ``code``."""

    def __init__(self, code: str | None = None) -> None:
        self.code = code
        self.sent: list[dict[str, Any]] = []

    def send_task_success(self, **params: Any) -> dict[str, Any]:
        if self.code is not None:
            raise ClientError({"Error": {"Code": self.code, "Message": "no"}}, "SendTaskSuccess")
        self.sent.append(params)
        return {}


def gate_event() -> dict[str, Any]:
    run = {"id": "run-9", "workflow_id": "orders", "tenant": "acme"}
    return {
        "step": StepRef(key="charge", type="step_gate", config={}).wire(),
        "doc": {"run": run, "trigger": {}, "steps": {}},
        "context": {"execution_id": "arn:aws:states:::execution:sm:run-9", "attempt": 0},
        "task_token": "token-1",
    }


def stored_while_to_end_was_set(
    monkeypatch: pytest.MonkeyPatch, sfn: FakeStepFunctions
) -> dict[str, Any]:
    """Run the gate: the run pauses at the first look and runs to its end at the second."""
    import relayflow.adapters.aws as aws_module

    looks = iter([False, True])
    monkeypatch.setattr(step_gate, "_runs_to_end", lambda tenant, run_id: next(looks))
    real_client = aws_module.client
    monkeypatch.setattr(
        aws_module,
        "client",
        lambda name, *a, **k: sfn if name == "stepfunctions" else real_client(name, *a, **k),
    )
    return step_gate.run(gate_event())


def test_a_gate_stored_as_to_end_was_set_completes_itself(aws, monkeypatch):
    sfn = FakeStepFunctions()
    output = stored_while_to_end_was_set(monkeypatch, sfn)
    gate = output["output"]["waitpoint_id"]
    item = WaitDal().get_waitpoint("acme", gate)
    assert item is not None and item.status == "completed" and item.result is None
    assert sfn.sent == [{"taskToken": "token-1", "output": '{"data":null}'}]


def test_a_token_no_longer_waited_on_expires_the_gate(aws, monkeypatch):
    output = stored_while_to_end_was_set(monkeypatch, FakeStepFunctions("TaskTimedOut"))
    gate = output["output"]["waitpoint_id"]
    assert WaitDal().get_waitpoint("acme", gate).status == "expired"


def test_another_failure_hands_the_claim_back(aws, monkeypatch):
    output = stored_while_to_end_was_set(monkeypatch, FakeStepFunctions("ThrottlingException"))
    gate = output["output"]["waitpoint_id"]
    assert WaitDal().get_waitpoint("acme", gate).status == "pending"
