"""template.yaml and samconfig.toml: no event lost between services, guards without gaps.

* every asynchronous hop has a place for failures (on-failure destinations, DeadLetterConfig
  and RetryPolicy, an alarm per queue), including the targets the control plane creates;
* the prefix parameters refuse Relayflow's own names (their patterns, tried like
  CloudFormation does, on the names they must refuse and those they must accept);
* the code function has reserved concurrency; grants are stage-scoped; account-wide API
  Gateway logging is off unless prod asks for it; the dashboard shows every alarm.
"""

from __future__ import annotations

import json
import re
import tomllib

import pytest
from sam_template import ROOT, Resolver, allows
from stack import DEV, FUNCTIONS, RESOURCES, TEMPLATE, props

from relayflow.triggers.bus import RuleSpec
from relayflow.triggers.scheduler import ScheduleSpec

#: Functions invoked asynchronously (EventBridge rules, Scheduler), and their queue.
ASYNC_FUNCTIONS = {
    "recorder": "RecorderDeadLetterQueue",
    "trigger": "TriggerDeadLetterQueue",
    "maintenance": "MaintenanceDeadLetterQueue",
}
QUEUES = sorted(k for k, v in RESOURCES.items() if v["Type"] == "AWS::SQS::Queue")


# ----------------------------------------------------------------------------- lost events


@pytest.mark.parametrize(("kind", "queue"), sorted(ASYNC_FUNCTIONS.items()))
def test_every_asynchronously_invoked_function_sends_its_failures_to_a_queue(kind, queue):
    config = props(FUNCTIONS[kind])["EventInvokeConfig"]
    on_failure = config["DestinationConfig"]["OnFailure"]
    assert on_failure == {"Type": "SQS", "Destination": {"Fn::GetAtt": [queue, "Arn"]}}
    assert 0 <= config["MaximumRetryAttempts"] <= 2


def test_only_those_functions_are_invoked_asynchronously():
    # A function with an EventBridge or Scheduler event (or the trigger, which the control
    # plane's schedules and rules call) is asynchronous: each has a destination.
    asynchronous = {
        kind
        for kind, logical_id in FUNCTIONS.items()
        if any(
            e["Type"] in ("EventBridgeRule", "ScheduleV2", "Schedule", "CloudWatchEvent", "SQS")
            for e in (props(logical_id).get("Events") or {}).values()
        )
    } | {"trigger"}
    assert asynchronous == set(ASYNC_FUNCTIONS)


