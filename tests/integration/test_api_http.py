"""The control API end to end: real HTTP (httpx) to a LocalServer, which runs the authorizer
and API functions for each request and the recorder function for each status change, against
the local runtime (moto)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_api import finished_run
from relayflow_testing import HTTP_TIMEOUT, tenant_client

from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TIME_SCALE = 0.01
OTHER_TENANT = "globex"


def noop_workflow(workflow_id: str, label: str = "one") -> dict[str, Any]:
    return {
        "id": workflow_id,
        "name": f"Workflow {workflow_id}",
        "start": "mark",
        "steps": {"mark": {"type": "transform", "mapping": {"label": label}}},
    }


def delayed_workflow(workflow_id: str, seconds: int, label: str) -> dict[str, Any]:
    """A delay, then a step whose output names the version's label."""
    return {
        "id": workflow_id,
        "start": "hold",
        "steps": {
            "hold": {"type": "delay", "seconds": seconds, "on_success": "mark"},
            "mark": {"type": "transform", "mapping": {"label": label}},
        },
    }


def failing_workflow(workflow_id: str) -> dict[str, Any]:
    return {
        "id": workflow_id,
        # Standard: the recorder sets the failing step at the end (on Express the sweep does,
        # minutes later).
        "engine": "standard",
        "start": "compute",
        "steps": {
            "compute": {
                "type": "transform",
                "mapping": {"ratio": "{{ 1 / trigger.zero }}"},
            }
        },
    }


@pytest.fixture(scope="module")
def other(server: LocalServer) -> Iterator[httpx.Client]:
    """A client of a second tenant, with a key created through the admin route."""
    with tenant_client(server, OTHER_TENANT) as client:
        yield client


def put(api: httpx.Client, definition: dict[str, Any]) -> httpx.Response:
    return api.put(f"/workflows/{definition['id']}", json=definition)


def start(api: httpx.Client, workflow_id: str, body: Any = None, **headers: str) -> httpx.Response:
    return api.post(f"/workflows/{workflow_id}/runs", json=body or {"input": {}}, headers=headers)


def step_output(run: dict[str, Any], key: str) -> Any:
    return next(step["output"] for step in run["steps"] if step["key"] == key)


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    assert body["code"] == code
    assert "Traceback" not in response.text
    return body


# ----------------------------------------------------------------------------- documents, auth


def test_the_api_checks_workflow_ids_with_the_definition_formats_pattern():
    from relayflow.api.resolver import WORKFLOW_ID_PATTERN
    from relayflow.definition.models import WORKFLOW_ID_PATTERN as DEFINITION_PATTERN

    assert WORKFLOW_ID_PATTERN == DEFINITION_PATTERN


def authorizer_event(sample: str, **headers: str) -> dict[str, Any]:
    event = json.loads((ROOT / "events/authorizer" / sample).read_text())
    event["headers"] = {"Host": "abcdef1234.execute-api.us-east-1.amazonaws.com", **headers}
    event["multiValueHeaders"] = {k: [v] for k, v in event["headers"].items()}
    return event


@pytest.mark.parametrize("header", ["Authorization", "X-Api-Key"])
def test_the_authorizer_allows_the_stage_for_the_keys_tenant(server, header):
    from relayflow.api.auth import authorize

    # Given API Gateway's REQUEST event with a valid key in either header
    value = f"Bearer {server.bootstrap_key}" if header == "Authorization" else server.bootstrap_key
    event = authorizer_event("bearer.json", **{header: value})
    # When the authorizer answers
    answer = authorize(event)
    # Then it allows every route of the stage, for tenant local and the key, in the context
    assert answer["principalId"] == "local"
    key_id = "key_" + server.bootstrap_key.split("_")[2]  # rf_key_<12 hex>_<secret>
    assert answer["context"] == {"tenant": "local", "key_id": key_id, "key_name": "bootstrap"}
    (statement,) = answer["policyDocument"]["Statement"]
    assert statement["Effect"] == "Allow"
    assert statement["Action"] == "execute-api:Invoke"
    assert statement["Resource"] == [
        "arn:aws:execute-api:us-east-1:123456789012:abcdef1234/dev/*/*"
    ]


