"""``@recorded_step``: what identifies a step execution, and how a recorded handler acts once
per identity (DynamoDB answered in-process by moto; no network)."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from relayflow_testing import moto_table

from relayflow.adapters.aws import client, reset_clients
from relayflow.dal.keys import step_results_partition
from relayflow.document import StepRef
from relayflow.errors import HttpError, TransientError
from relayflow.observability import step_handler
from relayflow.settings import get_settings, override_settings
from relayflow.steps.guard import flow_controlled
from relayflow.steps.idempotency import StepIdentity, recorded_step, step_identity

CONTEXT = SimpleNamespace(
    function_name="relayflow-dev-tool", get_remaining_time_in_millis=lambda: 20_000
)


def task(**doc: Any) -> dict[str, Any]:
    run = {"id": "run-9", "workflow_id": "orders", "tenant": "acme", "dry_run": False}
    run.update(doc.pop("run", {}))
    return {
        "step": StepRef(key="charge", type="tool", config={"tool": "http.billing.charge"}).wire(),
        "doc": {"run": run, "trigger": {"amount": 5}, "steps": {}, **doc},
        "context": {"execution_id": "arn:aws:states:::execution:sm:run-9", "attempt": 0},
    }


# --------------------------------------------------------------------------- the identity


def test_the_identity_is_tenant_run_step_item_and_pass():
    event = task(index=3, counters={"steps": 4})
    assert step_identity(event) == StepIdentity("acme", "run-9", "charge", 3, 4)
    assert step_identity(task()) == StepIdentity("acme", "run-9", "charge", None, None)


def test_the_execution_and_the_attempt_are_not_part_of_the_identity():
    # Given the same step of the same run, in a restarted execution and on its third attempt
    first = task()
    restarted = copy.deepcopy(first)
    restarted["context"] = {"execution_id": "arn:aws:states:::execution:sm:run-9_r2", "attempt": 2}
    # Then both are one step execution
    assert step_identity(restarted) == step_identity(first)


@pytest.mark.parametrize(
    "event",
    [
        None,
        [],
        {"step": {"key": "a"}},
        {"step": {"key": "a"}, "doc": {"trigger": {}}},
        {"step": {}, "doc": {"run": {"id": "r"}}},
    ],
)
def test_a_payload_without_run_or_step_has_no_identity(event):
    assert step_identity(event) is None


def test_the_partition_is_the_tenants():
    assert StepIdentity("acme", "run-9", "charge").partition == "TENANT#acme#STEP#run-9"
    assert step_results_partition("acme", "run-9") == "TENANT#acme#STEP#run-9"


# --------------------------------------------------------------------------- recording


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto, fake credentials, and the Relayflow table."""
    with moto_table(monkeypatch):
        yield


class Effect:
    """A side-effecting step: counts its actions and answers with the action's number."""

    def __init__(self, fail_first: int = 0) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail_first = fail_first

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.calls.append(event)
        if len(self.calls) <= self.fail_first:
            raise HttpError("upstream said no", status=500)
        return {"output": {"charge": len(self.calls), "at": time.time()}, "branch": None}


def recorded(effect: Any) -> Any:
    """The decorator stack of a side-effecting step function."""
    return step_handler(recorded_step(flow_controlled(effect)))


def step_items() -> list[dict[str, Any]]:
    from relayflow.dal.codec import deserialize

    raw = client("dynamodb").scan(TableName=get_settings().table_name)["Items"]
    return [deserialize(i) for i in raw if "#STEP#" in i["pk"]["S"]]


