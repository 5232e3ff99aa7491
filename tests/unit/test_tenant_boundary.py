"""The tenant boundary in code: secret names scoped to the tenant's folder, Relayflow's own
resources recognised in every spelling, and the one rule for events on the Relayflow bus."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from relayflow.settings import override_settings
from relayflow.tenancy import TenantBoundary, acting_for, acting_tenant, secret_name_problem
from relayflow.tools.guard import check_tool_call, own_resource, resource_name
from relayflow.tools.secrets import resolve_secret, secret_path
from relayflow.triggers.publish import ReservedEvent, tenant_event

# ----------------------------------------------------------------------------- secrets


@pytest.mark.parametrize(
    ("name", "source", "full"),
    [
        ("stripe", "secretsmanager", "relayflow/local/acme/stripe"),
        ("billing/token", "secretsmanager", "relayflow/local/acme/billing/token"),
        ("relayflow/local/acme/stripe", "secretsmanager", "relayflow/local/acme/stripe"),
        ("stripe", "ssm", "/relayflow/local/acme/stripe"),
        ("/relayflow/local/acme/billing/key", "ssm", "/relayflow/local/acme/billing/key"),
        ("relayflow/local/acme/billing/key", "ssm", "/relayflow/local/acme/billing/key"),
        # Relayflow's own key's name is just a name inside the tenant's folder
        (
            "relayflow-internal/local/key",
            "secretsmanager",
            "relayflow/local/acme/relayflow-internal/local/key",
        ),
    ],
)
def test_a_name_resolves_inside_the_tenants_folder(name, source, full):
    assert secret_path(name, "acme", source) == full


@pytest.mark.parametrize(
    "name",
    [
        "relayflow/local/globex/stripe",  # another tenant's folder
        "relayflow/local/acme-corp/stripe",  # a tenant whose id starts like acme's
        "relayflow/local/stripe",  # under the prefix, in no tenant's folder
        "../globex/stripe",
        "billing/../../globex/stripe",
        "relayflow/local/acme/../globex/stripe",  # the own folder, then out of it
        "/relayflow/local/globex/stripe",
        "/etc/key",
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:relayflow/local/globex/x",
        "a//b",
        "./stripe",
        "relayflow/dev/acme/stripe",  # the same tenant's folder of another stage
        "relayflow/acme/stripe",  # the folder of the layout before per-stage prefixes
        "/relayflow/prod/acme/stripe",
    ],
)
def test_a_name_reaching_outside_the_tenant_is_refused(name):
    with pytest.raises(TenantBoundary) as info:
        secret_path(name, "acme")
    assert info.value.details == {"rule": "tenant-boundary", "secret": name}
    assert info.value.error_name == "Relayflow.InvalidArgs"


@pytest.mark.parametrize("stage", ["dev", "prod", "local"])
def test_each_stage_keeps_its_tenants_secrets_in_a_folder_of_its_own(stage):
    # Given a stack of this stage with the default (unset) SecretNamePrefix
    with override_settings(stage=stage, secret_name_prefix=None):
        # Then a tenant's secrets are relayflow/<stage>/<tenant>/…
        assert secret_path("stripe", "acme") == f"relayflow/{stage}/acme/stripe"
        assert secret_path("stripe", "acme", "ssm") == f"/relayflow/{stage}/acme/stripe"
        # And the same tenant's folder of any other stage is refused, naming the own folder
        for other in {"dev", "prod", "local"} - {stage}:
            with pytest.raises(TenantBoundary, match=f"'relayflow/{stage}/acme/'"):
                secret_path(f"relayflow/{other}/acme/stripe", "acme")


def test_an_explicit_prefix_is_used_as_given_on_every_stage():
    # The operator's choice (the layout before per-stage prefixes): stages share the folder
    with override_settings(stage="dev", secret_name_prefix="relayflow/"):
        assert secret_path("stripe", "acme") == "relayflow/acme/stripe"


def test_another_prefix_moves_every_tenants_folder():
    with override_settings(secret_name_prefix="teams-"):
        assert secret_path("stripe", "acme") == "teams-acme/stripe"
        assert secret_path("stripe", "acme", "ssm") == "/teams-acme/stripe"
        with pytest.raises(TenantBoundary):
            secret_path("teams-globex/stripe", "acme")


@pytest.mark.parametrize(
    ("name", "ok"),
    [("stripe", True), ("a/b.c@d=e+f-g_h", True), ("..", False), ("a b", False), ("", False)],
)
def test_the_definition_rule_needs_no_tenant(name, ok):
    assert (secret_name_problem(name) is None) is ok


def test_a_secret_with_no_acting_tenant_is_refused_before_any_read():
    # No step handler opened a scope: nothing is read with the function's own reach
    with pytest.raises(TenantBoundary):
        acting_tenant()
    with pytest.raises(TenantBoundary):
        resolve_secret({"name": "stripe"})
    with acting_for("acme"):
        assert acting_tenant() == "acme"
        with acting_for(None), pytest.raises(TenantBoundary):
            acting_tenant()
        assert acting_tenant() == "acme"


# ----------------------------------------------------------------------------- resources


@pytest.mark.parametrize(
    ("kind", "identifier"),
    [
        ("table", "relayflow"),
        ("table", "arn:aws:dynamodb:us-east-1:123456789012:table/relayflow"),
        ("table", "arn:aws:dynamodb:us-east-1:123456789012:table/relayflow/index/GSI1"),
        ("table", "relayflow-dev-RelayflowTable-1X2Y"),
        ("bucket", "relayflow-payloads"),
        ("bucket", "arn:aws:s3:::relayflow-payloads"),
        ("bucket", "arn:aws:s3:::relayflow-payloads/payloads/x"),
        ("function", "relayflow-code"),
        ("function", "relayflow-code:live"),
        ("function", "123456789012:function:relayflow-code"),
        ("function", "123456789012:function:relayflow-code:7"),
        ("function", "arn:aws:lambda:us-east-1:123456789012:function:relayflow-dev-tool"),
        ("function", " Relayflow-Code "),
        ("state_machine", "arn:aws:states:us-east-1:123456789012:stateMachine:relayflow-dev-a_w"),
        ("state_machine", "arn:aws:states:us-east-1:123456789012:stateMachine:relayflow-w:live"),
        ("bus", "relayflow"),
        ("bus", "arn:aws:events:us-east-1:123456789012:event-bus/relayflow"),
        ("queue", "https://sqs.us-east-1.amazonaws.com/123456789012/relayflow-dev-trigger-dlq"),
        ("topic", "arn:aws:sns:us-east-1:123456789012:relayflow-dev-alarms"),
        ("group", "relayflow"),
    ],
)
def test_relayflows_own_resources_are_recognised_in_every_spelling(kind, identifier):
    assert own_resource(kind, identifier), resource_name(kind, identifier)


@pytest.mark.parametrize(
    ("kind", "identifier"),
    [
        ("table", "app-orders"),
        ("table", "arn:aws:dynamodb:us-east-1:123456789012:table/app-orders"),
        ("function", "app-double"),
        ("function", "123456789012:function:app-double:live"),
        ("state_machine", "arn:aws:states:us-east-1:123456789012:stateMachine:app-flow"),
        ("bus", "relayflow-samples"),  # one Relayflow bus: any other name is the tenant's
        ("bus", "default"),
        ("bucket", "app-invoices"),
    ],
)
def test_a_tenants_resources_are_not_relayflows(kind, identifier):
    assert not own_resource(kind, identifier)


def test_the_configured_names_are_relayflows_whatever_they_are():
    with override_settings(table_name="prod-Table-9", event_bus_name="prod-bus"):
        assert own_resource("table", "prod-Table-9")
        assert own_resource("bus", "arn:aws:events:eu-west-1:1:event-bus/prod-bus")
        assert not own_resource("bus", "relayflow")


def test_a_tool_call_on_relayflows_resource_is_refused_naming_the_field():
    args = SimpleNamespace(function="123456789012:function:relayflow-code")
    with pytest.raises(TenantBoundary) as info:
        check_tool_call("aws.lambda.invoke", args)
    assert info.value.details["field"] == "function"
    # put_events on the Relayflow bus is the stamped path, not a refusal
    assert check_tool_call("aws.events.put_events", SimpleNamespace(bus="relayflow")) is True
    assert check_tool_call("aws.events.put_events", SimpleNamespace(bus="shop")) is False
    assert check_tool_call("aws.ses.send_email", SimpleNamespace()) is False


# ----------------------------------------------------------------------------- events


def test_a_tenants_event_has_its_tenant_stamped_over_any_claim():
    detail = tenant_event("mallory", "shop.orders", "order.created", {"relayflow_tenant": "acme"})
    assert detail == {"relayflow_tenant": "mallory"}


@pytest.mark.parametrize(
    ("source", "detail_type", "field"),
    [
        ("relayflow", "x", "source"),
        ("relayflow.runs", "x", "source"),
        ("relayflow-x", "x", "source"),
        (" RelayFlow ", "x", "source"),
        ("aws.s3", "x", "source"),
        ("shop", "relayflow.run.failed", "detail_type"),
        ("shop", "Relayflow.Run.Succeeded", "detail_type"),
    ],
)
def test_reserved_sources_and_detail_types_are_refused(source, detail_type, field):
    with pytest.raises(ReservedEvent) as info:
        tenant_event("acme", source, detail_type, {})
    assert info.value.field == field


def test_a_dry_run_refuses_what_the_real_call_would():
    from relayflow.tools.catalogue import would_call

    forged = {"bus": "relayflow", "source": "relayflow", "detail_type": "relayflow.run.failed"}
    with pytest.raises(TenantBoundary) as info:
        would_call("aws.events.put_events", forged, doc={})
    assert info.value.details["field"] == "source"
    with pytest.raises(TenantBoundary):
        would_call(
            "aws.lambda.invoke", {"function": "123456789012:function:relayflow-code"}, doc={}
        )
    # A tenant's own event is recorded, not refused
    own = {"bus": "relayflow", "source": "shop.orders", "detail_type": "order.created"}
    assert would_call("aws.events.put_events", own, doc={})