@pytest.mark.parametrize(
    "headers",
    [{}, {"X-Api-Key": "rf_key_000000000000_unknown"}, {"Authorization": "Token abc"}],
    ids=["missing", "unknown", "other-scheme"],
)
def test_the_authorizer_raises_unauthorized_for_api_gateways_401(server, headers):
    from relayflow.api.auth import Unauthorized, authorize

    with pytest.raises(Unauthorized) as raised:
        authorize(authorizer_event("missing_key.json", **headers))
    assert str(raised.value) == "Unauthorized"


def test_the_openapi_document_is_public_and_documents_every_route(server):
    # When the document is fetched without a key
    response = httpx.get(f"{server.url}/openapi.json", timeout=HTTP_TIMEOUT)
    # Then it is there, with every route, both auth schemes and the error model
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.")
    assert {path: sorted(ops) for path, ops in document["paths"].items()} == {
        "/workflows": ["get"],
        "/workflows/{workflow_id}": ["delete", "get", "put"],
        "/workflows/{workflow_id}/rollback": ["post"],
        "/workflows/{workflow_id}/runs": ["get", "post"],
        "/runs/{run_id}": ["get"],
        "/runs/{run_id}/cancel": ["post"],
        "/runs/{run_id}/continue": ["post"],
        "/runs/{run_id}/rerun": ["post"],
        "/runs/{run_id}/resume": ["post"],
        "/runs": ["get"],
        "/events": ["post"],
        "/breakers": ["get"],
        "/breakers/{breaker_id}/reset": ["post"],
        "/dlq": ["get"],
        "/dlq/{run_id}": ["delete", "get"],
        "/dlq/{run_id}/retry": ["post"],
        "/approvals": ["get"],
        "/approvals/{approval_id}": ["get"],
        "/approvals/{approval_id}/respond": ["post"],
        "/waitpoints": ["get"],
        "/waitpoints/{waitpoint_id}": ["get"],
        "/waitpoints/{waitpoint_id}/complete": ["post"],
        "/waitpoints/{waitpoint_id}/fail": ["post"],
    }
    assert set(document["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    put_body = document["paths"]["/workflows/{workflow_id}"]["put"]["requestBody"]["content"]
    assert set(put_body) == {"application/json", "application/yaml"}
    assert "steps" in document["components"]["schemas"]["WorkflowDefinition"]["properties"]
    not_found = document["paths"]["/runs/{run_id}"]["get"]["responses"]["404"]
    assert not_found["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")


def test_swagger_ui_is_public(server):
    response = httpx.get(f"{server.url}/swagger", timeout=HTTP_TIMEOUT)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "swagger" in response.text.lower()


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer rf_key_000000000000_not-a-real-secret-at-all-0000"},
        {"X-Api-Key": "rf_key_000000000000_not-a-real-secret-at-all-0000"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"X-Api-Key": ""},
    ],
    ids=["no-key", "bad-bearer", "bad-x-api-key", "basic-auth", "empty-key"],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/workflows"),
        ("PUT", "/workflows/hello"),
        ("GET", "/workflows/hello"),
        ("DELETE", "/workflows/hello"),
        ("POST", "/workflows/hello/rollback"),
        ("POST", "/workflows/hello/runs"),
        ("GET", "/workflows/hello/runs"),
        ("GET", "/runs/0123456789abcdef0123456789abcdef"),
        ("POST", "/runs/0123456789abcdef0123456789abcdef/cancel"),
    ],
)
def test_every_route_refuses_a_missing_or_bad_key_with_401(server, headers, method, path):
    response = httpx.request(
        method, f"{server.url}{path}", headers=headers, json={}, timeout=HTTP_TIMEOUT
    )
    assert_error(response, 401, "unauthorized")


