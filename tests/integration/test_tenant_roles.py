"""Per-tenant roles for templated sub_workflow targets, on the control plane with IAM in moto:
the machine of a workflow with a templated target runs under its tenant's role (created once,
bounded by and holding only the tenant policy), other machines keep the shared role, and runs
still route to the tenant's children. (moto does not evaluate IAM: what the policy allows is
tested on the template, tests/deploy/test_template_tenant_roles.py.)"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from relayflow_testing import platform_runtime
from workflow_shapes import kind_dispatch

from relayflow.adapters.aws import client
from relayflow.control.errors import ServiceUnavailable
from relayflow.control.recorder import record_status_change, status_change_event
from relayflow.control.service import ControlPlane
from relayflow.control.tenant_roles import TENANT_TAG, role_name
from relayflow.local import LocalRuntime
from relayflow.settings import get_settings, override_settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with platform_runtime() as rt:
        policy = client("iam").create_policy(
            PolicyName="relayflow-local-tenant-state-machines",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "states:*", "Resource": "*"}],
                }
            ),
        )["Policy"]["Arn"]
        with override_settings(tenant_state_machine_policy_arn=policy):
            yield rt


def handler(label: str) -> dict[str, Any]:
    return {
        "id": f"{label}-handler",
        "start": "answer",
        "steps": {"answer": {"type": "transform", "mapping": {"handled_by": label}}},
    }


def role_of(runtime: LocalRuntime, plane: ControlPlane, tenant: str, workflow_id: str) -> str:
    head = plane.dal.get_workflow(tenant, workflow_id)
    described = runtime.sfn_client.describe_state_machine(stateMachineArn=head.state_machine_arn)
    return str(described["roleArn"])


def test_a_templated_target_runs_under_the_tenants_own_role(runtime, plane, tenant):
    settings = get_settings()
    iam = client("iam")
    # Given a tenant with a handler (a static machine) and a dispatcher (templated target)
    plane.put_workflow(tenant, "order-handler", handler("order"))
    plane.put_workflow(tenant, "dispatch", kind_dispatch())
    # Then the dispatcher's machine runs under the tenant's role, the handler's under the
    # shared one
    name = role_name(settings.stage, tenant)
    role = iam.get_role(RoleName=name)["Role"]
    assert role_of(runtime, plane, tenant, "dispatch") == role["Arn"]
    assert role_of(runtime, plane, tenant, "order-handler") == settings.state_machine_role_arn
    # And the role is tagged with its tenant, bounded by the tenant policy and holds only it
    assert {t["Key"]: t["Value"] for t in role["Tags"]} == {TENANT_TAG: tenant}
    boundary = role["PermissionsBoundary"]["PermissionsBoundaryArn"]
    assert boundary == settings.tenant_state_machine_policy_arn
    attached = iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]
    assert [p["PolicyArn"] for p in attached] == [settings.tenant_state_machine_policy_arn]
    assert iam.list_role_policies(RoleName=name)["PolicyNames"] == []
    trust = role["AssumeRolePolicyDocument"]
    trust = json.loads(trust) if isinstance(trust, str) else trust
    assert trust["Statement"][0]["Principal"] == {"Service": "states.amazonaws.com"}
    # When a second dispatcher is published, it reuses the role
    plane.put_workflow(tenant, "dispatch-two", kind_dispatch("dispatch-two"))
    assert role_of(runtime, plane, tenant, "dispatch-two") == role["Arn"]
    # And a run still reaches the tenant's child
    run = plane.start_run(tenant, "dispatch", {"kind": "order"})
    record = plane.dal.get_run(tenant, run.run_id)
    runtime.wait(record.execution_arn, timeout=30)
    described = runtime.sfn_client.describe_execution(executionArn=record.execution_arn)
    record_status_change(status_change_event(described), control=plane)
    detail = plane.get_run(tenant, run.run_id)
    assert detail.status == "succeeded", (detail.error, detail.cause)
    child = detail.output["steps"]["route"]["output"]
    assert child["steps"]["answer"]["output"] == {"handled_by": "order"}


def test_each_tenant_gets_its_own_role(runtime, plane, tenant):
    other = f"o-{uuid.uuid4().hex[:10]}"
    plane.put_workflow(tenant, "dispatch", kind_dispatch())
    plane.put_workflow(other, "dispatch", kind_dispatch())
    mine, theirs = (role_of(runtime, plane, t, "dispatch") for t in (tenant, other))
    assert mine != theirs
    assert mine.endswith(f"role/{role_name(get_settings().stage, tenant)}")
    assert theirs.endswith(f"role/{role_name(get_settings().stage, other)}")


def test_a_role_of_that_name_tagged_for_another_tenant_is_refused(runtime, plane, tenant):
    # Given a role under this tenant's role name that says it belongs to someone else
    client("iam").create_role(
        RoleName=role_name(get_settings().stage, tenant),
        AssumeRolePolicyDocument="{}",
        Tags=[{"Key": TENANT_TAG, "Value": "someone-else"}],
    )
    # Then publishing a templated target is refused and nothing is published
    with pytest.raises(ServiceUnavailable):
        plane.put_workflow(tenant, "dispatch", kind_dispatch())
    assert plane.dal.get_workflow(tenant, "dispatch") is None
