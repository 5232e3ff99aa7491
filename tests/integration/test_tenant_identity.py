"""The tenant identity adapter (relayflow.adapters.tenant_aws): with TenantStepRole configured,
a step's secrets and aws.* calls go through STS AssumeRole with the relayflow-tenant session
tag, one session per tenant, renewed before it expires; without it, the process's clients."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from relayflow_testing import moto_table

from relayflow.adapters import tenant_aws
from relayflow.adapters.aws import client
from relayflow.settings import override_settings
from relayflow.tenancy import acting_for
from relayflow.tools import run_tool
from relayflow.tools.secrets import clear_secret_cache, resolve_secret

pytestmark = pytest.mark.integration
ROLE = "arn:aws:iam::123456789012:role/relayflow-dev-step-identity"
DOC = {"run": {"id": "r1", "workflow_id": "wf", "tenant": "acme"}, "trigger": {}, "steps": {}}


class RecordingSts:
    """STS that records each AssumeRole and hands out credentials expiring at ``expires``."""

    def __init__(self, expires: dt.datetime) -> None:
        self.calls: list[dict[str, Any]] = []
        self.expires = expires

    def assume_role(self, **params: Any) -> dict[str, Any]:
        self.calls.append(params)
        n = len(self.calls)
        return {
            "Credentials": {
                "AccessKeyId": f"ASIA{n:016d}",
                "SecretAccessKey": "secret",
                "SessionToken": f"token-{n}",
                "Expiration": self.expires,
            }
        }


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with moto_table(monkeypatch), override_settings(tenant_step_role_arn=ROLE):
        tenant_aws.reset_tenant_sessions()
        clear_secret_cache()
        yield
        tenant_aws.reset_tenant_sessions()
        clear_secret_cache()


def later(minutes: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(minutes=minutes)


def access_key(made: Any) -> str:
    return str(made._request_signer._credentials.access_key)


def test_each_tenant_gets_its_own_tagged_session_reused_until_near_expiry(aws, monkeypatch):
    sts = RecordingSts(later(60))
    monkeypatch.setattr(tenant_aws, "client", lambda service: sts)
    # When acme's and globex's steps ask for clients, twice each
    acme = tenant_aws.tenant_client("dynamodb", "acme")
    assert tenant_aws.tenant_client("dynamodb", "acme") is acme
    globex = tenant_aws.tenant_client("dynamodb", "globex")
    # Then STS was asked once per tenant, with the tenant as the one session tag
    assert [c["Tags"] for c in sts.calls] == [
        [{"Key": "relayflow-tenant", "Value": "acme"}],
        [{"Key": "relayflow-tenant", "Value": "globex"}],
    ]
    assert {c["RoleArn"] for c in sts.calls} == {ROLE}
    assert [c["RoleSessionName"] for c in sts.calls] == ["relayflow-acme", "relayflow-globex"]
    # And each client signs with its own tenant's credentials
    assert access_key(acme) != access_key(globex)
    # When acme's session is within the refresh margin of its end, it is assumed again
    sts.expires = later(1)
    tenant_aws.reset_tenant_sessions()
    tenant_aws.tenant_client("dynamodb", "acme")
    tenant_aws.tenant_client("dynamodb", "acme")
    assert len(sts.calls) == 4


def test_secrets_and_tools_are_read_through_the_tenant_session(aws):
    # Given acme's secret and table in (moto's) AWS, and STS answering for the role
    client("secretsmanager").create_secret(
        Name="relayflow/local/acme/stripe", SecretString="sk_acme"
    )
    client("dynamodb").create_table(
        TableName="app-orders",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    calls: list[str] = []
    real_session = tenant_aws._session

    def session(role_arn: str, tenant: str) -> Any:
        calls.append(tenant)
        return real_session(role_arn, tenant)

    with pytest.MonkeyPatch.context() as patch, acting_for("acme"):
        patch.setattr(tenant_aws, "_session", session)
        # When acme's step reads its secret and writes its table
        assert resolve_secret({"name": "stripe"}) == "sk_acme"
        item = {"table": "app-orders", "item": {"pk": "o-1"}}
        assert run_tool("aws.dynamodb.put_item", item, doc=DOC) == {"ok": True}
    # Then both went through acme's assumed session
    assert set(calls) == {"acme"} and len(calls) >= 2


def test_without_the_role_the_process_clients_are_used(monkeypatch):
    with moto_table(monkeypatch):
        assert tenant_aws.tenant_client("dynamodb", "acme") is client("dynamodb")