def test_a_revoked_key_is_refused(server):
    # Given a key that worked
    admin = {"X-Admin-Token": server.admin_token}
    key = httpx.post(
        f"{server.url}/admin/keys",
        json={"tenant": "local", "name": "tmp"},
        headers=admin,
        timeout=HTTP_TIMEOUT,
    )
    assert key.status_code == 201
    secret = key.json()["secret"]
    assert (
        httpx.get(
            f"{server.url}/workflows", headers={"X-Api-Key": secret}, timeout=HTTP_TIMEOUT
        ).status_code
        == 200
    )
    # When it is revoked
    revoked = httpx.delete(
        f"{server.url}/admin/keys/{key.json()['key_id']}", headers=admin, timeout=HTTP_TIMEOUT
    )
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    # Then it is refused
    response = httpx.get(
        f"{server.url}/workflows", headers={"X-Api-Key": secret}, timeout=HTTP_TIMEOUT
    )
    assert_error(response, 401, "unauthorized")


@pytest.mark.parametrize("tenant", ["dev", "prod", "platform", "relayflow"])
def test_a_new_tenant_named_like_a_stage_or_the_platform_is_a_422(server, tenant):
    # When the admin creates the first key of a tenant whose id the platform keeps
    response = httpx.post(
        f"{server.url}/admin/keys",
        json={"tenant": tenant, "name": "ci"},
        headers={"X-Admin-Token": server.admin_token},
        timeout=HTTP_TIMEOUT,
    )
    # Then it is refused with a stable code that names the id, and the tenant has no key
    body = assert_error(response, 422, "reserved_tenant")
    assert body["details"]["tenant"] == tenant and "is reserved" in body["message"]
    listed = httpx.get(
        f"{server.url}/admin/keys",
        params={"tenant": tenant},
        headers={"X-Admin-Token": server.admin_token},
        timeout=HTTP_TIMEOUT,
    )
    assert listed.json()["items"] == []


def test_admin_routes_need_the_admin_token(server):
    response = httpx.post(
        f"{server.url}/admin/keys", json={"tenant": "local", "name": "x"}, timeout=HTTP_TIMEOUT
    )
    assert_error(response, 401, "unauthorized")
    response = httpx.post(
        f"{server.url}/admin/keys",
        json={"tenant": "local", "name": "x"},
        headers={"X-Admin-Token": "wrong"},
        timeout=HTTP_TIMEOUT,
    )
    assert_error(response, 401, "unauthorized")


# ----------------------------------------------------------------------------- workflows


def test_register_update_and_roll_back(api):
    # Given a new workflow
    first = put(api, noop_workflow("versioned", "one"))
    assert first.status_code == 201, first.text
    assert first.json() | {"warnings": []} == {
        "workflow_id": "versioned",
        "version": 1,
        "live_version": 1,
        "created": True,
        "warnings": [],
    }
    # When the same definition is sent again, nothing new is published
    same = put(api, noop_workflow("versioned", "one"))
    assert same.status_code == 200
    assert (same.json()["version"], same.json()["live_version"], same.json()["created"]) == (
        1,
        1,
        False,
    )
    # When it changes, version 2 is live
    second = put(api, noop_workflow("versioned", "two"))
    assert second.status_code == 200
    assert (second.json()["version"], second.json()["live_version"]) == (2, 2)
    detail = api.get("/workflows/versioned").json()
    assert [v["version"] for v in detail["versions"]] == [1, 2]
    assert detail["definition"]["steps"]["mark"]["mapping"] == {"label": "two"}
    # When it is rolled back to version 1
    rolled = api.post("/workflows/versioned/rollback", json={"version": 1})
    # Then version 1 is live again, and new runs run it
    assert rolled.status_code == 200, rolled.text
    assert rolled.json()["live_version"] == 1
    detail = api.get("/workflows/versioned").json()
    assert (detail["live_version"], detail["latest_version"]) == (1, 2)
    assert detail["definition"]["steps"]["mark"]["mapping"] == {"label": "one"}
    run = finished_run(api, start(api, "versioned").json()["run_id"])
    assert (run["version"], run["status"]) == (1, "succeeded")
    assert step_output(run, "mark") == {"label": "one"}
    # And an unknown version is a 404
    assert_error(api.post("/workflows/versioned/rollback", json={"version": 9}), 404, "not_found")