def test_a_duplicate_invocation_acts_once_and_returns_the_recorded_result(aws):
    # Given a recorded step
    effect = Effect()
    handler = recorded(effect)
    # When the same Task payload is invoked twice
    first = handler(task(), CONTEXT)
    second = handler(task(), CONTEXT)
    # Then it acted once, and the second invocation returned the first one's result
    assert len(effect.calls) == 1
    assert second == first
    # And the result is stored in the tenant's partition of the run, completed, for 30 days
    (item,) = step_items()
    assert item["pk"] == "TENANT#acme#STEP#run-9"
    assert item["sk"].startswith("charge#")
    assert item["status"] == "COMPLETED"
    assert abs(item["expires_at"] - (time.time() + 30 * 86_400)) < 60


def test_a_restarted_execution_of_the_same_run_replays_the_result(aws):
    effect = Effect()
    handler = recorded(effect)
    first = handler(task(), CONTEXT)
    restarted = task()
    restarted["context"] = {"execution_id": "arn:aws:states:::execution:sm:run-9_r2", "attempt": 0}
    assert handler(restarted, CONTEXT) == first
    assert len(effect.calls) == 1


def test_a_failure_is_not_recorded_so_the_retry_acts_again(aws):
    # Given a step whose first action fails
    effect = Effect(fail_first=1)
    handler = recorded(effect)
    # When it is invoked, fails with its own named error, and is invoked again
    with pytest.raises(HttpError):
        handler(task(), CONTEXT)
    assert step_items() == []
    result = handler(task(), CONTEXT)
    # Then the second invocation acted and its result is the recorded one
    assert len(effect.calls) == 2
    assert result["output"]["charge"] == 2
    assert handler(task(), CONTEXT) == result
    assert len(effect.calls) == 2


@pytest.mark.parametrize(
    ("base", "other"),
    [
        (task(index=0), task(index=1)),
        (task(counters={"steps": 0}), task(counters={"steps": 3})),
        (task(), task(run={"id": "run-10"})),
        (task(), task(run={"tenant": "globex"})),
    ],
    ids=["another item", "another pass", "another run", "another tenant, same run id"],
)
def test_another_item_pass_run_or_tenant_acts_separately(aws, base, other):
    # Given a step recorded for one identity
    effect = Effect()
    handler = recorded(effect)
    first = handler(base, CONTEXT)
    # When a payload that differs in one part of the identity is invoked
    second = handler(other, CONTEXT)
    # Then it acted again, and each result is replayed on its own afterwards
    assert len(effect.calls) == 2
    assert second != first
    assert handler(base, CONTEXT) == first
    assert handler(other, CONTEXT) == second
    assert len(effect.calls) == 2


def test_the_same_run_id_of_two_tenants_lands_in_two_partitions(aws):
    handler = recorded(Effect())
    handler(task(), CONTEXT)
    handler(task(run={"tenant": "globex"}), CONTEXT)
    assert sorted(i["pk"] for i in step_items()) == [
        "TENANT#acme#STEP#run-9",
        "TENANT#globex#STEP#run-9",
    ]


