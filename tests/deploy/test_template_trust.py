"""Who may assume TenantStepRole (issue 36, item 2), decided by tests/deploy/trust.py over the
SAM-translated template (what CloudFormation receives): exactly the nine acting functions'
roles, each with one relayflow-tenant session tag whose value is a tenant id; no other role of
the stack or the account, no user, not the account root, no principal of another account, and
no role of the other stage. The session is IAM's shortest, and relayflow.adapters.tenant_aws
asks for exactly what the trust allows."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from sam_template import ACCOUNT, Resolver
from translated import translate
from trust import AssumeRequest, trust_allows

from relayflow.adapters import tenant_aws
from relayflow.settings import override_settings
from relayflow.tenancy import TENANT_TAG, TenantBoundary

STAGES = ["dev", "prod"]
#: The functions that act for a tenant (tests/deploy/test_template_tenant_identity.py ACTING).
ACTING = {
    "ToolFunction",
    "AgentFunction",
    "LlmBatchFunction",
    "WebhookOutFunction",
    "CustomFunction",
    "ApprovalFunction",
    "RecorderFunction",
    "MaintenanceFunction",
    "WebhookFunction",
}
ROLE = f"arn:aws:iam::{ACCOUNT}:role"
OTHER_ACCOUNT = "210987654321"
GOOD_TENANTS = ["acme", "acme-corp", "a1", "0day", "x" * 31, "a-"]
BAD_TENANTS = [
    "",
    "a",  # one character
    "-acme",  # a leading '-'
    "x" * 32,  # longer than a tenant id
    "Acme",
    "ACME",
    "acme corp",
    "acme_corp",
    "acme.corp",
    "acme/globex",
    "acme:1",
    "acme=1",
    "acme+1",
    "acme@corp",
    "../globex",
]


class Stack:
    """One stage's translated template: TenantStepRole's trust policy and every role's ARN."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.template = translate(Stage=stage)
        self.resolver = Resolver(self.template, Stage=stage)
        role = self.template["Resources"]["TenantStepRole"]["Properties"]
        self.trust = self.resolver.resolve(role["AssumeRolePolicyDocument"])
        self.max_session = int(role["MaxSessionDuration"])

    def roles(self) -> dict[str, str]:
        """Logical id → the ARN CloudFormation gives each role: its path (``/`` when none),
        then its RoleName or a generated ``<stack>-<logical id>-<suffix>``."""
        found = {}
        for logical_id, resource in self.template["Resources"].items():
            if resource["Type"] != "AWS::IAM::Role":
                continue
            props = resource.get("Properties") or {}
            path = self.resolver.resolve(props.get("Path", "/"))
            name = props.get("RoleName")
            name = (
                self.resolver.resolve(name) if name else f"relayflow-{self.stage}-{logical_id}-X1Y2"
            )
            found[logical_id] = f"{ROLE}{path}{name}"
        return found

    def acting_roles(self) -> dict[str, str]:
        """The roles whose own policy lets them assume TenantStepRole (ActForATenant)."""
        acting = {}
        for logical_id, arn in self.roles().items():
            policies = self.template["Resources"][logical_id]["Properties"].get("Policies")
            if '"Sid": "ActForATenant"' in json.dumps(policies or []):
                acting[logical_id] = arn
        return acting

    def allows(self, principal: str, tags: dict[str, str] | None = None) -> bool:
        return trust_allows(self.trust, AssumeRequest(principal, tags or {}))


@pytest.fixture(scope="module", params=STAGES)
def stack(request: pytest.FixtureRequest) -> Stack:
    return Stack(request.param)


def tenant(value: str) -> dict[str, str]:
    return {TENANT_TAG: value}


def test_the_acting_roles_are_the_nine_functions_and_live_under_the_acting_path(stack):
    acting = stack.acting_roles()
    assert set(acting) == {f"{function}Role" for function in ACTING}
    for arn in acting.values():
        assert arn.startswith(f"{ROLE}/relayflow/{stack.stage}/acting/"), arn
    # And no other role of the stack is under that path
    others = set(stack.roles()) - set(acting)
    assert not [r for r in others if f"/relayflow/{stack.stage}/acting/" in stack.roles()[r]]


@pytest.mark.parametrize("value", GOOD_TENANTS)
def test_each_acting_role_may_assume_it_with_a_tenant_tag(stack, value):
    for arn in stack.acting_roles().values():
        assert stack.allows(arn, tenant(value)), (arn, value)


def test_no_other_role_of_the_stack_may_assume_it(stack):
    acting = stack.acting_roles()
    for logical_id, arn in stack.roles().items():
        if logical_id not in acting:
            assert not stack.allows(arn, tenant("acme")), logical_id


