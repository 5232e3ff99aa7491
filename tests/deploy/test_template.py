"""template.yaml and samconfig.toml: what each resource must hold, checked offline."""

from __future__ import annotations

import json
import re
import tomllib

import pytest
from sam_template import (
    ROOT,
    Resolver,
    allows,
    allows_item,
    role_statements,
)
from stack import DEV, FUNCTIONS, PROD, RESOURCES, TEMPLATE, props

from relayflow import naming, observability
from relayflow.adapters import aws as adapters_aws
from relayflow.settings import Settings


def test_every_function_folder_is_deployed_and_every_deployed_function_has_a_folder():
    # Given the function folders and the step types that run in a Lambda
    folders = {p.name for p in (ROOT / "functions").iterdir() if p.is_dir()}
    # Then the template deploys exactly those, one function each
    assert set(FUNCTIONS) == folders
    assert set(naming.STEP_FUNCTIONS) <= set(FUNCTIONS)


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_each_function_is_named_for_its_stage_and_kind_with_a_thin_handler(kind):
    p = props(FUNCTIONS[kind])
    assert DEV.resolve(p["FunctionName"]) == f"relayflow-dev-{kind}"
    assert p["Handler"] == "app.handler"
    assert (ROOT / p["CodeUri"] / "app.py").is_file()


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_each_function_writes_to_its_own_log_group_with_the_retention_parameter(kind):
    p = props(FUNCTIONS[kind])
    group_id = p["LoggingConfig"]["LogGroup"]["Ref"]
    group = RESOURCES[group_id]
    assert group["Type"] == "AWS::Logs::LogGroup"
    assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    assert DEV.ref(group_id) == f"/aws/lambda/relayflow-dev-{kind}"


def test_log_groups_are_not_shared():
    groups = [props(fn)["LoggingConfig"]["LogGroup"]["Ref"] for fn in FUNCTIONS.values()]
    assert len(groups) == len(set(groups))


def test_every_log_group_of_the_stack_expires():
    for logical_id, resource in RESOURCES.items():
        if resource["Type"] == "AWS::Logs::LogGroup":
            assert resource["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, (
                logical_id
            )


def test_functions_trace_actively_except_code_whose_role_cannot_write_traces():
    assert TEMPLATE["Globals"]["Function"]["Tracing"] == "Active"
    for kind, logical_id in FUNCTIONS.items():
        expected = "PassThrough" if kind == "code" else None
        assert props(logical_id).get("Tracing") == expected, kind


def test_runtime_architecture_and_layer_build():
    function_globals = TEMPLATE["Globals"]["Function"]
    assert function_globals["Runtime"] == "python3.12"
    assert function_globals["Architectures"] == ["arm64"]
    assert function_globals["Layers"] == [{"Ref": "RelayflowLayer"}]
    layer = RESOURCES["RelayflowLayer"]
    assert layer["Properties"]["ContentUri"] == "shared/"
    # shared/Makefile builds it: python3.12 arm64 wheels, the package without the local runtime
    assert layer["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": "arm64"}
    makefile = (ROOT / "shared" / "Makefile").read_text()
    assert "build-RelayflowLayer:" in makefile
    assert "--python-version 3.12" in makefile and "aarch64" in makefile
    assert "NOT_IN_LAMBDA = relayflow/local relayflow/cli " in makefile
    assert (ROOT / "shared" / "requirements.txt").is_file()