def test_a_duplicate_that_finds_the_step_in_progress_is_transient(aws):
    # Given a step whose action is invoked again while it is still running
    inner: list[BaseException] = []

    def effect(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if not inner:
            try:
                handler(event, context)
            except TransientError as exc:
                inner.append(exc)
        return {"output": "done", "branch": None}

    handler = recorded(effect)
    # When the first invocation finishes
    assert handler(task(), CONTEXT) == {"output": "done", "branch": None}
    # Then the duplicate failed with the retried Relayflow.Transient, and did not act
    (error,) = inner
    assert type(error).__name__ == "Relayflow.Transient"
    assert "already running" in str(error)


def test_the_in_progress_record_of_a_dead_invocation_expires_with_its_deadline(aws):
    # Given an invocation that died mid-step (no time left, no chance to clean up)
    class Killed(BaseException):
        pass

    def dies(event: dict[str, Any], context: Any) -> Any:
        raise Killed

    dying = SimpleNamespace(get_remaining_time_in_millis=lambda: 0)
    with pytest.raises(Killed):
        recorded(dies)(task(), dying)
    (left,) = step_items()
    assert left["status"] == "INPROGRESS"
    time.sleep(0.01)
    # When the step is invoked again
    effect = Effect()
    result = recorded(effect)(task(), CONTEXT)
    # Then it acts
    assert len(effect.calls) == 1
    assert result["output"]["charge"] == 1


def test_a_table_that_cannot_be_reached_is_transient_and_the_step_does_not_act(aws):
    effect = Effect()
    with override_settings(table_name="no-such-table"), pytest.raises(TransientError):
        recorded(effect)(task(), CONTEXT)
    assert effect.calls == []


def test_the_ttl_setting_sets_the_expiry(aws):
    with override_settings(step_result_ttl_days=2):
        recorded(Effect())(task(), CONTEXT)
    (item,) = step_items()
    assert abs(item["expires_at"] - (time.time() + 2 * 86_400)) < 60


def test_no_aws_configuration_is_transient_and_the_step_does_not_act(monkeypatch):
    # Given a process with no region (a step function must never act unrecorded)
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    reset_clients()
    effect = Effect()
    # When the step is invoked
    with pytest.raises(TransientError):
        recorded(effect)(task(), CONTEXT)
    # Then it failed with a named error, before acting
    assert effect.calls == []
    reset_clients()


def test_a_run_id_that_cannot_be_a_key_part_is_invalid_args_and_the_step_does_not_act(aws):
    from relayflow.errors import InvalidArgsError

    effect = Effect()
    with pytest.raises(InvalidArgsError):
        recorded(effect)(task(run={"id": "run#9"}), CONTEXT)
    assert effect.calls == []


def attempt(number: int) -> dict[str, Any]:
    event = task()
    event["context"]["attempt"] = number
    return event


def test_a_later_attempt_retakes_a_completed_step_but_replays_a_completed_part(aws):
    # Given a step's result and a part of a step (an agent's tool call), both completed by
    # attempt 0 of the execution
    from relayflow.steps.idempotency import run_recorded

    effect = Effect()
    whole = StepIdentity("acme", "run-9", "charge")
    part = StepIdentity("acme", "run-9", "charge#turn1.call.c1")
    run_recorded(whole, effect, attempt(0), CONTEXT)
    first_part = run_recorded(part, effect, attempt(0), CONTEXT, part=True)
    assert len(effect.calls) == 2
    # When attempt 1 of the same execution runs both again
    retried = run_recorded(whole, effect, attempt(1), CONTEXT)
    replayed = run_recorded(part, effect, attempt(1), CONTEXT, part=True)
    # Then the step acted again (its result never reached Step Functions) and is the step's,
    # while the part was replayed: its result was already used, its side effect not repeated
    assert len(effect.calls) == 3
    assert retried["output"]["charge"] == 3
    assert replayed == first_part
    assert run_recorded(part, effect, attempt(0), CONTEXT, part=True) == first_part


def test_a_later_attempt_takes_over_a_part_left_in_progress(aws):
    # Given a part whose attempt-0 invocation is still in progress (abandoned: timed out)
    from relayflow.steps.idempotency import run_recorded

    part = StepIdentity("acme", "run-9", "charge#turn1.call.c1")
    effect = Effect()
    taken: list[Any] = []

    def abandoned(event: dict[str, Any], context: Any) -> dict[str, Any]:
        # When attempt 1 runs the part meanwhile (another invocation: another thread)
        retry = threading.Thread(
            target=lambda: taken.append(run_recorded(part, effect, attempt(1), CONTEXT, part=True))
        )
        retry.start()
        retry.join()
        return {"output": "late", "branch": None}

    late = run_recorded(part, abandoned, attempt(0), CONTEXT, part=True)
    # Then attempt 1 acted at once, and the abandoned call's late result was not recorded
    assert len(effect.calls) == 1 and taken[0]["output"]["charge"] == 1
    assert late == {"output": "late", "branch": None}
    assert run_recorded(part, effect, attempt(2), CONTEXT, part=True) == taken[0]
