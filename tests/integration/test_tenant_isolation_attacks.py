"""Issue 25, items 1–3, tried as an attacker with two tenants would: on ``relayflow serve``
(real HTTP to a LocalServer), tenant B ("mallory") reaches for tenant A's ("acme") secrets,
events and Relayflow's own resources, and every attempt fails closed.

1. Secrets: B's ``webhook_out`` signing with A's secret, B's webhook trigger verifying with
   it, B's HTTP bearer token from it → 422 naming the secret at publish, ``relayflow run`` exit
   2, and (a definition stored before the check) refused again when the step runs.
2. The bus: B's ``aws.events.put_events`` on the Relayflow bus claiming A's tenant starts B's
   subscriber, never A's; ``source: relayflow`` / ``relayflow.run.failed`` are refused.
3. Relayflow's resources: DynamoDB get/put on the Relayflow table, ``start_execution`` on A's
   machine, ``lambda.invoke`` by partial ARN → ``Relayflow.InvalidArgs`` (tenant-boundary).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from relayflow_testing import Server, allowed_server, load_handler, tenant_client

from relayflow.document import StepRef
from relayflow.errors import InvalidArgsError
from relayflow.local.serve import LocalServer
from relayflow.net.http import verify_signature

pytestmark = pytest.mark.integration

TIME_SCALE = 0.01
ACME, MALLORY = "acme", "mallory"
A_HOOK_KEY = "acme-webhook-signing-key"
A_TOKEN = "acme-billing-token"
B_HOOK_KEY = "mallory-own-key"
SUFFIX = uuid.uuid4().hex[:8]
CONTEXT = SimpleNamespace(function_name="relayflow-webhook_out", aws_request_id="req-1")


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(time_scale=TIME_SCALE) as local:
        assert local.runtime is not None
        secrets = local.runtime.client("secretsmanager")
        # The operator stored each tenant's secrets in its folder (docs/security.md)
        secrets.create_secret(Name=f"relayflow/local/{ACME}/hook", SecretString=A_HOOK_KEY)
        secrets.create_secret(Name=f"relayflow/local/{ACME}/billing", SecretString=A_TOKEN)
        secrets.create_secret(Name=f"relayflow/local/{MALLORY}/hook", SecretString=B_HOOK_KEY)
        yield local


@pytest.fixture(scope="module")
def acme(server: LocalServer) -> Iterator[httpx.Client]:
    with tenant_client(server, ACME) as client:
        yield client


@pytest.fixture(scope="module")
def mallory(server: LocalServer) -> Iterator[httpx.Client]:
    with tenant_client(server, MALLORY) as client:
        yield client


@pytest.fixture
def receiver() -> Iterator[Server]:
    with allowed_server() as srv:
        yield srv


# ----------------------------------------------------------------------------- helpers


def put(client: httpx.Client, definition: dict[str, Any]) -> httpx.Response:
    return client.put(f"/workflows/{definition['id']}", json=definition)


def published(client: httpx.Client, definition: dict[str, Any]) -> None:
    response = put(client, definition)
    assert response.status_code in (200, 201), response.text


def run_to_end(client: httpx.Client, workflow_id: str, timeout: float = 30.0) -> dict[str, Any]:
    started = client.post(f"/workflows/{workflow_id}/runs", json={"input": {}})
    assert started.status_code in (200, 201, 202), started.text
    run_id = started.json()["run_id"]
    deadline = time.monotonic() + timeout
    while True:
        run = client.get(f"/runs/{run_id}").json()
        if run["status"] not in ("queued", "running"):
            return dict(run)
        assert time.monotonic() < deadline, f"run {run_id} still {run['status']}"
        time.sleep(0.05)


def runs(client: httpx.Client, workflow_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/workflows/{workflow_id}/runs")
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


def one_step(workflow_id: str, step: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": workflow_id, "start": "act", "steps": {"act": step}, **extra}


def tool_step(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool", "tool": tool, "args": args, "retry": "none"}


def assert_refused(run: dict[str, Any], *words: str) -> None:
    """The run failed on a tenant-boundary refusal (not retried), which says why."""
    assert run["status"] == "failed", run
    assert run["error"] == "Relayflow.InvalidArgs", run
    for word in words:
        assert word in (run.get("cause") or ""), run.get("cause")


def assert_invalid_secret(response: httpx.Response, path: str, name: str) -> None:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["code"] == "invalid_definition"
    found = [p for p in body["details"] if p["path"] == path]
    assert found and found[0]["rule"] in ("secret-tenant", "secret-name"), body["details"]
    assert name in found[0]["message"]


# ----------------------------------------------------------------------------- 1. secrets

A_ABSOLUTE = f"relayflow/local/{ACME}/hook"
ESCAPES = [
    A_ABSOLUTE,
    f"../{ACME}/hook",
    f"/relayflow/local/{ACME}/hook",
    "arn:aws:secretsmanager:x",
]


@pytest.mark.parametrize("name", ESCAPES)
def test_b_cannot_publish_a_webhook_out_signed_with_as_secret(mallory, name):
    # When B publishes a webhook_out step that names A's signing secret in any spelling
    step = {"type": "webhook_out", "url": "https://hooks.example.com/x", "secret": {"name": name}}
    response = put(mallory, one_step(f"sign-{SUFFIX}", step))
    # Then the API refuses the definition, naming the secret and where it is
    assert_invalid_secret(response, "steps.act.secret.name", name)


def test_b_cannot_publish_a_webhook_trigger_or_http_bearer_with_as_secrets(mallory):
    hook = {"type": "webhook", "slug": f"steal-{SUFFIX}", "secret": {"name": A_ABSOLUTE}}
    response = put(
        mallory,
        one_step(f"hook-{SUFFIX}", {"type": "transform", "mapping": {}}, triggers=[hook]),
    )
    assert_invalid_secret(response, "triggers[0].secret.name", A_ABSOLUTE)
    # And an HTTP tool whose bearer token is A's
    billing = f"relayflow/local/{ACME}/billing"
    response = put(
        mallory,
        one_step(
            f"bearer-{SUFFIX}",
            {"type": "tool", "tool": "http.billing", "args": {"path": "/"}},
            http_tools={
                "billing": {
                    "base_url": "https://billing.example.com",
                    "auth": {"type": "bearer", "token": {"name": billing}},
                }
            },
        ),
    )
    assert_invalid_secret(response, "http_tools.billing.auth.token.name", billing)


def test_the_same_relative_name_is_each_tenants_own_secret(acme, mallory, receiver):
    # Given both tenants publish the same webhook_out step, naming "hook"
    receiver.reply = lambda r: (200, {"Content-Type": "application/json"}, b"{}")
    step = {"type": "webhook_out", "url": f"{receiver.url}/in", "secret": {"name": "hook"}}
    definition = one_step(f"own-{SUFFIX}", step)
    published(acme, definition)
    published(mallory, definition)
    # When each runs it
    assert run_to_end(acme, definition["id"])["status"] == "succeeded"
    assert run_to_end(mallory, definition["id"])["status"] == "succeeded"
    # Then each body was signed with its own tenant's key, B's never with A's
    first, second = receiver.requests
    signature = "x-relayflow-signature"
    assert verify_signature(first.body, A_HOOK_KEY, first.headers[signature])
    assert verify_signature(second.body, B_HOOK_KEY, second.headers[signature])
    assert not verify_signature(second.body, A_HOOK_KEY, second.headers[signature])


def outbound(config: dict[str, Any], tenant: str) -> dict[str, Any]:
    doc = {"run": {"id": "run-1", "workflow_id": "wf", "tenant": tenant}, "trigger": {}}
    return {
        "step": StepRef(key="sign", type="webhook_out", config=config).wire(),
        "doc": {**doc, "steps": {}},
        "context": {"attempt": 0},
    }


@pytest.mark.parametrize("name", [A_ABSOLUTE, f"{ACME}/../../{ACME}/hook"])
def test_a_stored_definition_naming_as_secret_is_refused_when_bs_step_runs(server, receiver, name):
    # Given B's webhook_out step as compiled before names were checked at publish
    config = {"url": f"{receiver.url}/in", "body": {"x": 1}, "secret": {"name": name}}
    # When B's run invokes it
    with pytest.raises(InvalidArgsError) as info:
        load_handler("webhook_out").handler(outbound(config, MALLORY), CONTEXT)
    # Then it is refused before anything is read or sent
    assert info.value.details["rule"] == "tenant-boundary"
    assert receiver.requests == []


def test_a_stored_webhook_naming_as_secret_never_verifies_with_it(server):
    from relayflow.control.errors import ServiceUnavailable
    from relayflow.control.webhook_intake import signing_secrets
    from relayflow.definition.step_models import SecretRef

    # Given B's webhook trigger as stored before names were checked, naming A's key
    ref = SecretRef(name=A_ABSOLUTE)
    # Then B's endpoint cannot read A's key to verify (or forge) deliveries: it answers 503
    with pytest.raises(ServiceUnavailable):
        signing_secrets(ref, MALLORY)
    # While A's own webhook, naming it inside A's folder, verifies with it
    assert signing_secrets(SecretRef(name="hook"), ACME) == (A_HOOK_KEY,)


def test_relayflow_run_exits_2_naming_a_secret_outside_the_local_tenant(tmp_path: Path, capsys):
    from relayflow.cli.main import main

    path = tmp_path / "leak.yaml"
    path.write_text(
        "id: leak\nstart: send\nsteps:\n  send:\n    type: webhook_out\n"
        f"    url: https://hooks.example.com/x\n    secret: {{name: {A_ABSOLUTE}}}\n"
    )
    assert main(["run", str(path), "--input", "{}"]) == 2
    err = capsys.readouterr().err
    assert "steps.send.secret.name" in err and A_ABSOLUTE in err and "secret-tenant" in err


def test_relayflow_validate_checks_secret_folders_for_the_tenant_it_is_given(
    tmp_path: Path, capsys
):
    from relayflow.cli.main import main

    # Given a definition naming another tenant's secret by its absolute name
    path = tmp_path / "leak.yaml"
    path.write_text(
        "id: leak\nstart: send\nsteps:\n  send:\n    type: webhook_out\n"
        f"    url: https://hooks.example.com/x\n    secret: {{name: {A_ABSOLUTE}}}\n"
    )
    # When it is validated as run would act (tenant local, the default), Then it is refused
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "steps.send.secret.name" in err and "secret-tenant" in err
    assert main(["validate", "--json", str(path)]) == 2
    capsys.readouterr()
    # And as the tenant that owns the folder it is valid
    assert main(["validate", "--tenant", ACME, str(path)]) == 0


# ----------------------------------------------------------------------------- 2. the bus


def subscriber(workflow_id: str, source: str) -> dict[str, Any]:
    return one_step(
        workflow_id,
        {
            "type": "transform",
            "mapping": {"tenant": "{{ run.tenant }}", "got": "{{ trigger.detail }}"},
        },
        triggers=[{"type": "event", "source": source, "detail_type": "order.created"}],
    )


@pytest.mark.parametrize(
    "bus", ["relayflow", "arn:aws:events:us-east-1:123456789012:event-bus/relayflow"]
)
def test_bs_put_events_claiming_as_tenant_reaches_only_b(server, acme, mallory, bus):
    # Given A and B both subscribe to the same source
    source = f"shop.{uuid.uuid4().hex[:8]}"
    target = f"orders-{uuid.uuid4().hex[:6]}"
    published(acme, subscriber(target, source))
    published(mallory, subscriber(target, source))
    # When B's tool step puts an event on the Relayflow bus that claims to be A's
    forge = f"forge-{uuid.uuid4().hex[:6]}"
    args = {
        "bus": bus,
        "source": source,
        "detail_type": "order.created",
        "detail": {"relayflow_tenant": ACME, "total": 5},
    }
    published(mallory, one_step(forge, tool_step("aws.events.put_events", args)))
    assert run_to_end(mallory, forge)["status"] == "succeeded"
    server.settle()
    # Then B's subscriber ran (the event carried B's stamp), and A's never did
    deadline = time.monotonic() + 30
    while not (b_runs := runs(mallory, target)):
        assert time.monotonic() < deadline, "B's subscriber never started"
        time.sleep(0.05)
    assert runs(acme, target) == []
    (b_run,) = b_runs
    deadline = time.monotonic() + 30
    while (detail := mallory.get(f"/runs/{b_run['run_id']}").json())["status"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    # (the trigger hands a run the detail without the stamp; the run is B's)
    (act,) = [step["output"] for step in detail["steps"] if step["key"] == "act"]
    assert act == {"tenant": MALLORY, "got": {"total": 5}}


def test_bs_forged_event_completes_none_of_as_waits(server, acme, mallory):
    # Given A's run waiting for a payment event
    source = f"billing.{uuid.uuid4().hex[:8]}"
    waiting = f"wait-{uuid.uuid4().hex[:6]}"
    step = {"type": "wait_for_event", "event": "payment.received", "source": source}
    published(acme, one_step(waiting, {**step, "timeout_seconds": 86400}))
    started = acme.post(f"/workflows/{waiting}/runs", json={"input": {}})
    assert started.status_code in (200, 201, 202), started.text
    run_id = started.json()["run_id"]
    server.settle()
    # When B's tool step puts that event on the Relayflow bus, claiming A's tenant
    forge = f"forge-wait-{uuid.uuid4().hex[:6]}"
    args = {
        "bus": "relayflow",
        "source": source,
        "detail_type": "payment.received",
        "detail": {"relayflow_tenant": ACME, "paid": "forged"},
    }
    published(mallory, one_step(forge, tool_step("aws.events.put_events", args)))
    assert run_to_end(mallory, forge)["status"] == "succeeded"
    server.settle()
    # Then A's run still waits; A's own event completes it, with A's payload
    assert acme.get(f"/runs/{run_id}").json()["status"] == "running"
    response = acme.post(
        "/events",
        json={"source": source, "detail_type": "payment.received", "detail": {"paid": "real"}},
    )
    assert response.status_code == 202, response.text
    server.settle()
    deadline = time.monotonic() + 30
    while (run := acme.get(f"/runs/{run_id}").json())["status"] == "running":
        assert time.monotonic() < deadline, "A's wait never completed"
        time.sleep(0.05)
    assert run["status"] == "succeeded", run
    (act,) = [step["output"] for step in run["steps"] if step["key"] == "act"]
    assert act["detail"]["paid"] == "real"


@pytest.mark.parametrize(
    ("source", "detail_type", "word"),
    [
        ("relayflow", "relayflow.run.failed", "source"),
        ("Relayflow.Runs", "order.created", "source"),
        ("shop.orders", "relayflow.run.failed", "detail type"),
    ],
)
def test_b_cannot_forge_relayflow_lifecycle_events(mallory, source, detail_type, word):
    # When B's tool step claims Relayflow's own source or lifecycle detail type
    forge = f"life-{uuid.uuid4().hex[:6]}"
    args = {"bus": "relayflow", "source": source, "detail_type": detail_type, "detail": {}}
    published(mallory, one_step(forge, tool_step("aws.events.put_events", args)))
    # Then the step is refused, and so is the same event through POST /events
    assert_refused(run_to_end(mallory, forge), "reserved", word)
    response = mallory.post(
        "/events", json={"source": source, "detail_type": detail_type, "detail": {}}
    )
    assert response.status_code == 422, response.text


# ----------------------------------------------------------------------------- 3. resources


def test_b_cannot_read_or_write_the_relayflow_table(server, acme, mallory):
    # Given A has a run (its item in the Relayflow table holds its input)
    secret_run = f"private-{SUFFIX}"
    published(acme, one_step(secret_run, {"type": "transform", "mapping": {"ok": True}}))
    assert run_to_end(acme, secret_run)["status"] == "succeeded"
    table_arn = "arn:aws:dynamodb:us-east-1:123456789012:table/relayflow"
    attacks = {
        "get": ("aws.dynamodb.get_item", {"table": "relayflow", "key": {"pk": "x", "sk": "y"}}),
        "get-arn": ("aws.dynamodb.get_item", {"table": table_arn, "key": {"pk": "x", "sk": "y"}}),
        "query": (
            "aws.dynamodb.query",
            {"table": "relayflow", "key_condition": "pk = :p", "values": {":p": f"TENANT#{ACME}"}},
        ),
        # An open breaker item for A's workflow would make A's starts answer 409
        "put": (
            "aws.dynamodb.put_item",
            {
                "table": "relayflow",
                "item": {"pk": f"TENANT#{ACME}#BREAKER#workflow:{secret_run}", "sk": "BREAKER"},
            },
        ),
    }
    for label, (tool, args) in attacks.items():
        workflow_id = f"table-{label}-{SUFFIX}"
        published(mallory, one_step(workflow_id, tool_step(tool, args)))
        assert_refused(run_to_end(mallory, workflow_id), "Relayflow's own resources")
    # And A's workflow still starts and runs
    assert run_to_end(acme, secret_run)["status"] == "succeeded"


def test_b_cannot_start_as_state_machine_or_invoke_relayflow_functions(server, acme, mallory):
    # Given A's workflow and the state machine it runs on
    target = f"payroll-{SUFFIX}"
    published(acme, one_step(target, {"type": "transform", "mapping": {"paid": True}}))
    assert server.runtime is not None
    machines = server.runtime.client("stepfunctions").list_state_machines()["stateMachines"]
    (machine,) = [m["stateMachineArn"] for m in machines if target in m["name"]]
    attacks = {
        "sfn": ("aws.stepfunctions.start_execution", {"state_machine_arn": machine}),
        "sfn-alias": (
            "aws.stepfunctions.start_execution",
            {"state_machine_arn": f"{machine}:live"},
        ),
        "partial": ("aws.lambda.invoke", {"function": "123456789012:function:relayflow-code"}),
        "qualified": ("aws.lambda.invoke", {"function": "relayflow-tool:live"}),
        "arn": (
            "aws.lambda.invoke",
            {"function": "arn:aws:lambda:us-east-1:123456789012:function:relayflow-webhook_out"},
        ),
        "bucket": ("aws.s3.get_object", {"bucket": "relayflow-payloads", "key": "payloads/x"}),
    }
    for label, (tool, args) in attacks.items():
        workflow_id = f"reach-{label}-{SUFFIX}"
        published(mallory, one_step(workflow_id, tool_step(tool, args)))
        assert_refused(run_to_end(mallory, workflow_id), "Relayflow's own resources")
    # Then A's workflow never ran with B's input
    assert runs(acme, target) == []
    executions = server.runtime.client("stepfunctions").list_executions(stateMachineArn=machine)
    assert executions["executions"] == []


def test_a_tenants_own_resources_stay_reachable(server, mallory):
    # Given B's own table (any name that is not Relayflow's)
    assert server.runtime is not None
    server.runtime.client("dynamodb").create_table(
        TableName=f"app-{SUFFIX}",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    # (its items keyed under its tenant: docs/security.md, "Tenant isolation")
    args = {"table": f"app-{SUFFIX}", "item": {"pk": f"{MALLORY}#order-1", "total": 3}}
    workflow_id = f"own-table-{SUFFIX}"
    published(mallory, one_step(workflow_id, tool_step("aws.dynamodb.put_item", args)))
    # When B's step writes to it, Then it succeeds and the item is there
    assert run_to_end(mallory, workflow_id)["status"] == "succeeded"
    item = server.runtime.client("dynamodb").get_item(
        TableName=f"app-{SUFFIX}", Key={"pk": {"S": f"{MALLORY}#order-1"}}
    )["Item"]
    assert json.loads(json.dumps(item))["total"] == {"N": "3"}


def test_b_cannot_read_or_overwrite_as_tool_data_on_serve(server, acme, mallory):
    # Given A's object and item in the tool resources both tenants' steps may name (issue 36)
    assert server.runtime is not None
    bucket, table = f"app-files-{SUFFIX}", f"app-ledger-{SUFFIX}"
    server.runtime.client("s3").create_bucket(Bucket=bucket)
    server.runtime.client("dynamodb").create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    writes = {
        "put-object": ("aws.s3.put_object", {"bucket": bucket, "key": f"{ACME}/a.json", "body": 1}),
        "put-item": ("aws.dynamodb.put_item", {"table": table, "item": {"pk": f"{ACME}#1"}}),
    }
    for label, (tool, args) in writes.items():
        workflow_id = f"a-{label}-{SUFFIX}"
        published(acme, one_step(workflow_id, tool_step(tool, args)))
        assert run_to_end(acme, workflow_id)["status"] == "succeeded"
    # When B's steps read or overwrite them, Then each run fails on the tenant boundary
    attacks = {
        "get-object": ("aws.s3.get_object", {"bucket": bucket, "key": f"{ACME}/a.json"}),
        **writes,
        "get-item": ("aws.dynamodb.get_item", {"table": table, "key": {"pk": f"{ACME}#1"}}),
    }
    for label, (tool, args) in attacks.items():
        workflow_id = f"b-{label}-{SUFFIX}"
        published(mallory, one_step(workflow_id, tool_step(tool, args)))
        assert_refused(run_to_end(mallory, workflow_id), f"tenant '{MALLORY}'")
    # And A's object is as A wrote it
    body = server.runtime.client("s3").get_object(Bucket=bucket, Key=f"{ACME}/a.json")["Body"]
    assert json.loads(body.read()) == 1