def test_globals_set_powertools_and_every_relayflow_variable_names_a_setting():
    variables = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["POWERTOOLS_SERVICE_NAME"] == observability.SERVICE
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == observability.DEFAULT_NAMESPACE
    assert variables["POWERTOOLS_LOG_LEVEL"] == {"Ref": "LogLevel"}
    relayflow = {k for k in variables if k.startswith("RELAYFLOW_")}
    assert relayflow == {
        "RELAYFLOW_STAGE",
        "RELAYFLOW_TABLE_NAME",
        "RELAYFLOW_PAYLOAD_BUCKET",
        "RELAYFLOW_EVENT_BUS_NAME",
        "RELAYFLOW_SCHEDULE_GROUP_NAME",
        "RELAYFLOW_SCHEDULER_ROLE_ARN",
        "RELAYFLOW_TRIGGER_FUNCTION_ARN",
        "RELAYFLOW_STEP_EVENTS_LOG_GROUP_ARN",
        "RELAYFLOW_TRIGGER_DEAD_LETTER_QUEUE_ARN",
        "RELAYFLOW_AWS_ENDPOINT_URL",
        "RELAYFLOW_SECRET_NAME_PREFIX",
        "RELAYFLOW_TENANT_STEP_ROLE_ARN",
    }
    # The endpoint is the AWS adapter's (blank on AWS; events/env.json sets it for sam local)
    assert variables["RELAYFLOW_AWS_ENDPOINT_URL"] == ""
    assert adapters_aws.LOCAL_ENDPOINT_ENV == "RELAYFLOW_AWS_ENDPOINT_URL"
    for name in relayflow - {"RELAYFLOW_AWS_ENDPOINT_URL"}:
        assert name.removeprefix("RELAYFLOW_").lower() in Settings.model_fields, name


#: The one statement on step-result records (relayflow.steps.idempotency) each function that
#: runs side-effecting steps holds: exact-key item access, no Query or Scan.
STEP_RESULT_ACTIONS = [
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
]


def _step_result_statement() -> dict:
    return {
        "Sid": "StepResultItems",
        "Effect": "Allow",
        "Action": STEP_RESULT_ACTIONS,
        "Resource": DEV.resolve({"Fn::GetAtt": ["RelayflowTable", "Arn"]}),
        "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["TENANT#*#STEP#*"]}},
    }


def test_the_code_function_role_can_only_write_its_own_logs_and_record_step_results():
    code = props(FUNCTIONS["code"])
    assert code["Role"] == {"Fn::GetAtt": ["CodeFunctionRole", "Arn"]}
    assert "Policies" not in code
    role = props("CodeFunctionRole")
    assert not role.get("ManagedPolicyArns")
    assert not role.get("PermissionsBoundary")
    granted = role_statements(TEMPLATE, DEV, "CodeFunctionRole")
    assert granted == [
        {
            "Sid": "WriteOwnLogGroup",
            "Effect": "Allow",
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": (
                "arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/relayflow-dev-code:*"
            ),
        },
        _step_result_statement(),
    ]


def _inline_statements(kind: str) -> list[dict]:
    found = []
    for policy in props(FUNCTIONS[kind]).get("Policies") or []:
        resolved = DEV.resolve(policy)
        if isinstance(resolved, dict) and "Statement" in resolved:
            found.extend(resolved["Statement"])
    return found


@pytest.mark.parametrize("kind", ["condition", "transform"])
def test_expression_functions_may_only_read_and_write_offloaded_payloads(kind):
    policies = props(FUNCTIONS[kind])["Policies"]
    assert len(policies) == 2, "no policy beyond the payload bucket and flow control"
    offload = [s for s in _inline_statements(kind) if s["Sid"] == "PayloadOffload"]
    assert offload == [
        {
            "Sid": "PayloadOffload",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject"],
            "Resource": f"arn:aws:s3:::{DEV.ref('PayloadBucket')}/payloads/*",
        }
    ]