def test_a_yaml_definition_is_accepted_with_a_yaml_content_type(api):
    text = (ROOT / "workflows/examples/order_triage.yaml").read_text()
    response = api.put(
        "/workflows/order-triage", content=text, headers={"Content-Type": "application/yaml"}
    )
    assert response.status_code in (200, 201), response.text
    assert response.json()["workflow_id"] == "order-triage"
    assert api.get("/workflows/order-triage").json()["name"] == "Order triage"


def test_a_deleted_workflow_refuses_new_runs_until_it_is_put_again(api):
    put(api, noop_workflow("retired"))
    deleted = api.delete("/workflows/retired")
    assert deleted.status_code == 200 and deleted.json()["enabled"] is False
    assert_error(start(api, "retired"), 409, "conflict")
    again = put(api, noop_workflow("retired", "back"))
    assert again.status_code == 200 and api.get("/workflows/retired").json()["enabled"] is True
    assert start(api, "retired").status_code == 201


# ----------------------------------------------------------------------------- runs


def test_an_idempotency_key_maps_repeats_to_one_run(api):
    put(api, noop_workflow("idem"))
    # When the same start is sent twice with one Idempotency-Key
    first = start(api, "idem", {"input": {"order": 1}}, **{"Idempotency-Key": "order-1"})
    repeat = start(api, "idem", {"input": {"order": 1}}, **{"Idempotency-Key": "order-1"})
    # Then the first started a run (201) and the repeat returned it (200)
    assert first.status_code == 201 and first.json()["created"] is True
    assert repeat.status_code == 200 and repeat.json()["created"] is False
    assert repeat.json()["run_id"] == first.json()["run_id"]
    # And another key starts another run
    other_key = start(api, "idem", {"input": {"order": 2}}, **{"Idempotency-Key": "order-2"})
    assert other_key.status_code == 201 and other_key.json()["run_id"] != first.json()["run_id"]
    finished_run(api, first.json()["run_id"])
    finished_run(api, other_key.json()["run_id"])
    runs = api.get("/workflows/idem/runs").json()["items"]
    assert sorted(r["run_id"] for r in runs) == sorted(
        {first.json()["run_id"], other_key.json()["run_id"]}
    )


def test_a_run_finishes_on_the_version_it_started_on(api):
    # Given version 1, whose delay holds the run for about a second
    put(api, delayed_workflow("pinned", 100, "one"))
    early = start(api, "pinned").json()
    # When version 2 goes live while that run waits
    updated = put(api, delayed_workflow("pinned", 1, "two"))
    assert updated.json()["live_version"] == 2
    late = start(api, "pinned").json()
    explicit = start(api, "pinned", {"input": {}, "version": 1}).json()
    # Then the early run finishes on version 1, new runs on version 2 unless pinned to 1
    early_run, late_run, explicit_run = (
        finished_run(api, run["run_id"]) for run in (early, late, explicit)
    )
    assert (early_run["version"], step_output(early_run, "mark")) == (1, {"label": "one"})
    assert (late_run["version"], step_output(late_run, "mark")) == (2, {"label": "two"})
    assert (explicit_run["version"], step_output(explicit_run, "mark")) == (1, {"label": "one"})
    assert early_run["status"] == late_run["status"] == explicit_run["status"] == "succeeded"
    assert_error(start(api, "pinned", {"input": {}, "version": 7}), 404, "not_found")


def test_cancel_aborts_a_running_run_and_refuses_a_finished_one(api):
    put(api, delayed_workflow("long", 3000, "never"))
    run = start(api, "long").json()
    # When it is cancelled while it waits
    cancelled = api.post(f"/runs/{run['run_id']}/cancel")
    # Then it is aborted, and cancelling it again is a conflict
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "aborted"
    assert finished_run(api, run["run_id"])["status"] == "aborted"
    assert_error(api.post(f"/runs/{run['run_id']}/cancel"), 409, "conflict")


