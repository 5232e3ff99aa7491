"""What the wait service does when sending a claimed answer fails: a token Step Functions no
longer waits on expires the approval or waitpoint (409 ``*_expired``); any other failure
hands the claim back, so the same answer can be sent again. DynamoDB answered in-process by
moto; Step Functions faked."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from relayflow_testing import moto_table

from relayflow.control.errors import TooManyRequests
from relayflow.control.waits import ApprovalExpired, WaitpointExpired, WaitService
from relayflow.dal.waits import ApprovalItem, WaitDal, WaitpointItem

TENANT = "acme"
APPROVAL = "a" * 32
WAITPOINT = "b" * 32


class FailingStepFunctions:
    """Every SendTask* call fails with ``code``."""

    def __init__(self, code: str) -> None:
        self.code = code

    def _fail(self, **params: Any) -> dict[str, Any]:
        raise ClientError({"Error": {"Code": self.code, "Message": "no"}}, "SendTask")

    send_task_success = send_task_failure = _fail


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> Iterator[WaitDal]:
    with moto_table(monkeypatch):
        store = WaitDal()
        common = {"tenant": TENANT, "workflow_id": "orders", "run_id": "run-1", "step": "ask"}
        created = {"created_at": "2026-01-01T00:00:00.000Z", "task_token": "token-1"}
        expiry = int(time.time()) + 3600
        store.put_approval(
            ApprovalItem(
                approval_id=APPROVAL,
                title="Ship?",
                options=["approve", "reject"],
                expires_at=expiry,
                **common,
                **created,
            )
        )
        store.put_waitpoint(
            WaitpointItem(waitpoint_id=WAITPOINT, expires_at=expiry, **common, **created)
        )
        yield store


def test_a_gone_token_expires_the_approval(waits):
    service = WaitService(sfn=FailingStepFunctions("TaskTimedOut"))
    with pytest.raises(ApprovalExpired, match="no longer waits"):
        service.respond(TENANT, APPROVAL, "approve", responder="ann")
    assert waits.get_approval(TENANT, APPROVAL).status == "expired"


def test_a_gone_token_expires_the_waitpoint(waits):
    service = WaitService(sfn=FailingStepFunctions("InvalidToken"))
    with pytest.raises(WaitpointExpired, match="no longer waits"):
        service.complete_waitpoint(TENANT, WAITPOINT, {"ok": True})
    assert waits.get_waitpoint(TENANT, WAITPOINT).status == "expired"


def test_a_throttled_send_hands_the_claims_back(waits):
    service = WaitService(sfn=FailingStepFunctions("ThrottlingException"))
    with pytest.raises(TooManyRequests):
        service.respond(TENANT, APPROVAL, "approve", responder="ann")
    with pytest.raises(TooManyRequests):
        service.fail_waitpoint(TENANT, WAITPOINT, "broke")
    assert waits.get_approval(TENANT, APPROVAL).status == "pending"
    assert waits.get_waitpoint(TENANT, WAITPOINT).status == "pending"
