"""The control plane against the local runtime: moto's Step Functions (versions, the live
alias, executions) and DynamoDB, with the table built from template.yaml's schema.

One runtime serves the module; every test works in its own tenant, so tests share nothing.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from runs import settle

from relayflow.adapters.aws import client
from relayflow.control.errors import (
    BadRequest,
    Conflict,
    InvalidDefinition,
    NotFound,
    PayloadTooLarge,
    ReservedTenant,
    Unprocessable,
)
from relayflow.control.service import ControlPlane
from relayflow.local import LocalRuntime
from relayflow.settings import get_settings, override_settings

pytestmark = pytest.mark.integration


@pytest.fixture
def plane(runtime) -> ControlPlane:
    return ControlPlane()


def definition(workflow_id: str = "greet", greeting: str = "v1", delay: int = 0) -> dict:
    """A delay (``delay`` seconds, scaled by the runtime) then a native transform."""
    return {
        "id": workflow_id,
        "name": f"Greeting {greeting}",
        "start": "pause",
        "steps": {
            "pause": {"type": "delay", "seconds": delay, "on_success": "done"},
            "done": {"type": "transform", "mapping": {"greeting": greeting}},
        },
    }


def greeting(detail: Any) -> str:
    return detail.output["steps"]["done"]["output"]["greeting"]


def alias_target(runtime: LocalRuntime, tenant: str, workflow_id: str) -> str:
    head = ControlPlane().dal.get_workflow(tenant, workflow_id)
    assert head is not None and head.alias_arn
    alias = runtime.sfn_client.describe_state_machine_alias(stateMachineAliasArn=head.alias_arn)
    (route,) = alias["routingConfiguration"]
    assert route["weight"] == 100
    return str(route["stateMachineVersionArn"])


def executions_of(runtime: LocalRuntime, tenant: str, workflow_id: str) -> list[str]:
    head = ControlPlane().dal.get_workflow(tenant, workflow_id)
    assert head is not None
    return runtime.list_executions(head.state_machine_arn)


# --------------------------------------------------------------------------- workflows


def test_put_registers_a_workflow_as_version_1_behind_the_live_alias(runtime, plane, tenant):
    # When a new workflow is PUT
    result = plane.put_workflow(tenant, "greet", definition())
    # Then it is created as version 1, live, without warnings
    assert (result.created, result.version, result.live_version) == (True, 1, 1)
    assert result.warnings == []
    # And the state machine's live alias routes everything to that version
    assert alias_target(runtime, tenant, "greet").endswith(":1")
    # And the workflow reads back with its definition and its one version
    detail = plane.get_workflow(tenant, "greet")
    assert detail.definition == definition()
    assert detail.name == "Greeting v1" and detail.enabled
    assert [v.version for v in detail.versions] == [1]


def test_a_changed_definition_publishes_a_new_version_and_an_unchanged_one_does_not(
    runtime, plane, tenant
):
    plane.put_workflow(tenant, "greet", definition(greeting="v1"))
    # When a changed definition is PUT
    second = plane.put_workflow(tenant, "greet", definition(greeting="v2"))
    # Then it becomes version 2 and live
    assert (second.created, second.version, second.live_version) == (False, 2, 2)
    assert alias_target(runtime, tenant, "greet").endswith(":2")
    # When the same definition is PUT again
    again = plane.put_workflow(tenant, "greet", definition(greeting="v2"))
    # Then no version is published
    assert (again.created, again.version, again.live_version) == (False, 2, 2)
    head = plane.dal.get_workflow(tenant, "greet")
    versions = runtime.sfn_client.list_state_machine_versions(
        stateMachineArn=head.state_machine_arn
    )["stateMachineVersions"]
    assert len(versions) == 2
    assert [v.version for v in plane.get_workflow(tenant, "greet").versions] == [1, 2]


def test_rollback_makes_an_earlier_version_live_for_new_runs(runtime, plane, tenant):
    plane.put_workflow(tenant, "greet", definition(greeting="v1"))
    plane.put_workflow(tenant, "greet", definition(greeting="v2"))
    # When the workflow is rolled back to version 1
    result = plane.rollback_workflow(tenant, "greet", 1)
    # Then version 1 is live, in the table and behind the alias
    assert (result.version, result.live_version) == (1, 1)
    detail = plane.get_workflow(tenant, "greet")
    assert (detail.live_version, detail.latest_version) == (1, 2)
    assert detail.definition == definition(greeting="v1")
    assert alias_target(runtime, tenant, "greet").endswith(":1")
    # And a new run runs version 1
    run = plane.start_run(tenant, "greet", {})
    assert run.version == 1
    assert greeting(settle(runtime, plane, tenant, run.run_id)) == "v1"
    # And PUTting the latest definition again makes version 2 live without a new version
    again = plane.put_workflow(tenant, "greet", definition(greeting="v2"))
    assert (again.version, again.live_version) == (2, 2)
    assert alias_target(runtime, tenant, "greet").endswith(":2")
    # And an unknown version cannot be rolled back to
    with pytest.raises(NotFound):
        plane.rollback_workflow(tenant, "greet", 9)


def test_an_invalid_definition_is_refused_with_every_problem_and_its_path(plane, tenant):
    broken = {
        "id": "greet",
        "start": "missing",
        "steps": {"a": {"type": "delay", "seconds": -1, "bogus": 1}},
    }
    with pytest.raises(InvalidDefinition) as info:
        plane.put_workflow(tenant, "greet", broken)
    paths = {problem["path"] for problem in info.value.details}
    assert {"start", "steps.a.bogus"} <= paths
    assert info.value.status == 422 and info.value.code == "invalid_definition"
    assert all({"path", "rule", "message"} <= set(p) for p in info.value.details)
    # And nothing was stored
    with pytest.raises(NotFound):
        plane.get_workflow(tenant, "greet")


def test_a_definition_stored_under_another_id_or_too_large_is_refused(plane, tenant):
    with pytest.raises(Unprocessable) as info:
        plane.put_workflow(tenant, "other", definition("greet"))
    assert info.value.details["path"] == "id"
    huge = definition()
    huge["description"] = "x" * 400_000
    with pytest.raises(PayloadTooLarge):
        plane.put_workflow(tenant, "greet", huge)


def test_declared_triggers_are_registered_without_warnings(plane, tenant):
    # (tests/integration/test_triggers_sync.py covers what is registered)
    from relayflow.triggers.scheduler import Schedules

    Schedules(get_settings().schedule_group_name).ensure_group()  # the stack declares it
    with_cron = {**definition(), "triggers": [{"type": "cron", "cron": "0 9 * * *"}]}
    result = plane.put_workflow(tenant, "greet", with_cron)
    assert result.warnings == []


def test_list_workflows_pages_through_the_tenants_workflows(plane, tenant):
    for name in ("a", "b", "c"):
        plane.put_workflow(tenant, name, definition(name))
    first = plane.list_workflows(tenant, limit=2)
    second = plane.list_workflows(tenant, limit=2, next_token=first.next_token)
    assert [w.workflow_id for w in first.items] == ["a", "b"]
    assert [w.workflow_id for w in second.items] == ["c"] and second.next_token is None


# --------------------------------------------------------------------------- runs


def test_a_run_records_its_input_version_and_outcome(runtime, plane, tenant):
    plane.put_workflow(tenant, "greet", definition())
    run = plane.start_run(tenant, "greet", {"customer": "c-1"})
    # Then the run item exists at once, running, before any recorder saw it
    assert run.created and run.status == "running" and run.version == 1
    stored = plane.dal.get_run(tenant, run.run_id)
    assert stored.trigger_type == "api" and stored.execution_arn.endswith(f":{run.run_id}")
    detail = settle(runtime, plane, tenant, run.run_id)
    assert detail.status == "succeeded" and detail.input == {"customer": "c-1"}
    assert detail.output["run"]["tenant"] == tenant
    assert detail.duration_ms is not None and detail.ended_at is not None


def test_an_idempotency_key_starts_one_execution_however_often_it_is_repeated(
    runtime, plane, tenant
):
    plane.put_workflow(tenant, "greet", definition())
    # When the same key is used twice while the run runs, and once after it ended
    first = plane.start_run(tenant, "greet", {"n": 1}, idempotency_key="order-42")
    second = plane.start_run(tenant, "greet", {"n": 1}, idempotency_key="order-42")
    settle(runtime, plane, tenant, first.run_id)
    third = plane.start_run(tenant, "greet", {"n": 1}, idempotency_key="order-42")
    # Then each answer is the same run, only the first one created it
    assert first.run_id == second.run_id == third.run_id
    assert (first.created, second.created, third.created) == (True, False, False)
    assert third.status == "succeeded"
    # And Step Functions ran exactly one execution
    assert len(executions_of(runtime, tenant, "greet")) == 1
    # And another key is another run
    other = plane.start_run(tenant, "greet", {"n": 1}, idempotency_key="order-43")
    assert other.run_id != first.run_id and other.created


def test_a_repeat_starts_the_execution_a_failed_first_request_left_unstarted(
    runtime, plane, tenant
):
    # Given a run item written by a request that failed before its execution started
    plane.put_workflow(tenant, "greet", definition())
    real_start = plane.machines.start

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # stands in for a process dying between the two writes

    plane.machines.start = crash
    with pytest.raises(KeyboardInterrupt):
        plane.start_run(tenant, "greet", {"n": 1}, idempotency_key="k")
    plane.machines.start = real_start
    assert executions_of(runtime, tenant, "greet") == []
    # When the request is repeated
    repeat = plane.start_run(tenant, "greet", {"n": 1}, idempotency_key="k")
    # Then the run's execution runs once, with the stored input
    assert repeat.created is False
    assert len(executions_of(runtime, tenant, "greet")) == 1
    assert settle(runtime, plane, tenant, repeat.run_id).status == "succeeded"


def test_a_run_finishes_on_the_version_it_started_on(runtime, plane, tenant):
    # Given a run of version 1 waiting in its delay step
    plane.put_workflow(tenant, "greet", definition(greeting="v1", delay=1500))
    early = plane.start_run(tenant, "greet", {})
    # When version 2 is PUT while it waits
    plane.put_workflow(tenant, "greet", definition(greeting="v2", delay=0))
    late = plane.start_run(tenant, "greet", {})
    # Then the early run still finishes on version 1, and the new run runs version 2
    assert plane.get_run(tenant, early.run_id).status == "running"
    late_detail = settle(runtime, plane, tenant, late.run_id)
    early_detail = settle(runtime, plane, tenant, early.run_id)
    assert (early_detail.version, greeting(early_detail)) == (1, "v1")
    assert (late_detail.version, greeting(late_detail)) == (2, "v2")


def test_a_run_can_start_on_an_explicit_version(runtime, plane, tenant):
    plane.put_workflow(tenant, "greet", definition(greeting="v1"))
    plane.put_workflow(tenant, "greet", definition(greeting="v2"))
    run = plane.start_run(tenant, "greet", {}, version=1)
    detail = settle(runtime, plane, tenant, run.run_id)
    assert (detail.version, greeting(detail)) == (1, "v1")
    # And Step Functions ran that version
    execution_arn = plane.dal.get_run(tenant, run.run_id).execution_arn
    described = runtime.sfn_client.describe_execution(executionArn=execution_arn)
    assert described["stateMachineVersionArn"].endswith(":1")
    with pytest.raises(NotFound):
        plane.start_run(tenant, "greet", {}, version=3)


def test_a_deleted_workflow_refuses_new_runs_until_it_is_put_again(runtime, plane, tenant):
    plane.put_workflow(tenant, "greet", definition(delay=1000))
    in_flight = plane.start_run(tenant, "greet", {})
    # When the workflow is deleted
    summary = plane.delete_workflow(tenant, "greet")
    # Then it is disabled, new runs are refused, and the run in flight finishes
    assert summary.enabled is False
    with pytest.raises(Conflict, match="disabled"):
        plane.start_run(tenant, "greet", {})
    assert settle(runtime, plane, tenant, in_flight.run_id).status == "succeeded"
    assert plane.get_workflow(tenant, "greet").enabled is False
    # And a PUT enables it again (same definition: same version)
    assert plane.put_workflow(tenant, "greet", definition(delay=1000)).version == 1
    assert plane.start_run(tenant, "greet", {}).created


def test_cancel_aborts_a_running_run_and_refuses_a_finished_one(runtime, plane, tenant):
    plane.put_workflow(tenant, "greet", definition(delay=30_000))
    run = plane.start_run(tenant, "greet", {})
    # When a running run is cancelled
    cancelled = plane.cancel_run(tenant, run.run_id)
    # Then it is aborted at once, in the table and in Step Functions
    assert cancelled.status == "aborted" and cancelled.error == "Relayflow.Cancelled"
    assert plane.get_run(tenant, run.run_id).status == "aborted"
    execution = runtime.wait(plane.dal.get_run(tenant, run.run_id).execution_arn, timeout=30)
    assert execution.status == "ABORTED" and execution.error == "Relayflow.Cancelled"
    # And cancelling it again, or cancelling a finished run, is a conflict
    with pytest.raises(Conflict):
        plane.cancel_run(tenant, run.run_id)
    plane.put_workflow(tenant, "quick", definition("quick"))
    done = plane.start_run(tenant, "quick", {})
    settle(runtime, plane, tenant, done.run_id)
    with pytest.raises(Conflict):
        plane.cancel_run(tenant, done.run_id)


def test_list_runs_pages_newest_first_and_filters_by_status(runtime, plane, tenant):
    # Given five runs of a Standard machine, three of them recorded as succeeded (an Express
    # machine would record its runs' ends itself)
    plane.put_workflow(tenant, "greet", {**definition(), "engine": "standard"})
    runs = [plane.start_run(tenant, "greet", {"n": n}) for n in range(5)]
    for run in runs[:3]:
        settle(runtime, plane, tenant, run.run_id)
    # When they are listed two at a time
    pages, token = [], None
    for _ in range(5):
        page = plane.list_runs(tenant, "greet", limit=2, next_token=token)
        pages.append(page.items)
        token = page.next_token
        if token is None:
            break
    # Then three pages hold all five runs once, newest first
    assert [len(p) for p in pages] == [2, 2, 1]
    listed = [r.run_id for r in itertools.chain(*pages)]
    newest_first = sorted(runs, key=lambda r: (r.started_at, r.run_id), reverse=True)
    assert listed == [r.run_id for r in newest_first]
    # And a status filter pages through that status only
    succeeded = plane.list_runs(tenant, "greet", status="succeeded", limit=2)
    rest = plane.list_runs(
        tenant, "greet", status="succeeded", limit=2, next_token=succeeded.next_token
    )
    assert len(succeeded.items) == 2 and len(rest.items) == 1 and rest.next_token is None
    assert {r.run_id for r in [*succeeded.items, *rest.items]} == {r.run_id for r in runs[:3]}
    running = plane.list_runs(tenant, "greet", status="running")
    assert {r.run_id for r in running.items} == {r.run_id for r in runs[3:]}
    # And bad arguments are bad requests
    for kwargs in ({"status": "done"}, {"limit": 0}, {"next_token": "garbage"}):
        with pytest.raises(BadRequest):
            plane.list_runs(tenant, "greet", **kwargs)
    plane.put_workflow(tenant, "other", definition("other"))
    with pytest.raises(BadRequest):  # a token of another listing
        plane.list_runs(tenant, "other", limit=2, next_token=succeeded.next_token)


FAILING = {
    "id": "failing",
    "engine": "standard",  # its timeline is folded from the execution history
    "start": "prepare",
    "steps": {
        "prepare": {"type": "transform", "mapping": {"ok": True}, "on_success": "flaky"},
        "flaky": {
            "type": "transform",
            "mapping": "{{ int('x') }}",
            "retry": {
                "max_attempts": 3,
                "backoff": "fixed",
                "base_seconds": 1,
                "retry_on": ["Relayflow.ExpressionError"],
            },
        },
    },
}


class PagedHistory:
    """A Step Functions client whose history pages hold 5 events (to prove paging)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.pages = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def get_execution_history(self, **params: Any) -> Any:
        self.pages += 1
        return self.real.get_execution_history(**{**params, "maxResults": 5})


