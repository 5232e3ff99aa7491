"""template.yaml keeps the platform's own paths outside every tenant's (issue 36, item 3): the
stack's SSM parameters live under ``/relayflow-platform/``, which no tenant's folder
(``/<SecretNamePrefix><tenant>/``) contains and TenantStepRole is denied outright, and every
stage the template allows is a tenant id nobody may create."""

from __future__ import annotations

import json

import pytest
from sam_template import ACCOUNT, REGION, Resolver, allows, role_statements
from stack import DEV, PROD, RESOURCES, TEMPLATE

from relayflow.control.limits import STAGES, reserved_tenants

TAG = "${aws:PrincipalTag/relayflow-tenant}"
PARAMETER = f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter"
#: Tenants that could collide with a platform path: the stages, the platform's names, and a
#: tenant whose id completes a short prefix into relayflow-platform/ (see the widened case).
TENANTS = ["acme", *STAGES, "local", "platform", "relayflow", "relayflow-platform", "latform"]


def identity(tenant: str, resolver: Resolver) -> list[dict]:
    """TenantStepRole's statements as IAM evaluates them for a session of ``tenant``."""
    found = role_statements(TEMPLATE, resolver, "TenantStepRole")
    return json.loads(json.dumps(found).replace(TAG, tenant))


def stack_parameters(resolver: Resolver) -> list[str]:
    """The names of the SSM parameters the stack creates."""
    return [
        resolver.resolve(resource["Properties"]["Name"])
        for resource in RESOURCES.values()
        if resource["Type"] == "AWS::SSM::Parameter"
    ]


def test_the_stacks_parameters_live_under_relayflow_platform():
    for resolver, stage in ((DEV, "dev"), (PROD, "prod")):
        assert stack_parameters(resolver) == [f"/relayflow-platform/{stage}/public-base-url"]


@pytest.mark.parametrize("resolver", [DEV, PROD], ids=["dev", "prod"])
@pytest.mark.parametrize("tenant", TENANTS)
def test_no_tenant_reads_a_parameter_of_the_stack(resolver, tenant):
    # Given a session of any tenant, one named like the stage among them
    statements = identity(tenant, resolver)
    # Then no parameter of the stack is readable, while the tenant's own folder is
    for name in stack_parameters(resolver):
        for action in ("ssm:GetParameter", "ssm:GetParameters"):
            assert not allows(statements, action, PARAMETER + name), (tenant, name)
    prefix = resolver.resolve({"Ref": "SecretNamePrefix"}) or ""
    own = [s for s in statements if s.get("Sid") == "TheTenantsParameters"]
    assert own and own[0]["Resource"].endswith(f"/{tenant}/*")
    assert allows(statements, "ssm:GetParameter", own[0]["Resource"][:-1] + "x"), prefix


@pytest.mark.parametrize("prefix", ["relayflow-p", "relayflow-platform/", "rel/"])
def test_a_prefix_that_spells_the_platforms_folder_still_reaches_none_of_it(prefix):
    # Given a SecretNamePrefix that, joined with some tenant id, spells /relayflow-platform/…
    widened = Resolver(TEMPLATE, Stage="dev", SecretNamePrefix=prefix)
    for tenant in TENANTS:
        statements = identity(tenant, widened)
        # Then the deny on the platform's folder still holds
        for name in stack_parameters(widened):
            assert not allows(statements, "ssm:GetParameter", PARAMETER + name), (tenant, prefix)


def test_the_approval_function_reads_the_parameter_it_is_told():
    props = RESOURCES["ApprovalFunction"]["Properties"]
    told = DEV.resolve(props["Environment"]["Variables"]["RELAYFLOW_PUBLIC_BASE_URL_PARAMETER"])
    assert told == "/relayflow-platform/dev/public-base-url"
    granted = [
        DEV.resolve(statement)
        for policy in props["Policies"]
        if isinstance(policy, dict) and "Statement" in policy
        for statement in policy["Statement"]
        if isinstance(statement, dict) and statement.get("Sid") == "PublicBaseUrl"
    ]
    assert [g["Resource"] for g in granted] == [PARAMETER + told]


def test_every_stage_the_template_allows_is_a_reserved_tenant_id():
    allowed = TEMPLATE["Parameters"]["Stage"]["AllowedValues"]
    assert sorted(STAGES) == sorted(allowed)
    for stage in [*allowed, "local"]:
        assert set(allowed) <= reserved_tenants(stage), stage
        assert {"platform", "relayflow", "relayflow-platform"} <= reserved_tenants(stage)
    # The local runtime's own tenant is reserved on a deployed stack only
    assert "local" in reserved_tenants("dev") and "local" not in reserved_tenants("local")
