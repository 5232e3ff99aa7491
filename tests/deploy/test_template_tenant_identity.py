"""template.yaml for the tenant step identity (issue 25): no function role reads a tenant's
secret itself, the acting functions reach secrets and tool resources only as TenantStepRole
with a relayflow-tenant session tag, and that identity, evaluated for one tenant, reaches no
other tenant's secret, no item or object of Relayflow's, no Relayflow machine, function, bus or
schedule, whatever names it is given."""

from __future__ import annotations

import json

import pytest
from iam_eval import as_tenant, evaluate
from sam_template import ACCOUNT, REGION, Resolver, allows
from sam_template import role_statements as _role_statements
from stack import DEV, FUNCTIONS, RESOURCES, TEMPLATE

from relayflow.settings import Settings
from relayflow.tenancy import TENANT_TAG

TAG = "${aws:PrincipalTag/relayflow-tenant}"
#: The functions that act for a tenant: steps that read secrets or call AWS for it, the
#: webhook function (verifying a delivery with its tenant's key), the notification senders.
ACTING = {
    "tool",
    "agent",
    "llm_batch",
    "webhook_out",
    "custom",
    "approval",
    "recorder",
    "maintenance",
    "webhook",
}
TABLE = DEV.get_att("RelayflowTable", "Arn")
BUCKET = DEV.get_att("PayloadBucket", "Arn")
SECRET = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:"
PARAMETER = f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/"


def tenant_identity(tenant: str, resolver: Resolver = DEV) -> list[dict]:
    """TenantStepRole's policy as IAM evaluates it for a session tagged
    relayflow-tenant=<tenant> (the policy variable replaced by the tag's value)."""
    found = _role_statements(TEMPLATE, resolver, "TenantStepRole")
    return json.loads(json.dumps(found).replace(TAG, tenant))


def function_statements(kind: str, resolver: Resolver = DEV) -> list[dict]:
    """The resolved inline statements of a function's role (its own Role's, for the code
    function)."""
    props = RESOURCES[FUNCTIONS[kind]]["Properties"]
    if "Role" in props:
        return _role_statements(TEMPLATE, resolver, props["Role"]["Fn::GetAtt"][0])
    found: list[dict] = []
    for policy in resolver.resolve(props.get("Policies") or []):
        if isinstance(policy, dict) and "Statement" in policy:
            found.extend(policy["Statement"])
    return found


def policy_templates(kind: str) -> dict[str, object]:
    """The SAM policy templates of a function (name → resolved parameters)."""
    props = RESOURCES[FUNCTIONS[kind]]["Properties"]
    return {
        name: DEV.resolve(value)
        for policy in props.get("Policies") or []
        if isinstance(policy, dict)
        for name, value in policy.items()
        if name != "Statement" and not name.startswith("Fn::")
    }


# ----------------------------------------------------------------------------- the functions


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_no_function_role_reads_a_tenants_secret_itself(kind):
    statements = function_statements(kind)
    for name in ("dev/acme/stripe-AbCdEf", "prod/globex/hook-123456", "acme/stripe-AbCdEf"):
        assert not allows(statements, "secretsmanager:GetSecretValue", f"{SECRET}relayflow/{name}")
        assert not allows(statements, "ssm:GetParameter", f"{PARAMETER}relayflow/{name}")
    # And no SAM policy template reads under the prefix (only the approval signing key)
    templates = policy_templates(kind)
    assert "SSMParameterReadPolicy" not in templates, kind
    secret = templates.get("AWSSecretsManagerGetSecretValuePolicy")
    assert secret in (None, {"SecretArn": DEV.ref("ApprovalSigningSecret")}), kind
    # And none decrypts with the secrets' customer key (the tenant identity does)
    with_key = Resolver(TEMPLATE, Stage="dev", SecretsKmsKeyArn="arn:aws:kms:us-east-1:1:key/k")
    assert not [s for s in function_statements(kind, with_key) if s["Action"] == "kms:Decrypt"]


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_exactly_the_acting_functions_may_act_for_a_tenant(kind):
    statements = [s for s in function_statements(kind) if s.get("Sid") == "ActForATenant"]
    if kind not in ACTING:
        assert statements == []
        return
    assert statements == [
        {
            "Sid": "ActForATenant",
            "Effect": "Allow",
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Resource": DEV.get_att("TenantStepRole", "Arn"),
        }
    ]


