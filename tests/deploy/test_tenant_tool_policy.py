"""Issue 36, item 1, on AWS: TenantStepRole's policy in the TRANSLATED template (what
CloudFormation receives), evaluated by tests/deploy/iam_eval.py for sessions tagged
relayflow-tenant=alpha and =beta. Every tool action on the other tenant's data is denied, the
same action on the tenant's own is allowed, and a resource is shared only when the operator
lists it in SharedToolResources (never one of Relayflow's own). The local runtime holds the
same rules in code (tests/integration/test_tenant_tool_data.py)."""

from __future__ import annotations

from typing import Any

import pytest
from iam_eval import Request, as_tenant, evaluate
from sam_template import ACCOUNT, REGION, Resolver, role_statements
from stack import DEV
from translated import translate

ALPHA, BETA = "alpha", "beta"
DDB = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table"
TABLE = f"{DDB}/app-ledger"
BUCKET = "arn:aws:s3:::app-files"
QUEUE = f"arn:aws:sqs:{REGION}:{ACCOUNT}:app-jobs"
TOPIC = f"arn:aws:sns:{REGION}:{ACCOUNT}:app-alerts"
BUS = f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/app-shop"
FUNCTION = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:app-payroll"
MACHINE = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:app-payroll"


def tenant_step_policy(**parameters: str) -> list[dict[str, Any]]:
    """TenantStepRole's statements in the translated dev template, intrinsics resolved (the
    policy variables stay for the evaluator to substitute)."""
    template = translate(Stage="dev", **parameters)
    return role_statements(
        template, Resolver(template, Stage="dev", **parameters), "TenantStepRole"
    )


@pytest.fixture(scope="module")
def policy() -> list[dict[str, Any]]:
    return tenant_step_policy()


def owned_by(owner: str) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """A request on ``owner``'s data per tool action: ``label -> (action, resource, keys)``."""
    items = {"leading_keys": [f"{owner}#order#1"]}
    tagged = {"resource_tag": owner}
    return {
        "ddb-get": ("dynamodb:GetItem", TABLE, items),
        "ddb-put": ("dynamodb:PutItem", TABLE, items),
        "ddb-update": ("dynamodb:UpdateItem", TABLE, items),
        "ddb-query": ("dynamodb:Query", TABLE, items),
        "s3-get": ("s3:GetObject", f"{BUCKET}/{owner}/invoices/1.json", {}),
        "s3-put": ("s3:PutObject", f"{BUCKET}/{owner}/invoices/1.json", {}),
        "s3-list": ("s3:ListBucket", BUCKET, {"s3_prefix": f"{owner}/invoices/"}),
        "sqs": ("sqs:SendMessage", QUEUE, tagged),
        "sqs-url": ("sqs:GetQueueUrl", QUEUE, tagged),
        "sns": ("sns:Publish", TOPIC, tagged),
        "events": ("events:PutEvents", BUS, tagged),
        "lambda": ("lambda:InvokeFunction", FUNCTION, tagged),
        "lambda-alias": ("lambda:InvokeFunction", f"{FUNCTION}:live", tagged),
        "sfn": ("states:StartExecution", MACHINE, tagged),
    }


LABELS = list(owned_by(ALPHA))


@pytest.mark.parametrize("label", LABELS)
def test_each_tenant_reaches_its_own_tool_data(policy, label):
    for tenant in (ALPHA, BETA):
        action, resource, keys = owned_by(tenant)[label]
        assert evaluate(policy, as_tenant(tenant, action, resource, **keys)) == "Allow", tenant


@pytest.mark.parametrize("label", LABELS)
def test_no_tenant_reaches_the_others_tool_data(policy, label):
    for attacker, owner in ((BETA, ALPHA), (ALPHA, BETA)):
        action, resource, keys = owned_by(owner)[label]
        decision = evaluate(policy, as_tenant(attacker, action, resource, **keys))
        assert decision != "Allow", (attacker, owner, label)


#: Requests no tenant's session may make, whoever holds the data.
NOBODYS = {
    # A Scan reads every partition: it has no leading keys to scope
    "ddb-scan": ("dynamodb:Scan", TABLE, {}),
    "ddb-no-key": ("dynamodb:GetItem", TABLE, {}),
    "ddb-batch": ("dynamodb:BatchGetItem", TABLE, {"leading_keys": ["{t}#1"]}),
    "ddb-delete": ("dynamodb:DeleteItem", TABLE, {"leading_keys": ["{t}#1"]}),
    "ddb-index": ("dynamodb:Query", f"{TABLE}/index/by-card", {"leading_keys": ["{t}#1"]}),
    "ddb-mixed": ("dynamodb:Query", TABLE, {"leading_keys": ["{t}#1", "{o}#1"]}),
    "ddb-like-prefix": ("dynamodb:GetItem", TABLE, {"leading_keys": ["{t}x#1"]}),
    # '*' matches '/': the other tenant's folder holding one named like this tenant
    "s3-nested": ("s3:GetObject", f"{BUCKET}/{{o}}/{{t}}/secret.json", {}),
    "s3-nested-put": ("s3:PutObject", f"{BUCKET}/{{o}}/{{t}}/secret.json", {}),
    "s3-root": ("s3:GetObject", f"{BUCKET}/secret.json", {}),
    "s3-like-prefix": ("s3:GetObject", f"{BUCKET}/{{t}}x/secret.json", {}),
    "s3-list-all": ("s3:ListBucket", BUCKET, {}),
    "s3-list-other": ("s3:ListBucket", BUCKET, {"s3_prefix": "{o}/"}),
    "s3-delete": ("s3:DeleteObject", f"{BUCKET}/{{t}}/x", {}),
    "sqs-untagged": ("sqs:SendMessage", QUEUE, {}),
    "sns-untagged": ("sns:Publish", TOPIC, {}),
    "events-untagged": ("events:PutEvents", BUS, {}),
    "lambda-untagged": ("lambda:InvokeFunction", FUNCTION, {}),
    "sfn-untagged": ("states:StartExecution", MACHINE, {}),
    "sfn-tagged-other-prefix": (
        "states:StartExecution",
        f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:payroll",
        {"resource_tag": "{t}"},
    ),
}