def test_runs_and_workflows_are_paged(api):
    # Given five runs of one workflow
    put(api, noop_workflow("paged"))
    started = [start(api, "paged", {"input": {"n": n}}).json()["run_id"] for n in range(5)]
    for run_id in started:
        finished_run(api, run_id)
    # When they are listed two at a time
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 2}
        if token:
            params["next_token"] = token
        page = api.get("/workflows/paged/runs", params=params).json()
        assert len(page["items"]) <= 2
        seen += [run["run_id"] for run in page["items"]]
        pages += 1
        token = page["next_token"]
        if not token:
            break
    # Then every run comes once, newest first
    assert sorted(seen) == sorted(started) and len(seen) == 5
    assert pages >= 3
    assert seen == list(reversed(started))
    # And a status filter keeps only those runs
    succeeded = api.get("/workflows/paged/runs", params={"status": "succeeded"}).json()
    assert {r["status"] for r in succeeded["items"]} == {"succeeded"}
    failed = api.get("/workflows/paged/runs", params={"status": "failed"}).json()
    assert failed["items"] == []
    # And workflows page the same way
    for n in range(3):
        put(api, noop_workflow(f"page-wf-{n}"))
    ids: list[str] = []
    token = None
    while True:
        params = {"limit": 1} | ({"next_token": token} if token else {})
        page = api.get("/workflows", params=params).json()
        ids += [w["workflow_id"] for w in page["items"]]
        token = page["next_token"]
        if not token:
            break
    assert len(ids) == len(set(ids)) and {"page-wf-0", "page-wf-1", "page-wf-2"} <= set(ids)
    # And a token that was not handed out is a 400
    assert_error(api.get("/workflows", params={"next_token": "bm9wZQ"}), 400, "bad_request")


# ----------------------------------------------------------------------------- recorder, bus


@pytest.fixture(scope="module")
def lifecycle_queue(server: LocalServer) -> dict[str, Any]:
    """An SQS queue that an EventBridge rule on the Relayflow bus feeds with lifecycle events."""
    from relayflow.settings import get_settings

    assert server.runtime is not None
    sqs = server.runtime.client("sqs")
    events = server.runtime.events_client
    url = sqs.create_queue(QueueName="lifecycle")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    bus = get_settings().event_bus_name
    events.put_rule(
        Name="relayflow-lifecycle",
        EventBusName=bus,
        EventPattern=json.dumps({"source": ["relayflow"]}),
    )
    events.put_targets(
        Rule="relayflow-lifecycle", EventBusName=bus, Targets=[{"Id": "queue", "Arn": arn}]
    )
    return {"sqs": sqs, "url": url, "seen": []}