@pytest.mark.parametrize("kind", ["tool", "agent"])
def test_tool_functions_reach_tool_resources_only_through_the_tenant_identity(kind):
    statements = function_statements(kind)
    for action, resource in [
        ("dynamodb:PutItem", f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/app-orders"),
        ("s3:PutObject", "arn:aws:s3:::app-invoices/x"),
        ("lambda:InvokeFunction", f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:app-double"),
        ("states:StartExecution", f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:app-flow"),
    ]:
        assert not allows(statements, action, resource), (action, resource)
    templates = policy_templates(kind)
    for name in ("SQSSendMessagePolicy", "SNSPublishMessagePolicy", "LambdaInvokePolicy"):
        assert name not in templates, name
    # The Relayflow bus stays the function's own: the stamped path puts a tool's event there
    assert templates["EventBridgePutEventsPolicy"] == {"EventBusName": DEV.ref("EventBus")}


def test_every_function_knows_the_identity_and_the_prefix():
    variables = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["RELAYFLOW_TENANT_STEP_ROLE_ARN"] == {"Fn::GetAtt": ["TenantStepRole", "Arn"]}
    assert {"tenant_step_role_arn", "secret_name_prefix"} <= set(Settings.model_fields)
    # The default (empty) SecretNamePrefix is a folder per stage, the one Settings falls back to
    assert TEMPLATE["Parameters"]["SecretNamePrefix"]["Default"] == ""
    assert Settings().secret_name_prefix is None
    for stage in ("dev", "prod"):
        told = Resolver(TEMPLATE, Stage=stage).resolve(variables)["RELAYFLOW_SECRET_NAME_PREFIX"]
        assert told == f"relayflow/{stage}/" == Settings(stage=stage).secret_prefix
    # And an explicit prefix is passed as given
    teams = Resolver(TEMPLATE, Stage="prod", SecretNamePrefix="teams/").resolve(variables)
    assert teams["RELAYFLOW_SECRET_NAME_PREFIX"] == "teams/"


# ----------------------------------------------------------------------------- the identity


def test_a_session_needs_the_tenant_tag_and_no_other():
    trust = DEV.resolve(RESOURCES["TenantStepRole"]["Properties"]["AssumeRolePolicyDocument"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}
    assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    # Only the acting functions' roles (their path), with the tag and no other, its value
    # a tenant id as far as IAM's wildcards say (tests/deploy/test_template_trust.py decides)
    condition = statement["Condition"]
    assert condition["ArnLike"] == {
        "aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/relayflow/dev/acting/*"
    }
    assert condition["StringLike"] == {f"aws:RequestTag/{TENANT_TAG}": "??*"}
    assert condition["ForAllValues:StringEquals"] == {"aws:TagKeys": [TENANT_TAG]}
    assert set(condition) == {
        "ArnLike",
        "StringLike",
        "StringNotLike",
        "ForAllValues:StringEquals",
    }
    # Its name is not a tenant role's (the API may create and attach relayflow-<stage>-tenant-*)
    name = DEV.resolve(RESOURCES["TenantStepRole"]["Properties"]["RoleName"])
    assert name == "relayflow-dev-step-identity"


@pytest.mark.parametrize(
    ("secret", "allowed"),
    [
        ("relayflow/dev/acme/stripe-AbCdEf", True),
        ("relayflow/dev/acme/billing/token-AbCdEf", True),
        ("relayflow/dev/globex/stripe-AbCdEf", False),
        ("relayflow/dev/acme-corp/stripe-AbCdEf", False),  # a tenant whose id starts like acme's
        ("relayflow/dev/stripe-AbCdEf", False),
        ("relayflow/prod/acme/stripe-AbCdEf", False),  # the same tenant on another stage
        ("relayflow/acme/stripe-AbCdEf", False),  # the layout before per-stage prefixes
        ("relayflow-internal/dev/approval-signing-key-AbCdEf", False),
    ],
)
def test_the_identity_reads_only_its_own_tenants_secrets(secret, allowed):
    identity = tenant_identity("acme")
    assert allows(identity, "secretsmanager:GetSecretValue", SECRET + secret) is allowed
    parameter = PARAMETER + secret.rsplit("-AbCdEf", 1)[0]
    assert allows(identity, "ssm:GetParameter", parameter) is allowed


def test_dev_and_prod_never_share_a_tenants_secrets():
    # Given the default SecretNamePrefix on both stages of one account
    for stage, other in (("dev", "prod"), ("prod", "dev")):
        identity = tenant_identity("acme", Resolver(TEMPLATE, Stage=stage))
        # Then a session of either stage reads its own stage's folder only
        assert allows(
            identity, "secretsmanager:GetSecretValue", f"{SECRET}relayflow/{stage}/acme/x"
        )
        assert not allows(
            identity, "secretsmanager:GetSecretValue", f"{SECRET}relayflow/{other}/acme/x"
        )
        assert not allows(identity, "ssm:GetParameter", f"{PARAMETER}relayflow/{other}/acme/x")


def test_another_prefix_moves_the_tenants_folder():
    identity = tenant_identity("acme", Resolver(TEMPLATE, Stage="dev", SecretNamePrefix="teams/"))
    assert allows(identity, "secretsmanager:GetSecretValue", f"{SECRET}teams/acme/x-AbCdEf")
    assert not allows(identity, "secretsmanager:GetSecretValue", f"{SECRET}relayflow/acme/x-1")


def test_kms_decrypt_only_for_a_customer_key_and_only_through_the_services():
    assert not [s for s in tenant_identity("acme") if s["Action"] == "kms:Decrypt"]
    with_key = Resolver(TEMPLATE, Stage="dev", SecretsKmsKeyArn="arn:aws:kms:us-east-1:1:key/k")
    (decrypt,) = [s for s in tenant_identity("acme", with_key) if s["Action"] == "kms:Decrypt"]
    assert decrypt["Resource"] == "arn:aws:kms:us-east-1:1:key/k"
    assert decrypt["Condition"]["StringEquals"]["kms:ViaService"] == [
        "secretsmanager.us-east-1.amazonaws.com",
        "ssm.us-east-1.amazonaws.com",
    ]


RELAYFLOWS = [
    *[(a, TABLE) for a in ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query")],
    ("dynamodb:Query", f"{TABLE}/index/GSI1"),
    ("s3:GetObject", f"{BUCKET}/payloads/run-1/out.json"),
    ("s3:PutObject", f"{BUCKET}/payloads/batch/x.jsonl"),
    ("states:StartExecution", f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:relayflow-dev-a_w"),
    ("states:StopExecution", f"arn:aws:states:{REGION}:{ACCOUNT}:execution:relayflow-dev-a_w:r"),
    ("lambda:InvokeFunction", f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:relayflow-dev-code"),
    ("events:PutEvents", DEV.get_att("EventBus", "Arn")),
    ("scheduler:CreateSchedule", f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/relayflow-dev/x"),
    ("sqs:SendMessage", DEV.get_att("TriggerDeadLetterQueue", "Arn")),
    ("secretsmanager:GetSecretValue", DEV.ref("ApprovalSigningSecret")),
]


@pytest.mark.parametrize(("action", "resource"), RELAYFLOWS)
def test_the_identity_reaches_nothing_of_relayflows(action, resource):
    for tenant in ("acme", "globex"):
        assert not allows(tenant_identity(tenant), action, resource), (tenant, action, resource)


def test_a_tool_resource_prefix_grant_can_never_reach_relayflows():
    # Even were ToolResourcePrefix relayflow-dev- (its pattern refuses it), the deny holds
    widened = Resolver(TEMPLATE, Stage="dev", ToolResourcePrefix="relayflow-dev-")
    identity = tenant_identity("acme", widened)
    for action, resource in RELAYFLOWS:
        assert not allows(identity, action, resource), (action, resource)


@pytest.mark.parametrize(
    ("action", "resource", "keys"),
    [
        # The tenant's own data (docs/security.md, "Tenant isolation"); the other tenant's is
        # denied in tests/deploy/test_tenant_tool_policy.py.
        (
            "dynamodb:PutItem",
            f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/app-orders",
            {"leading_keys": ["acme#order#1"]},
        ),
        (
            "dynamodb:Query",
            f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/app-orders",
            {"leading_keys": ["acme#order#1"]},
        ),
        ("s3:GetObject", "arn:aws:s3:::app-invoices/acme/2030/x.json", {}),
        ("ses:SendEmail", f"arn:aws:ses:{REGION}:{ACCOUNT}:identity/example.com", {}),
        ("sqs:SendMessage", f"arn:aws:sqs:{REGION}:{ACCOUNT}:app-orders", {"resource_tag": "acme"}),
        ("sns:Publish", f"arn:aws:sns:{REGION}:{ACCOUNT}:app-alerts", {"resource_tag": "acme"}),
        (
            "events:PutEvents",
            f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/app-shop",
            {"resource_tag": "acme"},
        ),
        (
            "lambda:InvokeFunction",
            f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:app-double",
            {"resource_tag": "acme"},
        ),
        (
            "states:StartExecution",
            f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:app-flow",
            {"resource_tag": "acme"},
        ),
    ],
)
def test_the_identity_holds_the_tool_grants(action, resource, keys):
    # The policy as IAM evaluates it, the session's tag substituted (tests/deploy/iam_eval.py)
    policy = _role_statements(TEMPLATE, DEV, "TenantStepRole")
    request = as_tenant("acme", action, resource, **keys)
    assert evaluate(policy, request) == "Allow", (action, resource)


def test_the_identity_grants_nothing_on_every_resource():
    for statement in tenant_identity("acme"):
        resources = statement["Resource"]
        if statement["Effect"] == "Allow":
            assert "*" not in (resources if isinstance(resources, list) else [resources])