def test_get_run_folds_the_whole_history_into_steps_with_attempts_and_errors(
    runtime, plane, tenant
):
    # Given a run whose second step fails three attempts
    plane.put_workflow(tenant, "failing", FAILING)
    run = plane.start_run(tenant, "failing", {})
    recorded = settle(runtime, plane, tenant, run.run_id)
    assert recorded.status == "failed" and recorded.failing_step == "flaky"
    assert recorded.error == "Relayflow.ExpressionError"
    # When it is read through a client whose history pages are small
    paged = PagedHistory(client("stepfunctions"))
    detail = ControlPlane(sfn=paged).get_run(tenant, run.run_id)
    # Then every page was read and each step appears once, in order
    assert paged.pages > 2
    assert [(s.key, s.type, s.status, s.attempts) for s in detail.steps] == [
        ("prepare", "transform", "succeeded", 1),
        ("flaky", "transform", "failed", 3),
    ]
    prepare, flaky = detail.steps
    assert prepare.output == {"ok": True} and prepare.runner == "native"
    assert flaky.error == "Relayflow.ExpressionError" and flaky.runner == "transform"
    assert flaky.started_at.endswith("Z") and flaky.duration_ms >= 0


# --------------------------------------------------------------------------- tenants


def test_another_tenants_ids_behave_exactly_like_missing_ids(runtime, plane, tenant):
    # Given tenant A's workflow, run and API key
    plane.put_workflow(tenant, "greet", definition(delay=30_000))
    run = plane.start_run(tenant, "greet", {})
    key = plane.create_api_key(tenant, "ci")
    other = f"{tenant}-b"
    # Then every call of tenant B on A's ids is NotFound
    calls = [
        lambda: plane.get_workflow(other, "greet"),
        lambda: plane.delete_workflow(other, "greet"),
        lambda: plane.rollback_workflow(other, "greet", 1),
        lambda: plane.start_run(other, "greet", {}),
        lambda: plane.start_run(other, "greet", {}, idempotency_key="k"),
        lambda: plane.list_runs(other, "greet"),
        lambda: plane.get_run(other, run.run_id),
        lambda: plane.cancel_run(other, run.run_id),
        lambda: plane.revoke_api_key(key.key_id, tenant=other),
    ]
    for call in calls:
        with pytest.raises(NotFound):
            call()
    # And B's listings do not show A's things
    assert plane.list_workflows(other).items == []
    assert plane.list_api_keys(other) == []
    # And A's run was not touched
    assert plane.get_run(tenant, run.run_id).status == "running"
    plane.cancel_run(tenant, run.run_id)