@pytest.mark.parametrize("kind", ["condition", "transform", "tool", "webhook_out", "custom"])
def test_step_functions_reach_only_their_own_items_in_the_table(kind):
    # Given every statement of the step function that names the table
    table = DEV.resolve({"Fn::GetAtt": ["RelayflowTable", "Arn"]})
    on_table = [s for s in _inline_statements(kind) if s.get("Resource") == table]
    policies = props(FUNCTIONS[kind])["Policies"]
    # Then none is a SAM table-wide template, and each is limited by its leading keys
    assert not any("DynamoDBCrudPolicy" in p or "DynamoDBReadPolicy" in p for p in policies)
    assert on_table
    expected = ["TENANT#*#FLOW#*"] + (["TENANT#*#BREAKER#*"] if kind == "tool" else [])
    step_results = [s for s in on_table if s.get("Sid") == "StepResultItems"]
    for statement in on_table:
        if statement in step_results:
            continue
        leading = statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
        assert leading == expected
    # And the functions that act on the world also record their steps' results, nothing more
    if kind in ("tool", "webhook_out", "custom"):
        assert step_results == [_step_result_statement()]
    else:
        assert step_results == []


def test_code_steps_refuse_flow_control():
    from relayflow.validation import validate_data

    _, problems = validate_data(
        {
            "id": "wf",
            "start": "a",
            "steps": {"a": {"type": "code", "code": "return 1", "concurrency": {"limit": 1}}},
        }
    )
    assert [(p.path, p.rule) for p in problems] == [("steps.a.concurrency", "not-applicable")]


@pytest.mark.parametrize("kind", ["tool", "webhook_out", "custom"])
def test_outbound_functions_offload_payloads(kind):
    # (their secrets: tests/deploy/test_template_tenant_identity.py)
    assert any(s.get("Sid") == "PayloadOffload" for s in _inline_statements(kind))


def test_tool_actions_are_scoped_to_the_resource_prefix():
    # The tool's AWS actions are the tenant step identity's (TenantStepRole)
    role = RESOURCES["TenantStepRole"]["Properties"]["Policies"]
    text = json.dumps(DEV.resolve(role))
    for action in (
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:Query",
        "s3:GetObject",
        "s3:PutObject",
        "ses:SendEmail",
        "sqs:SendMessage",
        "sns:Publish",
        "events:PutEvents",
        "lambda:InvokeFunction",
        "states:StartExecution",
    ):
        assert action in text, action
    assert ":table/app-*" in text and "arn:aws:s3:::app-*/*" in text
    assert '"Resource": "*"' not in text
    # The prefix can never be one that reaches Relayflow's own resources
    pattern = re.compile(TEMPLATE["Parameters"]["ToolResourcePrefix"]["AllowedPattern"])
    assert pattern.match("app-") and not pattern.match("relayflow-") and not pattern.match("")


def test_the_table_matches_the_data_model_and_is_protected_in_prod():
    table = props("RelayflowTable")
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    (gsi,) = table["GlobalSecondaryIndexes"]
    assert gsi["IndexName"] == "GSI1"
    assert [k["AttributeName"] for k in gsi["KeySchema"]] == ["gsi1pk", "gsi1sk"]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["SSESpecification"] == {"SSEEnabled": True, "SSEType": "KMS"}
    assert DEV.resolve(table["DeletionProtectionEnabled"]) is False
    assert PROD.resolve(table["DeletionProtectionEnabled"]) is True
    assert RESOURCES["RelayflowTable"]["DeletionPolicy"] == "Retain"


