"""``input_schema`` through ``relayflow serve``: an API start that breaks it is 422
``invalid_input`` naming the pointer and rule, a webhook delivery gets the same answer, an
event or schedule delivery is kept as a failed run (never lost), and publishing a parent
resolves the child's schema into its agent's workflow tool."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import pytest
from relayflow_testing import HTTP_TIMEOUT

from relayflow.adapters.aws import client
from relayflow.control.dispatch import Dispatcher

pytestmark = pytest.mark.integration
UNTHROTTLED = True

SCHEMA = {
    "type": "object",
    "properties": {"order": {"type": "integer"}, "email": {"type": "string"}},
    "required": ["order"],
}


def put(api: httpx.Client, definition: dict[str, Any]) -> None:
    answer = api.put(f"/workflows/{definition['id']}", json=definition)
    assert answer.status_code in (200, 201), answer.text


#: An event's trigger is the event: its detail holds what was published.
EVENT_SCHEMA = {
    "type": "object",
    "properties": {"detail": SCHEMA},
    "required": ["detail"],
}


def orders(
    workflow_id: str,
    triggers: list[dict[str, Any]] | None = None,
    schema: dict[str, Any] = SCHEMA,
) -> dict[str, Any]:
    return {
        "id": workflow_id,
        "input_schema": schema,
        "start": "echo",
        "steps": {"echo": {"type": "transform", "mapping": {"order": "{{ trigger.order }}"}}},
        "triggers": triggers or [],
    }


def runs(api: httpx.Client, workflow_id: str) -> list[dict[str, Any]]:
    answer = api.get(f"/workflows/{workflow_id}/runs")
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def test_an_api_start_that_breaks_the_schema_is_422_invalid_input(api):
    # Given a workflow that declares its input
    put(api, orders("orders-api"))
    # When a run starts with a string order and a numeric email
    answer = api.post("/workflows/orders-api/runs", json={"input": {"order": "1042", "email": 7}})
    # Then 422 invalid_input names each pointer and rule, and no run exists
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body["code"] == "invalid_input"
    assert "/email: 7 is not of type 'string' (rule type) (and 1 more)" in body["message"]
    assert [(d["pointer"], d["rule"]) for d in body["details"]] == [
        ("/email", "type"),
        ("/order", "type"),
    ]
    assert runs(api, "orders-api") == []


def test_an_api_start_that_matches_runs(server, api):
    put(api, orders("orders-ok"))
    answer = api.post("/workflows/orders-ok/runs", json={"input": {"order": 1042}})
    assert answer.status_code == 201, answer.text
    run_id = answer.json()["run_id"]
    deadline = time.monotonic() + 30
    while (run := api.get(f"/runs/{run_id}").json())["status"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert run["status"] == "succeeded", run


def test_a_webhook_delivery_that_breaks_the_schema_is_refused_with_422(server, api):
    slug = f"orders-{uuid.uuid4().hex[:8]}"
    put(api, orders("orders-hook", [{"type": "webhook", "slug": slug}]))
    with httpx.Client(base_url=server.url, timeout=HTTP_TIMEOUT) as public:
        refused = public.post(f"/hooks/{slug}", json={"order": "not a number"})
        accepted = public.post(f"/hooks/{slug}", json={"order": 7})
    assert refused.status_code == 422, refused.text
    assert refused.json()["code"] == "invalid_input"
    assert refused.json()["details"][0]["pointer"] == "/order"
    assert accepted.status_code == 202, accepted.text
    assert [r["run_id"] for r in runs(api, "orders-hook")] == [accepted.json()["run_id"]]


def test_an_event_that_breaks_the_schema_is_kept_as_a_failed_run_once(server, api):
    # Given a workflow subscribed to events, and an event whose detail breaks its schema
    source = f"shop.{uuid.uuid4().hex[:8]}"
    put(api, orders("orders-event", [{"type": "event", "source": source}], EVENT_SCHEMA))
    delivery = {
        "kind": "event",
        "tenant": "local",
        "workflow_id": "orders-event",
        "trigger_index": 0,
        "event": {
            "id": "evt-1",
            "source": source,
            "detail-type": "order.created",
            "detail": {"order": "x", "relayflow_tenant": "local"},
        },
    }
    dispatcher = Dispatcher(server.control())
    # When it is delivered twice
    first, again = dispatcher.dispatch(delivery), dispatcher.dispatch(delivery)
    # Then nothing ran, and one failed run records the refusal with the payload
    assert (first.status, again.status) == ("invalid_input", "invalid_input")
    assert first.run_id == again.run_id
    # (the logged reason names where and which rule, never the payload's values)
    assert first.reason == "the input breaks the workflow's input_schema at /detail/order (type)"
    (listed,) = runs(api, "orders-event")
    assert listed["run_id"] == first.run_id and listed["status"] == "failed"
    detail = api.get(f"/runs/{first.run_id}").json()
    assert detail["error"] == "Relayflow.InvalidInput"
    stored = server.control().dal.get_run("local", first.run_id)
    assert stored is not None and stored.trigger_type == "event"
    (violation,) = json.loads(stored.cause)["violations"]
    assert (violation["pointer"], violation["rule"]) == ("/detail/order", "type")
    assert json.loads(stored.input)["detail"] == {"order": "x"}


def test_publishing_a_parent_resolves_the_childs_schema_into_its_agent_tool(server, api):
    # Given a child that declares its input, and a parent whose agent runs it as a tool
    put(api, orders("orders-child"))
    parent = {
        "id": "orders-agent",
        "start": "ask",
        "steps": {
            "ask": {
                "type": "agent",
                "model": "scripted:none",
                "prompt": "Handle it",
                "tools": ["workflow.orders-child"],
            }
        },
    }
    # When the parent is published
    put(api, parent)
    # Then its compiled agent config carries the child's schema
    head = server.control().dal.get_workflow("local", "orders-agent")
    assert head is not None
    described = client("stepfunctions").describe_state_machine(
        stateMachineArn=head.state_machine_arn
    )
    asl = json.loads(described["definition"])
    config = json.loads(asl["States"]["ask"]["Parameters"]["Payload"]["step"]["config"])
    assert config["workflow_schemas"] == {"orders-child": SCHEMA}


def test_batched_triggers_are_each_checked_on_arrival_and_the_batch_starts(server, api):
    # Given a webhook whose workflow batches two deliveries per run and declares its input
    slug = f"orders-batch-{uuid.uuid4().hex[:8]}"
    definition = orders("orders-batch", [{"type": "webhook", "slug": slug}])
    definition["batch"] = {"max_size": 2}
    put(api, definition)
    with httpx.Client(base_url=server.url, timeout=HTTP_TIMEOUT) as public:
        first = public.post(f"/hooks/{slug}", json={"order": 1})
        refused = public.post(f"/hooks/{slug}", json={"order": "two"})
        second = public.post(f"/hooks/{slug}", json={"order": 3})
    # Then the bad one was refused on arrival, and the batch (a list) started unchecked
    assert refused.status_code == 422 and refused.json()["code"] == "invalid_input"
    assert (first.status_code, second.status_code) == (202, 202)
    assert first.json()["admission"] == second.json()["admission"] == "batched"
    (run,) = runs(api, "orders-batch")
    stored = server.control().dal.get_run("local", run["run_id"])
    assert stored is not None and json.loads(stored.input) == [{"order": 1}, {"order": 3}]
    assert stored.trigger_type == "batch"


def test_publishing_a_sub_workflow_parent_compiles_the_childs_input_check(server, api):
    # Given a child with an input_schema published as version 1, then changed to take anything
    put(api, orders("orders-pinned"))
    loose = {**orders("orders-pinned"), "input_schema": {"type": "object"}}
    put(api, loose)
    # (a change of input_schema alone publishes a new version, whose schema starts check)
    detail = api.get("/workflows/orders-pinned").json()
    assert detail["live_version"] == 2, detail
    answer = api.post("/workflows/orders-pinned/runs", json={"input": {"order": "x"}})
    assert answer.status_code == 201, answer.text
    pinned = api.post("/workflows/orders-pinned/runs", json={"input": {"order": "x"}, "version": 1})
    assert pinned.status_code == 422 and pinned.json()["code"] == "invalid_input"
    step = {"type": "sub_workflow", "workflow_id": "orders-pinned", "input": {"order": 1}}

    def published_check(parent_id: str, **pin: Any) -> Any:
        put(api, {"id": parent_id, "start": "call", "steps": {"call": {**step, **pin}}})
        head = server.control().dal.get_workflow("local", parent_id)
        assert head is not None
        described = client("stepfunctions").describe_state_machine(
            stateMachineArn=head.state_machine_arn
        )
        check = json.loads(described["definition"])["States"]["call.check_input"]
        return json.loads(check["Parameters"]["Payload"]["step"]["config"])["input_check"]

    # When parents start the live version and the pinned version 1
    # Then each checks against the schema of the version it starts
    assert published_check("orders-live-parent")["schema"] == {"type": "object"}
    assert published_check("orders-pinned-parent", version=1)["schema"] == SCHEMA