def test_an_invalid_tenant_id_is_a_bad_request(plane):
    with pytest.raises(BadRequest):
        plane.list_workflows("Not A Tenant")


# --------------------------------------------------------------------------- API keys


@pytest.mark.parametrize(
    ("stage", "tenant"),
    [
        ("local", "dev"),
        ("local", "prod"),
        ("local", "platform"),
        ("local", "relayflow"),
        ("local", "relayflow-internal"),
        ("dev", "local"),
        ("prod", "dev"),
    ],
)
def test_a_tenant_cannot_be_created_with_a_reserved_id(plane, stage, tenant):
    # Given a stack of this stage, When a tenant's first API key is created with a stage's
    # or the platform's name
    with override_settings(stage=stage), pytest.raises(ReservedTenant) as raised:
        plane.create_api_key(tenant, "ci")
    # Then it is refused with 422 reserved_tenant, naming the id, and no key exists
    assert raised.value.status == 422 and raised.value.code == "reserved_tenant"
    assert raised.value.details["tenant"] == tenant and tenant in raised.value.details["reserved"]
    assert f"tenant id {tenant!r} is reserved" in raised.value.message
    assert plane.list_api_keys(tenant) == []


def test_the_local_runtime_keeps_its_own_tenant_and_others_are_not_reserved(plane):
    with override_settings(stage="local"):
        assert plane.create_api_key("local", "ci").tenant == "local"
    with override_settings(stage="dev"):
        for tenant in ("acme", "develop", "prod-eu", "platforms"):
            assert plane.create_api_key(tenant, "ci").tenant == tenant