def _filled(value: Any, tenant: str, other: str) -> Any:
    if isinstance(value, str):
        return value.replace("{t}", tenant).replace("{o}", other)
    if isinstance(value, list):
        return [_filled(v, tenant, other) for v in value]
    return {k: _filled(v, tenant, other) for k, v in value.items()}


@pytest.mark.parametrize("label", list(NOBODYS))
def test_requests_no_tenant_may_make(policy, label):
    action, resource, keys = NOBODYS[label]
    for tenant, other in ((ALPHA, BETA), (BETA, ALPHA)):
        request = as_tenant(
            tenant, action, _filled(resource, tenant, other), **_filled(keys, tenant, other)
        )
        assert evaluate(policy, request) != "Allow", (tenant, label)


def test_the_nested_folder_is_closed_by_the_deny_not_by_luck(policy):
    # Without ToolS3NoTenantFolderFurtherIn, alpha's object grant reaches beta/alpha/…
    request = as_tenant(ALPHA, "s3:GetObject", f"{BUCKET}/{BETA}/{ALPHA}/secret.json")
    assert evaluate(policy, request) == "Deny"
    without = [s for s in policy if s.get("Sid") != "ToolS3NoTenantFolderFurtherIn"]
    assert evaluate(without, request) == "Allow"
    # The price: alpha's own nested folder named alpha (docs/security.md)
    own = as_tenant(ALPHA, "s3:GetObject", f"{BUCKET}/{ALPHA}/x/{ALPHA}/y.json")
    assert evaluate(policy, own) == "Deny"


def test_nothing_is_shared_by_default(policy):
    assert not [s for s in policy if s.get("Sid") == "ToolResourcesSharedOnPurpose"]


SHARED_TOPIC = f"arn:aws:sns:{REGION}:{ACCOUNT}:app-announcements"
SHARED_OBJECTS = "arn:aws:s3:::app-catalogue/*"
RELAYFLOW_TABLE = DEV.get_att("RelayflowTable", "Arn")


def test_a_resource_shared_on_purpose_is_reached_by_every_tenant():
    # Given the operator lists a topic, a bucket's objects and (wrongly) Relayflow's table
    shared = tenant_step_policy(
        SharedToolResources=",".join([SHARED_TOPIC, SHARED_OBJECTS, RELAYFLOW_TABLE])
    )
    for tenant in (ALPHA, BETA):
        # Then every tenant publishes to the topic, tagged or not, and reads the catalogue
        assert evaluate(shared, as_tenant(tenant, "sns:Publish", SHARED_TOPIC)) == "Allow"
        catalogue = as_tenant(tenant, "s3:GetObject", "arn:aws:s3:::app-catalogue/items.json")
        assert evaluate(shared, catalogue) == "Allow"
        # (but not under a further /<tenant>/: the nested-folder deny holds for shared buckets)
        nested = f"arn:aws:s3:::app-catalogue/x/{tenant}/items.json"
        assert evaluate(shared, as_tenant(tenant, "s3:GetObject", nested)) == "Deny"
        # But Relayflow's own table stays denied, and so does everything else not listed
        assert evaluate(shared, as_tenant(tenant, "dynamodb:GetItem", RELAYFLOW_TABLE)) == "Deny"
        assert evaluate(shared, as_tenant(tenant, "sns:Publish", TOPIC)) != "Allow"
        other = BETA if tenant == ALPHA else ALPHA
        action, resource, keys = owned_by(other)["ddb-get"]
        assert evaluate(shared, as_tenant(tenant, action, resource, **keys)) != "Allow"


def test_a_session_without_the_tenant_tag_reaches_no_tool_data(policy):
    for action, resource, keys in owned_by(ALPHA).values():
        context = {
            {
                "resource_tag": "aws:ResourceTag/relayflow-tenant",
                "leading_keys": "dynamodb:LeadingKeys",
                "s3_prefix": "s3:prefix",
            }[k]: v
            for k, v in keys.items()
        }
        assert evaluate(policy, Request(action, resource, context)) != "Allow", action