def lifecycle_events(queue: dict[str, Any], run_id: str, count: int, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        received = queue["sqs"].receive_message(
            QueueUrl=queue["url"], MaxNumberOfMessages=10, WaitTimeSeconds=0
        )
        for message in received.get("Messages", []):
            queue["seen"].append(json.loads(message["Body"]))
            queue["sqs"].delete_message(
                QueueUrl=queue["url"], ReceiptHandle=message["ReceiptHandle"]
            )
        mine = [e for e in queue["seen"] if e["detail"].get("run_id") == run_id]
        if len(mine) >= count:
            return mine
        time.sleep(0.05)
    raise AssertionError(f"expected {count} lifecycle events of {run_id}, saw {queue['seen']}")


def test_the_recorder_updates_runs_and_publishes_lifecycle_events(api, server, lifecycle_queue):
    # Given a workflow that succeeds and one that fails
    put(api, noop_workflow("recorded"))
    put(api, failing_workflow("broken"))
    # When one run of each finishes
    ok = finished_run(api, start(api, "recorded", {"input": {"a": 1}}).json()["run_id"])
    bad = finished_run(api, start(api, "broken", {"input": {"zero": 0}}).json()["run_id"])
    # Then GET /runs/{id} shows what the recorder stored from the status-change events
    assert ok["status"] == "succeeded" and ok["ended_at"] and ok["duration_ms"] is not None
    assert ok["input"] == {"a": 1}
    assert bad["status"] == "failed" and bad["error"] and bad["ended_at"]
    assert bad["failing_step"] == "compute"
    # And the bus carried started then succeeded / failed, once each
    ok_events = lifecycle_events(lifecycle_queue, ok["run_id"], 2)
    bad_events = lifecycle_events(lifecycle_queue, bad["run_id"], 2)
    assert [e["detail-type"] for e in ok_events] == [
        "relayflow.run.started",
        "relayflow.run.succeeded",
    ]
    assert [e["detail-type"] for e in bad_events] == [
        "relayflow.run.started",
        "relayflow.run.failed",
    ]
    detail = bad_events[-1]["detail"]
    assert (detail["tenant"], detail["workflow_id"], detail["status"]) == (
        "local",
        "broken",
        "failed",
    )
    assert detail["failing_step"] == "compute"
    # And a second look finds no duplicate
    server.settle()
    time.sleep(0.2)
    assert len(lifecycle_events(lifecycle_queue, ok["run_id"], 2)) == 2


# ----------------------------------------------------------------------------- tenants


def test_another_tenants_ids_are_404_on_every_route(api, other):
    # Given a workflow and a run of tenant local
    put(api, noop_workflow("private"))
    run_id = start(api, "private").json()["run_id"]
    finished_run(api, run_id)
    # When tenant globex addresses them, every route answers as if they did not exist
    for response in (
        other.get("/workflows/private"),
        other.delete("/workflows/private"),
        other.post("/workflows/private/rollback", json={"version": 1}),
        other.post("/workflows/private/runs", json={"input": {}}),
        other.get("/workflows/private/runs"),
        other.get(f"/runs/{run_id}"),
        other.post(f"/runs/{run_id}/cancel"),
    ):
        assert_error(response, 404, "not_found")
    # And its list holds none of them
    assert "private" not in {w["workflow_id"] for w in other.get("/workflows").json()["items"]}
    # And its PUT of the same id makes its own workflow, leaving tenant local's as it was
    own = other.put("/workflows/private", json=noop_workflow("private", "globex"))
    assert own.status_code == 201 and own.json()["created"] is True
    mine = api.get("/workflows/private").json()
    assert (mine["latest_version"], mine["enabled"]) == (1, True)
    assert mine["definition"]["steps"]["mark"]["mapping"] == {"label": "one"}
    assert other.get(f"/runs/{run_id}").status_code == 404


# ----------------------------------------------------------------------------- errors


def test_an_invalid_definition_is_422_with_every_problem(api):
    definition = {
        "id": "broken-def",
        "start": "a",
        "steps": {
            "a": {"type": "noop", "on_success": "ghost"},
            "b": {"type": "teleport"},
            "c": {"type": "delay", "seconds": -5},
        },
    }
    body = assert_error(put(api, definition), 422, "invalid_definition")
    paths = {problem["path"] for problem in body["details"]}
    assert {"steps.a.on_success", "steps.b"} <= paths
    assert any(path.startswith("steps.c") for path in paths)
    for problem in body["details"]:
        assert set(problem) == {"file", "path", "rule", "message"}
    assert api.get("/workflows/broken-def").status_code == 404


@pytest.mark.parametrize(
    ("content", "content_type", "status", "code"),
    [
        ("{not json", "application/json", 400, "bad_request"),
        ("id: [unclosed", "application/yaml", 400, "bad_request"),
        ("", "application/json", 400, "bad_request"),
        ("[1, 2]", "application/json", 422, "invalid_definition"),
        ('{"id": "x", "id": "x"}', "application/json", 422, "invalid_definition"),
        ("a: &x [1]\nb: *x\n", "application/yaml", 400, "bad_request"),
        ("id: x", "text/plain", 415, "unsupported_media_type"),
    ],
    ids=["bad-json", "bad-yaml", "empty", "not-an-object", "duplicate-key", "yaml-alias", "text"],
)
def test_an_unreadable_definition_body_is_refused(api, content, content_type, status, code):
    response = api.put("/workflows/x", content=content, headers={"Content-Type": content_type})
    assert_error(response, status, code)


def test_a_definition_whose_id_is_not_the_paths_is_422(api):
    response = api.put("/workflows/left", json=noop_workflow("right"))
    assert response.status_code == 422, response.text
    assert response.json()["code"] in ("unprocessable", "invalid_definition")


def test_request_models_answer_422_with_field_paths(api):
    put(api, noop_workflow("models"))
    body = assert_error(
        start(api, "models", {"input": {}, "version": 0, "extra": True}), 422, "unprocessable"
    )
    assert {d["path"] for d in body["details"]} == {"body.version", "body.extra"}
    body = assert_error(api.post("/workflows/models/rollback", json={}), 422, "unprocessable")
    assert [d["path"] for d in body["details"]] == ["body.version"]
    body = assert_error(
        api.post("/workflows/models/rollback", json={"version": "two"}), 422, "unprocessable"
    )
    assert [d["path"] for d in body["details"]] == ["body.version"]
    assert_error(
        api.post(
            "/workflows/models/runs", content="{", headers={"Content-Type": "application/json"}
        ),
        400,
        "bad_request",
    )


def test_bad_parameters_answer_400_with_their_paths(api):
    body = assert_error(api.get("/workflows", params={"limit": "many"}), 400, "bad_request")
    assert [d["path"] for d in body["details"]] == ["query.limit"]
    body = assert_error(api.get("/workflows", params={"limit": 0}), 400, "bad_request")
    assert [d["path"] for d in body["details"]] == ["query.limit"]
    body = assert_error(
        api.get("/workflows/models/runs", params={"status": "sleeping"}), 400, "bad_request"
    )
    assert [d["path"] for d in body["details"]] == ["query.status"]
    body = assert_error(api.get("/runs/not-a-run-id"), 400, "bad_request")
    assert [d["path"] for d in body["details"]] == ["path.run_id"]
    body = assert_error(api.get("/workflows/Not_Valid!"), 400, "bad_request")
    assert [d["path"] for d in body["details"]] == ["path.workflow_id"]


def test_unknown_routes_are_404(api):
    assert_error(api.get("/nowhere"), 404, "not_found")
    assert_error(api.post("/workflows"), 404, "not_found")


def test_a_body_over_256_kb_is_413(api):
    big = {"input": {"blob": "x" * (300 * 1024)}}
    assert_error(api.post("/workflows/anything/runs", json=big), 413, "payload_too_large")
    definition = noop_workflow("huge") | {"description": "y" * (300 * 1024)}
    assert_error(put(api, definition), 413, "payload_too_large")


def test_an_unexpected_error_is_500_without_a_stack_trace(api, server, monkeypatch):
    # Given a control plane that fails in a way nobody planned
    control = server.control()

    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret internals: /srv/relayflow/service.py line 42")

    monkeypatch.setattr(control, "list_workflows", explode)
    # When the route runs
    response = api.get("/workflows")
    # Then the answer is a bare internal error that names the request id, nothing else
    body = assert_error(response, 500, "internal_error")
    assert body["details"]["request_id"]
    assert "secret internals" not in response.text and "service.py" not in response.text


def test_requests_over_the_rate_limit_are_429_with_retry_after(server):
    # A refill slow enough that no request's latency (this machine may be loaded) earns a
    # token back: the first two pass, the rest of the burst is refused.
    server.set_rate_limit(per_second=0.01, burst=2)
    try:
        headers = {"X-Api-Key": server.bootstrap_key}
        statuses = [
            httpx.get(f"{server.url}/workflows", headers=headers, timeout=HTTP_TIMEOUT).status_code
            for _ in range(4)
        ]
        assert statuses[:2] == [200, 200] and 429 in statuses[2:]
        response = httpx.get(f"{server.url}/workflows", headers=headers, timeout=HTTP_TIMEOUT)
        body = assert_error(response, 429, "too_many_requests")
        assert body["message"]
        assert int(response.headers["Retry-After"]) >= 1
    finally:
        server.set_rate_limit(per_second=50, burst=200)


def test_a_definition_is_stored_as_sent(api):
    definition = noop_workflow("stored", "as-sent")
    definition["description"] = "ünïcödé ✓"
    assert put(api, definition).status_code == 201
    assert api.get("/workflows/stored").json()["definition"] == definition
