"""Approval-gated agent tool calls on `relayflow serve` (LocalServer): the call waits in a
compiled approval state, a guest link decides it, and the loop resumes. Approved: the tool
runs exactly once. Rejected: it never runs, and the model is told."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_api import finished_run, stored_approval
from relayflow_testing import HTTP_TIMEOUT, Server, allowed_server

from relayflow.approvals.links import approval_guest_links
from relayflow.local.serve import LocalServer
from relayflow.settings import override_settings

pytestmark = pytest.mark.integration


def call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "input": args}


TURNS = [
    {"content": [call("c1", "http_billing_invoice", {"id": "inv-7"})]},
    {
        "content": [
            {"type": "text", "text": "Refunding."},
            call("c2", "http_billing_refund", {"id": "inv-7"}),
        ]
    },
    {"content": [{"type": "text", "text": "Done."}]},
]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalServer, Server]]:
    folder: Path = tmp_path_factory.mktemp("fixtures")
    (folder / "refunds.json").write_text(json.dumps({"turns": TURNS}))
    with (
        allowed_server() as tools,
        override_settings(ai_fixtures_dir=str(folder), ssrf_allow=["127.0.0.1"]),
        LocalServer(time_scale=0.01) as local,
    ):
        yield local, tools


def workflow(workflow_id: str, tools: Server) -> dict[str, Any]:
    return {
        "id": workflow_id,
        "start": "refunder",
        "http_tools": {
            "billing": {
                "base_url": f"{tools.url}/billing",
                "timeout_seconds": 30,
                "operations": {
                    "invoice": {"method": "GET", "path": "/invoices/{{ args.id }}"},
                    "refund": {
                        "method": "POST",
                        "path": "/refunds",
                        "body": {"invoice": "{{ args.id }}"},
                    },
                },
            }
        },
        "steps": {
            "refunder": {
                "type": "agent",
                "model": "scripted:refunds",
                "prompt": "Refund {{ trigger.invoice }}",
                "tools": ["http.billing.invoice", "http.billing.refund"],
                "require_approval_tools": ["http.billing.refund"],
            }
        },
    }


def pending(local: LocalServer, workflow_id: str, tools: Server) -> tuple[httpx.Client, str, Any]:

    api = httpx.Client(base_url=local.url, headers={"X-Api-Key": local.bootstrap_key}, timeout=30)
    assert api.put(f"/workflows/{workflow_id}", json=workflow(workflow_id, tools)).status_code in (
        200,
        201,
    )
    started = api.post(f"/workflows/{workflow_id}/runs", json={"input": {"invoice": "inv-7"}})
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    return api, run_id, stored_approval("local", run_id)


def refunds(tools: Server) -> list[Any]:
    return [json.loads(r.body) for r in tools.requests if r.path == "/billing/refunds"]


def test_an_approved_call_waits_is_approved_by_guest_link_runs_once_and_resumes(env):
    local, tools = env
    tools.requests.clear()
    # Given a run whose agent called the gated refund tool
    api, run_id, approval = pending(local, "agent-approve", tools)
    # Then it waits: the refund has not run, the invoice lookup has, and the request names it
    assert refunds(tools) == []
    assert [r.path for r in tools.requests] == ["/billing/invoices/inv-7"]
    assert approval.title == "Agent step 'refunder' asks to run http.billing.refund"
    assert api.get(f"/runs/{run_id}").json()["status"] == "running"
    # When a guest approves through the signed link
    answer = httpx.post(approval_guest_links(approval)["approve"], data={}, timeout=HTTP_TIMEOUT)
    assert answer.status_code == 200, answer.text
    # Then the tool runs exactly once and the loop finishes
    run = finished_run(api, run_id)
    assert run["status"] == "succeeded", run
    assert refunds(tools) == [{"invoice": "inv-7"}]
    output = run["output"]["steps"]["refunder"]["output"]
    assert output["response"] == "Done." and output["turns"] == 3
    assert [(c["tool"], c["status"]) for c in output["tool_calls"]] == [
        ("http.billing.invoice", "succeeded"),
        ("http.billing.refund", "succeeded"),
    ]
    assert output["tool_calls"][1]["approved_by"] == "guest:approve"


def test_a_rejected_call_never_runs_and_the_model_is_told(env):
    local, tools = env
    tools.requests.clear()
    api, run_id, approval = pending(local, "agent-reject", tools)
    # When the guest rejects
    answer = httpx.post(approval_guest_links(approval)["reject"], data={}, timeout=HTTP_TIMEOUT)
    assert answer.status_code == 200, answer.text
    # Then the refund never ran, the loop went on, and the rejection is recorded
    run = finished_run(api, run_id)
    assert run["status"] == "succeeded", run
    assert refunds(tools) == []
    calls = run["output"]["steps"]["refunder"]["output"]["tool_calls"]
    assert [(c["tool"], c["status"]) for c in calls] == [
        ("http.billing.invoice", "succeeded"),
        ("http.billing.refund", "rejected"),
    ]
    assert calls[1]["decided_by"] == "guest:reject"