@pytest.mark.parametrize(
    ("kind", "event"), [("recorder", "StatusChange"), ("maintenance", "EveryMinute")]
)
def test_every_rule_and_schedule_of_the_template_has_a_retry_policy_and_a_dead_letter_queue(
    kind, event
):
    spec = props(FUNCTIONS[kind])["Events"][event]["Properties"]
    assert spec["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [ASYNC_FUNCTIONS[kind], "Arn"]}}
    assert "MaximumRetryAttempts" in spec["RetryPolicy"]
    assert "MaximumEventAgeInSeconds" in spec["RetryPolicy"]


def test_schedules_and_rules_the_control_plane_creates_have_retries_and_a_dead_letter_queue():
    # Given the trigger queue every function passes to what it creates (Globals)
    env = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    assert env["RELAYFLOW_TRIGGER_DEAD_LETTER_QUEUE_ARN"] == {
        "Fn::GetAtt": ["TriggerDeadLetterQueue", "Arn"]
    }
    queue = "arn:aws:sqs:us-east-1:123456789012:relayflow-dev-trigger-dlq"
    # When a schedule and a rule target are built with it
    schedule = ScheduleSpec(
        name="s",
        expression="cron(0 9 * * ? *)",
        timezone="UTC",
        target_arn="arn:fn",
        role_arn="arn:role",
        input="{}",
        description="d",
        dead_letter_arn=queue,
    ).request("relayflow-dev")
    # Then both keep what they could not deliver in that queue, after their retries
    assert schedule["Target"]["DeadLetterConfig"] == {"Arn": queue}
    assert schedule["Target"]["RetryPolicy"]["MaximumRetryAttempts"] >= 1
    assert (
        RuleSpec("r", {}, "arn:fn", "<event>", "d", dead_letter_arn=queue).dead_letter_arn == queue
    )
    # And the queue accepts the stage bus's rules, and Scheduler sends with its role
    policy = DEV.resolve(props("TriggerDeadLetterQueuePolicy")["PolicyDocument"])
    (events,) = [s for s in policy["Statement"] if s["Sid"] == "EventBridgeDeadLetters"]
    assert events["Condition"]["ArnLike"]["aws:SourceArn"].endswith(":rule/relayflow-dev/*")


def test_the_recorder_queue_takes_only_the_recorder_rules_dead_letters():
    policy = DEV.resolve(props("RecorderDeadLetterQueuePolicy")["PolicyDocument"])
    (events,) = [s for s in policy["Statement"] if s["Sid"] == "EventBridgeDeadLetters"]
    rule = DEV.resolve(
        props("RecorderFunction")["Events"]["StatusChange"]["Properties"]["RuleName"]
    )
    assert events["Condition"]["ArnEquals"]["aws:SourceArn"].endswith(f":rule/{rule}")


@pytest.mark.parametrize("queue", QUEUES)
def test_every_queue_is_encrypted_tls_only_kept_14_days_and_watched_by_an_alarm(queue):
    p = props(queue)
    assert p["SqsManagedSseEnabled"] is True
    assert p["MessageRetentionPeriod"] == 1209600
    policies = [v["Properties"] for v in RESOURCES.values() if v["Type"] == "AWS::SQS::QueuePolicy"]
    (policy,) = [pol for pol in policies if pol["Queues"] == [{"Ref": queue}]]
    assert any(
        s["Sid"] == "TlsOnly" and s["Effect"] == "Deny"
        for s in policy["PolicyDocument"]["Statement"]
    )
    alarms = [
        v["Properties"]
        for v in RESOURCES.values()
        if v["Type"] == "AWS::CloudWatch::Alarm"
        and v["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"
        and v["Properties"]["Dimensions"][0]["Value"] == {"Fn::GetAtt": [queue, "QueueName"]}
    ]
    assert len(alarms) == 1
    assert alarms[0]["Threshold"] == 1 and alarms[0]["AlarmActions"] == [{"Ref": "AlarmTopic"}]


def test_the_dashboard_shows_every_alarm_the_platform_functions_api_gateway_and_the_queues():
    body = json.loads(DEV.resolve(props("Dashboard")["DashboardBody"]))
    text = json.dumps(body)
    alarms = [k for k, v in RESOURCES.items() if v["Type"] == "AWS::CloudWatch::Alarm"]
    (widget,) = [w for w in body["widgets"] if w["type"] == "alarm"]
    assert sorted(widget["properties"]["alarms"]) == sorted(DEV.get_att(a, "Arn") for a in alarms)
    for kind in FUNCTIONS:
        assert f"relayflow-dev-{kind}" in text, kind
    assert "AWS/ApiGateway" in text and "relayflow-dev" in text
    for queue in QUEUES:
        assert DEV.ref(queue) in text, queue


# ----------------------------------------------------------------------------- guards


def _accepts(parameter: str, value: str) -> bool:
    return re.fullmatch(TEMPLATE["Parameters"][parameter]["AllowedPattern"], value) is not None


@pytest.mark.parametrize(
    "value",
    [
        "rel",
        "rela",
        "relay",
        "relayf",
        "relayfl",
        "relayflo",
        "relayflow",
        "relayflow-",
        "relayflow-dev-",
        "relayflow-prod-orders",
    ],
)
def test_the_tool_prefix_refuses_relayflows_own_names_and_their_beginnings(value):
    assert not _accepts("ToolResourcePrefix", value)
    # (and a name that could reach Relayflow's resources is exactly one the prefix covers)
    assert "relayflow-dev-tool".startswith(value) or value.startswith("relayflow")


@pytest.mark.parametrize("value", ["app-", "app-dev-", "release-", "relays-", "orders"])
def test_the_tool_prefix_accepts_other_names(value):
    assert _accepts("ToolResourcePrefix", value)


@pytest.mark.parametrize(
    "value",
    [
        "rel",
        "relay",
        "relayflow",
        "relayflow-",
        "relayflow-int",
        "relayflow-internal",
        "relayflow-internal/",
        "relayflow-internal/dev/",
    ],
)
def test_the_secret_prefix_refuses_every_beginning_of_the_internal_secrets(value):
    assert not _accepts("SecretNamePrefix", value)
    assert "relayflow-internal/dev/approval-signing-key".startswith(value)


@pytest.mark.parametrize("value", ["", "relayflow/", "relayflow/prod/", "app/secrets/", "/team/"])
def test_the_secret_prefix_accepts_other_names(value):
    assert _accepts("SecretNamePrefix", value)


def test_the_defaults_pass_their_own_patterns():
    for name, spec in TEMPLATE["Parameters"].items():
        if "AllowedPattern" in spec:
            assert re.fullmatch(spec["AllowedPattern"], str(spec["Default"])), name


def test_the_code_function_has_reserved_concurrency_from_a_parameter():
    assert props("CodeFunction")["ReservedConcurrentExecutions"] == {
        "Ref": "CodeReservedConcurrency"
    }
    parameter = TEMPLATE["Parameters"]["CodeReservedConcurrency"]
    assert parameter["Default"] >= 1 and parameter["MinValue"] == 1


@pytest.mark.parametrize("kind", ["approval", "recorder"])
def test_email_is_sent_only_from_the_configured_identity(kind):
    identity = "arn:aws:ses:us-east-1:123456789012:identity/"
    for resolver, allowed in (
        (DEV, False),
        (Resolver(TEMPLATE, Stage="dev", NotificationEmailIdentity="example.com"), True),
    ):
        statements = [
            s
            for p in resolver.resolve(props(FUNCTIONS[kind])["Policies"])
            if isinstance(p, dict) and "Statement" in p
            for s in p["Statement"]
        ]
        assert allows(statements, "ses:SendEmail", f"{identity}example.com") is allowed
        assert not allows(statements, "ses:SendEmail", f"{identity}other.example")


@pytest.mark.parametrize("kind", ["webhook", "approval"])
def test_secret_readers_read_a_tenants_secrets_only_as_that_tenant(kind):
    # SSM SecureStrings, Secrets Manager and the customer key are TenantStepRole's
    # (tests/deploy/test_template_tenant_identity.py); the function only assumes it
    policies = DEV.resolve(props(FUNCTIONS[kind])["Policies"])
    text = json.dumps(policies)
    assert "SSMParameterReadPolicy" not in text and "kms:Decrypt" not in text
    assert "sts:AssumeRole" in text and "sts:TagSession" in text


def test_every_relayflow_grant_is_scoped_to_its_stage():
    # No resource of any role names relayflow-* (every stage's) instead of relayflow-<stage>-*
    text = json.dumps(DEV.resolve({k: v for k, v in RESOURCES.items() if k != "Dashboard"}))
    assert not re.findall(r":(?:stateMachine|execution|function|rule|schedule):relayflow-\*", text)


def test_api_gateway_account_logging_is_off_by_default_and_in_dev():
    assert TEMPLATE["Parameters"]["ConfigureApiGatewayLogging"]["Default"] == "false"
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    dev = config["dev"]["deploy"]["parameters"]["parameter_overrides"]
    prod = config["prod"]["deploy"]["parameters"]["parameter_overrides"]
    assert 'ConfigureApiGatewayLogging="true"' not in dev
    assert 'ConfigureApiGatewayLogging="true"' in prod


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_alarm_email_is_part_of_each_environment(env):
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    assert "AlarmEmail=" in config[env]["deploy"]["parameters"]["parameter_overrides"]


def test_admission_deadline_schedules_keep_what_scheduler_could_not_deliver(monkeypatch):
    # Given the stage's schedule group and trigger queue, as the template sets them
    from moto import mock_aws

    from relayflow.control.admission import Deferrals, deferral_name
    from relayflow.settings import override_settings

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    queue = "arn:aws:sqs:us-east-1:123456789012:relayflow-dev-trigger-dlq"
    with (
        mock_aws(),
        override_settings(schedule_group_name="relayflow-dev", trigger_dead_letter_queue_arn=queue),
    ):
        import boto3

        scheduler = boto3.client("scheduler", region_name="us-east-1")
        scheduler.create_schedule_group(Name="relayflow-dev")
        # When a debounce deadline is deferred
        name = deferral_name("acme", "wf", "debounce")
        Deferrals(scheduler).defer(name, 1_900_000_000, {"action": "debounce"})
        found = scheduler.get_schedule(Name=name, GroupName="relayflow-dev")
    # Then its one-time schedule sends what it could not deliver to the trigger queue
    assert found["Target"]["DeadLetterConfig"] == {"Arn": queue}
    assert found["ActionAfterCompletion"] == "DELETE"
    # And the queue's alarm says so
    alarm = props("TriggerQueueAlarm")
    assert "deadlines" in alarm["AlarmDescription"]