@pytest.mark.parametrize(
    "principal",
    [
        f"{ROLE}/admin",
        f"{ROLE}/relayflow/acting/x",
        f"{ROLE}/relayflow-{{stage}}-step-identity",
        f"arn:aws:iam::{ACCOUNT}:root",
        f"arn:aws:iam::{ACCOUNT}:user/alice",
        f"arn:aws:iam::{ACCOUNT}:user/relayflow/{{stage}}/acting/bob",
        f"arn:aws:iam::{OTHER_ACCOUNT}:role/relayflow/{{stage}}/acting/x",
        f"arn:aws:iam::{OTHER_ACCOUNT}:root",
        f"arn:aws:sts::{ACCOUNT}:federated-user/eve",
        f"{ROLE}/relayflow/{{other}}/acting/relayflow-{{other}}-ToolFunctionRole-X1Y2",
    ],
    ids=[
        "another role",
        "an acting path of no stage",
        "the role itself",
        "the account root",
        "a user",
        "a user under the acting path",
        "another account's role under the path",
        "another account",
        "a federated user",
        "the other stage's tool role",
    ],
)
def test_no_other_principal_may_assume_it(stack, principal):
    other = "prod" if stack.stage == "dev" else "dev"
    arn = principal.format(stage=stack.stage, other=other)
    assert not stack.allows(arn, tenant("acme")), arn


@pytest.mark.parametrize(
    "tags",
    [
        {},
        {TENANT_TAG: "acme", "team": "x"},
        {"team": "acme"},
        {TENANT_TAG.upper(): "acme", "x": "y"},
    ],
    ids=["no tag", "a second tag", "another tag only", "two tags, one spelled in upper case"],
)
def test_an_acting_role_needs_the_tenant_tag_and_no_other(stack, tags):
    for arn in stack.acting_roles().values():
        assert not stack.allows(arn, tags), (arn, tags)


@pytest.mark.parametrize("value", BAD_TENANTS)
def test_a_tag_value_that_is_no_tenant_id_is_refused(stack, value):
    for arn in stack.acting_roles().values():
        assert not stack.allows(arn, tenant(value)), (arn, value)


def test_the_session_is_iams_shortest_and_the_adapter_asks_for_it(stack):
    # 3600 s is the least MaxSessionDuration IAM accepts (3600 to 43200)
    assert stack.max_session == 3600 == tenant_aws.SESSION_SECONDS


def test_the_trust_policy_fits_iams_default_quota(stack):
    # A role trust policy holds 2,048 characters (whitespace not counted) unless the
    # account's quota was raised: the tag-value refusals must leave room
    text = json.dumps(stack.trust, separators=(",", ":"))
    assert len("".join(text.split())) <= 2048


def test_the_checker_tells_the_old_account_wide_trust_apart():
    # Given the trust this stack had before: the account root, conditions on the tag only
    old = {
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {
                    "StringLike": {f"aws:RequestTag/{TENANT_TAG}": "?*"},
                    "ForAllValues:StringEquals": {"aws:TagKeys": [TENANT_TAG]},
                },
            }
        ]
    }
    # Then any principal of the account, with any tag value, was let in
    for principal in (f"{ROLE}/admin", f"arn:aws:iam::{ACCOUNT}:user/alice"):
        assert trust_allows(old, AssumeRequest(principal, tenant("Globex Corp")))
    assert not trust_allows(old, AssumeRequest(f"arn:aws:iam::{OTHER_ACCOUNT}:root", tenant("a")))


# ------------------------------------------------------------------- the adapter's request


class RecordingSts:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def assume_role(self, **params: Any) -> dict[str, Any]:
        self.calls.append(params)
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
        credentials = {"AccessKeyId": "ASIA0", "SecretAccessKey": "s", "SessionToken": "t"}
        return {"Credentials": {**credentials, "Expiration": expires}}


@pytest.fixture
def sts(monkeypatch: pytest.MonkeyPatch) -> RecordingSts:
    recording = RecordingSts()
    monkeypatch.setattr(tenant_aws, "client", lambda service: recording)
    tenant_aws.reset_tenant_sessions()
    yield recording
    tenant_aws.reset_tenant_sessions()


def test_the_adapter_assumes_it_the_way_the_trust_allows(stack, sts):
    role = f"{ROLE}/relayflow-{stack.stage}-step-identity"
    tool_role = stack.acting_roles()["ToolFunctionRole"]
    with override_settings(tenant_step_role_arn=role):
        tenant_aws.tenant_client("s3", "acme-corp")
    (call,) = sts.calls
    tags = {t["Key"]: t["Value"] for t in call["Tags"]}
    assert call["RoleArn"] == role and call["DurationSeconds"] == stack.max_session
    assert stack.allows(tool_role, tags)


@pytest.mark.parametrize("value", [*BAD_TENANTS, "acmé", "ａcme"])
def test_the_adapter_assumes_no_session_for_a_value_that_is_no_tenant_id(sts, value):
    # Non-ASCII letters are tag characters IAM's wildcards cannot single out: the adapter
    # refuses them (and every other non-id) before any STS call
    with (
        override_settings(tenant_step_role_arn=f"{ROLE}/relayflow-dev-step-identity"),
        pytest.raises(TenantBoundary, match="is not a tenant id"),
    ):
        tenant_aws.tenant_client("s3", value)
    assert sts.calls == []