def test_the_payload_bucket_is_private_encrypted_tls_only_and_expiring():
    bucket = props("PayloadBucket")
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    rules = {r["Id"]: r for r in bucket["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-payloads"]["Prefix"] == "payloads/"
    assert rules["expire-payloads"]["ExpirationInDays"] == {"Ref": "PayloadExpirationDays"}
    (deny,) = DEV.resolve(props("PayloadBucketPolicy")["PolicyDocument"])["Statement"]
    assert deny["Effect"] == "Deny"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": False}}


def test_bus_schedule_group_and_scheduler_role():
    assert DEV.ref("EventBus") == "relayflow-dev"
    assert DEV.ref("ScheduleGroup") == "relayflow-dev"
    trust = DEV.resolve(props("SchedulerRole")["AssumeRolePolicyDocument"])
    assert trust["Statement"][0]["Principal"] == {"Service": "scheduler.amazonaws.com"}
    granted = role_statements(TEMPLATE, DEV, "SchedulerRole")
    assert [s["Action"] for s in granted] == ["lambda:InvokeFunction", "sqs:SendMessage"]
    assert allows(
        granted, "lambda:InvokeFunction", DEV.resolve({"Fn::GetAtt": ["TriggerFunction", "Arn"]})
    )
    # And it may put what it could not deliver in the trigger queue, and nowhere else
    queue = DEV.resolve({"Fn::GetAtt": ["TriggerDeadLetterQueue", "Arn"]})
    assert allows(granted, "sqs:SendMessage", queue)
    assert not allows(granted, "sqs:SendMessage", queue.replace("trigger", "recorder"))


def test_the_control_api_is_throttled_traced_logged_and_authorized_by_default():
    api = props("RelayflowApi")
    assert api["TracingEnabled"] is True
    assert api["Auth"]["DefaultAuthorizer"] == "ApiKeyAuthorizer"
    authorizer = api["Auth"]["Authorizers"]["ApiKeyAuthorizer"]
    assert authorizer["FunctionPayloadType"] == "REQUEST"
    assert authorizer["FunctionArn"] == {"Fn::GetAtt": ["AuthorizerFunction", "Arn"]}
    (throttle,) = api["MethodSettings"]
    assert throttle["ThrottlingRateLimit"] == {"Ref": "ApiRateLimit"}
    assert throttle["ThrottlingBurstLimit"] == {"Ref": "ApiBurstLimit"}
    condition, access, otherwise = api["AccessLogSetting"]["Fn::If"]
    assert condition == "WriteApiAccessLogs" and otherwise == {"Ref": "AWS::NoValue"}
    assert access["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    fields = json.loads(access["Format"].replace("\n", ""))
    assert {"requestId", "status", "tenant", "path"} <= set(fields)


def test_only_the_api_description_is_public():
    events = props("ApiFunction")["Events"]
    public = {e["Properties"]["Path"] for e in events.values() if "Auth" in e["Properties"]}
    # and the guest approval page, whose signed link is checked by the function
    assert public == {"/openapi.json", "/swagger", "/guest/approvals/{id}"}
    assert all(
        e["Properties"]["Auth"] == {"Authorizer": "NONE"}
        for e in events.values()
        if "Auth" in e["Properties"]
    )
    proxy = [e for e in events.values() if e["Properties"]["Path"] == "/{proxy+}"]
    assert proxy and "Auth" not in proxy[0]["Properties"]
    # webhook deliveries are public too: each is checked against its own signing secret
    (delivery,) = props("WebhookFunction")["Events"].values()
    assert delivery["Properties"]["Path"] == "/hooks/{slug}"
    assert delivery["Properties"]["Method"] == "POST"
    assert delivery["Properties"]["Auth"] == {"Authorizer": "NONE"}


@pytest.mark.parametrize(
    ("response", "status", "code"),
    [
        ("UNAUTHORIZED", 401, "unauthorized"),
        ("ACCESS_DENIED", 403, "forbidden"),
        ("REQUEST_TOO_LARGE", 413, "payload_too_large"),
        ("THROTTLED", 429, "too_many_requests"),
    ],
)
def test_api_gateway_refusals_answer_in_the_error_model(response, status, code):
    gateway = props("RelayflowApi")["GatewayResponses"][response]
    assert gateway["StatusCode"] == status
    body = json.loads(gateway["ResponseTemplates"]["application/json"])
    assert body["code"] == code and set(body) == {"code", "message", "details"}


def test_the_api_manages_only_its_stage_state_machines_and_passes_only_their_role():
    statements = _inline_statements("api")
    sm = "arn:aws:states:us-east-1:123456789012:stateMachine:relayflow-dev-acme-orders"
    assert allows(statements, "states:CreateStateMachine", sm)
    assert allows(statements, "states:StartExecution", f"{sm}:live")
    assert not allows(statements, "states:CreateStateMachine", sm.replace("-dev-", "-prod-"))
    assert allows(
        statements,
        "states:StopExecution",
        "arn:aws:states:us-east-1:123456789012:execution:relayflow-dev-acme-orders:run1",
    )
    # it may hand exactly two roles, and its stage's tenant roles, to exactly their services
    passed = {
        s["Resource"]: s["Condition"]["StringEquals"]["iam:PassedToService"]
        for s in statements
        if s["Action"] == "iam:PassRole"
    }
    assert passed == {
        DEV.resolve({"Fn::GetAtt": ["StateMachineRole", "Arn"]}): "states.amazonaws.com",
        DEV.resolve({"Fn::GetAtt": ["SchedulerRole", "Arn"]}): "scheduler.amazonaws.com",
        "arn:aws:iam::123456789012:role/relayflow-dev-tenant-*": "states.amazonaws.com",
    }
    env = props("ApiFunction")["Environment"]["Variables"]
    assert set(env) <= {f"RELAYFLOW_{name.upper()}" for name in Settings.model_fields}
    arns = json.loads(DEV.resolve(env["RELAYFLOW_FUNCTION_ARNS"]))
    assert set(arns) == set(naming.STEP_FUNCTIONS)


def test_the_authorizer_only_reads_api_keys_by_their_hash():
    statements = _inline_statements("authorizer")
    table = DEV.resolve({"Fn::GetAtt": ["RelayflowTable", "Arn"]})
    assert allows_item(statements, "dynamodb:GetItem", table, "KEY#0123abcd")
    for action in ("dynamodb:Scan", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:BatchGetItem"):
        assert not allows_item(statements, action, table, "KEY#0123abcd"), action
    assert not allows_item(statements, "dynamodb:GetItem", table, "TENANT#acme#RUN#r1")


def test_the_recorder_hears_only_this_stage_and_keeps_what_it_cannot_take():
    event = props("RecorderFunction")["Events"]["StatusChange"]["Properties"]
    pattern = DEV.resolve(event["Pattern"])
    assert pattern["source"] == ["aws.states"]
    assert pattern["detail"]["stateMachineArn"] == [
        {"prefix": "arn:aws:states:us-east-1:123456789012:stateMachine:relayflow-dev-"}
    ]
    assert event["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["RecorderDeadLetterQueue", "Arn"]}}
    statements = _inline_statements("recorder")
    assert allows(
        statements,
        "states:GetExecutionHistory",
        "arn:aws:states:us-east-1:123456789012:execution:relayflow-dev-acme-orders:run1",
    )
    assert not allows(statements, "states:StopExecution", "*")


def test_the_recorder_can_send_failure_notifications_and_read_only_its_tenants_secrets():
    # Given the recorder's policies and environment
    statements = _inline_statements("recorder")
    policies = props("RecorderFunction")["Policies"]
    env = props("RecorderFunction")["Environment"]["Variables"]
    # Then it sends no email unless an identity is configured, and then from that one only
    identity = "arn:aws:ses:us-east-1:123456789012:identity/example.com"
    assert not allows(statements, "ses:SendEmail", identity)
    configured = Resolver(TEMPLATE, Stage="dev", NotificationEmailIdentity="example.com")
    with_identity = [
        statement
        for policy in configured.resolve(policies)
        if isinstance(policy, dict) and "Statement" in policy
        for statement in policy["Statement"]
    ]
    assert allows(with_identity, "ses:SendEmail", identity)
    other = "arn:aws:ses:us-east-1:123456789012:identity/attacker.example"
    assert not allows(with_identity, "ses:SendEmail", other)
    # And reads the workflow's tenant's signing secrets as that tenant only
    # (tests/deploy/test_template_tenant_identity.py)
    assert any(s.get("Sid") == "ActForATenant" for s in statements)
    # And its default sender is a setting
    assert env["RELAYFLOW_NOTIFICATION_SENDER"] == {"Ref": "NotificationSender"}
    assert "notification_sender" in Settings.model_fields


def test_the_dashboard_is_json_and_draws_the_metrics_under_the_names_the_code_emits():
    body = json.loads(DEV.resolve(props("Dashboard")["DashboardBody"]))
    text = json.dumps(body)
    for metric in (
        "StepDuration",
        "StepSucceeded",
        "StepFailed",
        "StepThrottled",
        "BreakerTrips",
        "DlqDepth",
        "RunFailed",
    ):
        assert metric in text, metric
    assert f'Namespace=\\"{observability.DEFAULT_NAMESPACE}\\"' in text
    assert 'Stage=\\"dev\\"' in text
    assert all("properties" in w for w in body["widgets"])


def test_the_dlq_alarm_watches_the_dimensions_record_metric_emits():
    alarm = DEV.resolve(props("DlqDepthAlarm"))
    assert alarm["Namespace"] == observability.DEFAULT_NAMESPACE
    dimensions = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
    assert dimensions == {"service": observability.SERVICE, "Stage": "dev"}


@pytest.mark.parametrize(
    "alarms",
    [
        ("FunctionErrorsAlarm", "PlatformErrorsAlarm", "AiFunctionErrorsAlarm"),
        ("FunctionThrottlesAlarm", "PlatformThrottlesAlarm", "AiFunctionThrottlesAlarm"),
    ],
)
def test_function_alarms_cover_every_function(alarms):
    watched = set()
    for alarm in alarms:
        queries = DEV.resolve(props(alarm)["Metrics"])
        assert len(queries) <= 10  # CloudWatch's limit for a metric math alarm
        watched |= {
            q["MetricStat"]["Metric"]["Dimensions"][0]["Value"]
            for q in queries
            if "MetricStat" in q
        }
    assert watched == {f"relayflow-dev-{kind}" for kind in FUNCTIONS}


def test_saved_queries_read_every_function_log_group():
    def groups(kinds):
        return {DEV.ref(props(FUNCTIONS[k])["LoggingConfig"]["LogGroup"]["Ref"]) for k in kinds}

    # a run's log lines come from every function; step metrics only from step functions
    assert groups(FUNCTIONS) <= set(DEV.resolve(props("RunLogLinesQuery")["LogGroupNames"]))
    for query in ("SlowestStepsQuery", "StepFailuresQuery"):
        names = set(DEV.resolve(props(query)["LogGroupNames"]))
        assert groups(naming.STEP_FUNCTIONS) <= names, query
    assert "run_id" in props("RunLogLinesQuery")["QueryString"]
    assert "sort StepDuration desc" in props("SlowestStepsQuery")["QueryString"]


def test_outputs_export_what_the_control_plane_needs_and_list_every_function():
    outputs = TEMPLATE["Outputs"]
    for name in ("StateMachineRoleArn", "StateMachineLogGroupArn", "SchedulerRoleArn"):
        assert "Export" in outputs[name], name
    for name in ("TableName", "EventBusName", "PayloadBucketName", "LayerArn", "DashboardUrl"):
        assert name in outputs, name
    for logical_id in FUNCTIONS.values():
        assert outputs[f"{logical_id}Arn"]["Value"] == {"Fn::GetAtt": [logical_id, "Arn"]}


def _overrides(text: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_samconfig_environments_pass_valid_parameters(env):
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    deploy = config[env]["deploy"]["parameters"]
    assert deploy["stack_name"] == f"relayflow-{env}"
    overrides = _overrides(deploy["parameter_overrides"])
    assert overrides["Stage"] == env
    parameters = TEMPLATE["Parameters"]
    for name, value in overrides.items():
        assert name in parameters, f"samconfig {env} sets unknown parameter {name}"
        spec = parameters[name]
        if "AllowedValues" in spec:
            assert value in [str(v) for v in spec["AllowedValues"]], (name, value)
        if "AllowedPattern" in spec:
            assert re.fullmatch(spec["AllowedPattern"], value), (name, value)
