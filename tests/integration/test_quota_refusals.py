"""``PUT /workflows/{id}`` of a definition whose machine would pass a Step Functions quota:
422 ``invalid_definition`` with the path and rule, and no state machine created, whether
validation sees it (a long chain) or only the deployment does (the child input schemas its
sub_workflow steps embed)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration

TOOL = {
    "type": "tool",
    "tool": "aws.sqs.send_message",
    "args": {"queue_url": "q", "body": "{{ run.id }}"},
}


@pytest.fixture
def http(server: LocalServer) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {server.bootstrap_key}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
        yield client


def machines(server: LocalServer) -> set[str]:
    assert server.runtime is not None
    listed = server.runtime.sfn_client.list_state_machines()["stateMachines"]
    return {machine["name"] for machine in listed}


def chain(workflow_id: str, count: int, step: dict[str, Any]) -> dict[str, Any]:
    steps = {
        f"s{i}": {**step, **({"on_success": f"s{i + 1}"} if i + 1 < count else {})}
        for i in range(count)
    }
    return {"id": workflow_id, "start": "s0", "steps": steps}


def assert_refused_for_size(response: httpx.Response) -> str:
    """The 422 body's one problem: at ``steps``, rule ``compiled-size``; its message."""
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["code"] == "invalid_definition"
    (problem,) = body["details"]
    assert (problem["path"], problem["rule"]) == ("steps", "compiled-size")
    assert "bytes; Step Functions accepts at most 1,048,576" in problem["message"]
    return str(problem["message"])


def test_a_1300_step_chain_is_refused_with_422_and_nothing_is_deployed(server, http):
    before = machines(server)
    # When a chain of 1,300 tool steps is PUT
    response = http.put("/workflows/long-chain", json=chain("long-chain", 1300, TOOL))
    # Then the API answers 422 invalid_definition at `steps`, rule compiled-size
    message = assert_refused_for_size(response)
    assert "Largest steps: s" in message
    # and nothing was stored or deployed
    assert http.get("/workflows/long-chain").status_code == 404
    assert machines(server) == before


def test_a_parent_that_embeds_large_child_schemas_is_refused_with_422_not_500(server, http):
    # Given a child whose input_schema is near the 16 KB limit
    schema = {
        "type": "object",
        "properties": {f"field_{i:04d}": {"type": "string"} for i in range(520)},
    }
    child = {"id": "child", "input_schema": schema, "start": "a", "steps": {"a": {"type": "noop"}}}
    assert http.put("/workflows/child", json=child).status_code in (200, 201)
    before = machines(server)
    # When a parent whose 70 sub_workflow steps each check their input against that schema
    # is PUT (valid on its own: validation does not know the child's schema)
    steps: dict[str, Any] = {
        f"call_{i}": {"type": "sub_workflow", "workflow_id": "child"} for i in range(70)
    }
    for i in range(69):
        steps[f"call_{i}"]["on_success"] = f"call_{i + 1}"
    parent = {"id": "parent", "start": "call_0", "steps": steps}
    response = http.put("/workflows/parent", json=parent)
    # Then the API answers 422 naming the steps that embed the schema, not 500 compiler_bug
    message = assert_refused_for_size(response)
    assert "each embed their child's input_schema" in message
    # and no state machine was created for the parent
    assert http.get("/workflows/parent").status_code == 404
    assert machines(server) == before
