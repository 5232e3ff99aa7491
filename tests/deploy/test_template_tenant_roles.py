"""template.yaml for per-tenant state machine roles (templated sub_workflow targets): the one
policy every tenant role holds lets it start only its own tenant's machines, it matches the
shared role in everything else, and the API can create no role that does more."""

from __future__ import annotations

import fnmatch
import json

import pytest
from sam_template import EXECUTIONS, MACHINES, allows, role_statements
from stack import DEV, FUNCTIONS, RESOURCES, TEMPLATE

TAG = "${aws:PrincipalTag/relayflow-tenant}"


def tenant_policy(tenant: str) -> list[dict]:
    """TenantStateMachinePolicy as IAM evaluates it for a role tagged relayflow-tenant=<tenant>
    (the policy variable replaced by the tag's value)."""
    document = DEV.resolve(RESOURCES["TenantStateMachinePolicy"]["Properties"]["PolicyDocument"])
    return json.loads(json.dumps(document["Statement"]).replace(TAG, tenant))


@pytest.mark.parametrize(
    ("target", "allowed"),
    [
        ("relayflow-dev-acme_order-handler", True),
        ("relayflow-dev-acme_order-handler:live", True),
        ("relayflow-dev-other_order-handler", False),
        ("relayflow-dev-other_order-handler:live", False),
        # A tenant whose id starts like acme's is another tenant: "_" ends the tenant.
        ("relayflow-dev-acme-corp_order-handler", False),
        ("relayflow-prod-acme_order-handler", False),
    ],
)
def test_a_tenant_role_starts_only_its_own_tenants_machines(target, allowed):
    statements = tenant_policy("acme")
    assert allows(statements, "states:StartExecution", MACHINES + target) is allowed
    # And it may watch and stop only its own tenant's children
    execution = EXECUTIONS + target.split(":")[0] + ":child-run"
    assert allows(statements, "states:StopExecution", execution) is allowed


def test_the_tenant_policy_is_the_shared_roles_but_for_child_workflows():
    shared = {s["Sid"]: s for s in role_statements(TEMPLATE, DEV, "StateMachineRole")}
    tenant = {s["Sid"]: s for s in tenant_policy("acme")}
    children = {"RunChildWorkflows", "WatchChildWorkflows"}
    assert set(shared) - children == set(tenant) - {f"{c}OfTheTenant" for c in children}
    for sid in set(shared) - children:
        assert tenant[sid] == shared[sid], sid
    for sid in children:
        mine = tenant[f"{sid}OfTheTenant"]
        assert mine["Action"] == shared[sid]["Action"]
        assert mine["Resource"] == shared[sid]["Resource"].replace(
            "relayflow-dev-*", "relayflow-dev-acme_*"
        )


def api_statements() -> list[dict]:
    found: list[dict] = []
    for policy in RESOURCES["ApiFunction"]["Properties"]["Policies"]:
        policy = DEV.resolve(policy)
        if isinstance(policy, dict) and "Statement" in policy:
            found.extend(policy["Statement"])
    return found


def test_the_api_creates_tenant_roles_only_bounded_by_that_policy():
    policy_arn = DEV.ref("TenantStateMachinePolicy")
    by_sid = {s["Sid"]: s for s in api_statements()}
    roles = "arn:aws:iam::123456789012:role/relayflow-dev-tenant-*"
    create = by_sid["CreateTenantRoles"]
    assert (create["Action"], create["Resource"]) == ("iam:CreateRole", roles)
    assert create["Condition"] == {"StringEquals": {"iam:PermissionsBoundary": policy_arn}}
    attach = by_sid["AttachTheTenantPolicy"]
    assert (attach["Action"], attach["Resource"]) == ("iam:AttachRolePolicy", roles)
    assert attach["Condition"] == {"ArnEquals": {"iam:PolicyARN": policy_arn}}
    passing = by_sid["PassTenantRoles"]
    assert passing["Condition"] == {"StringEquals": {"iam:PassedToService": "states.amazonaws.com"}}
    # Nothing that would let it widen a role: no inline policies, no boundary removal
    actions = {
        a
        for s in api_statements()
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert not {a for a in actions if a.startswith("iam:")} - {
        "iam:CreateRole",
        "iam:AttachRolePolicy",
        "iam:GetRole",
        "iam:TagRole",
        "iam:PassRole",
    }
    # And no other function may create or change roles
    for kind, logical_id in FUNCTIONS.items():
        if kind == "api":
            continue
        text = json.dumps(RESOURCES[logical_id]["Properties"].get("Policies"))
        assert "iam:CreateRole" not in text and "iam:AttachRolePolicy" not in text, kind


def test_the_control_plane_is_told_the_policy():
    env = RESOURCES["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert env["RELAYFLOW_TENANT_STATE_MACHINE_POLICY_ARN"] == {"Ref": "TenantStateMachinePolicy"}


def test_a_tenant_role_reads_no_secret_and_is_not_the_step_identity():
    # A tenant's state machines never read secrets: steps do, as TenantStepRole
    statements = tenant_policy("acme")
    for secret in ("relayflow/dev/acme/stripe-AbCdEf", "relayflow/dev/globex/stripe-AbCdEf"):
        arn = f"arn:aws:secretsmanager:us-east-1:123456789012:secret:{secret}"
        assert not allows(statements, "secretsmanager:GetSecretValue", arn)
    # And the API, which creates tenant roles and attaches their policy, can touch no role
    # of the step identity's name: none of its IAM grants' resources match it
    name = DEV.resolve(RESOURCES["TenantStepRole"]["Properties"]["RoleName"])
    arn = f"arn:aws:iam::123456789012:role/{name}"
    iam_resources = [
        resource
        for statement in api_statements()
        if any(str(a).startswith("iam:") for a in _list(statement["Action"]))
        for resource in _list(statement["Resource"])
    ]
    assert "arn:aws:iam::123456789012:role/relayflow-dev-tenant-*" in iam_resources
    assert not [r for r in iam_resources if fnmatch.fnmatchcase(arn, r)]


def _list(value: object) -> list:
    return value if isinstance(value, list) else [value]