def test_api_keys_authenticate_until_revoked_and_only_their_hash_is_stored(runtime, plane, tenant):
    # When a key is created
    key = plane.create_api_key(tenant, "deploy bot")
    # Then its secret authenticates as the tenant, and the table never holds the secret
    assert key.secret.startswith(f"rf_{key.key_id}_")
    assert plane.authenticate(key.secret) == tenant
    dump = str(runtime.dynamodb_client.scan(TableName=get_settings().table_name)["Items"])
    assert key.secret not in dump
    assert [k.key_id for k in plane.list_api_keys(tenant)] == [key.key_id]
    # And wrong or malformed secrets do not
    for wrong in (key.secret + "x", key.secret[:-1], "", "Bearer " + key.secret, "x" * 5000):
        assert plane.authenticate(wrong) is None
    # When it is revoked
    revoked = plane.revoke_api_key(key.key_id)
    # Then it stops authenticating and is listed as revoked
    assert revoked.revoked_at is not None
    assert plane.authenticate(key.secret) is None
    assert plane.list_api_keys(tenant)[0].revoked_at == revoked.revoked_at
    with pytest.raises(NotFound):
        plane.revoke_api_key("key_000000000000")


def test_runs_started_in_parallel_with_one_key_converge_on_one_execution(runtime, plane, tenant):
    from concurrent.futures import ThreadPoolExecutor

    plane.put_workflow(tenant, "greet", definition(delay=500))
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(
                lambda _: plane.start_run(tenant, "greet", {}, idempotency_key="same"), range(4)
            )
        )
    assert len({r.run_id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    time.sleep(0.05)
    assert len(executions_of(runtime, tenant, "greet")) == 1


def test_an_aws_failure_is_a_503_that_names_no_infrastructure():
    # Given a data layer whose table is gone
    from relayflow.control.errors import ServiceUnavailable
    from relayflow.control.service import ControlPlane
    from relayflow.dal.errors import DataAccessError

    class BrokenDal:
        def __getattr__(self, name):
            def fail(*args, **kwargs):
                raise DataAccessError(
                    "get_item: ResourceNotFoundException: arn:aws:dynamodb:us-east-1:1:table/x"
                )

            return fail

    control = ControlPlane(dal=BrokenDal(), sfn=object())
    # When a request reaches it / Then the caller learns it may retry, and nothing more
    with pytest.raises(ServiceUnavailable) as info:
        control.get_workflow("acme", "orders")
    assert info.value.status == 503
    assert "arn:" not in info.value.message and "dynamodb" not in info.value.message.lower()
