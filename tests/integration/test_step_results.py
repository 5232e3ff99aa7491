"""Step-result caching with the real step functions: a duplicate invocation acts once (the
receiving server, the user's table, the code's own file see one action), a failure is not
recorded, and a run restarted under the same run id on the local runtime replays the steps
that already succeeded instead of acting again."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aws_resources import create_orders_table
from relayflow_testing import (
    Received,
    Reply,
    Server,
    fresh_allowed_server,
    load_event,
    load_handler,
    recorded_outputs,
    set_step_config,
    step_config,
)
from sample_helpers import at_server

from relayflow.compiler import compile_workflow
from relayflow.document import execution_input
from relayflow.errors import TransientError
from relayflow.local import LocalRuntime
from relayflow.local.resources import LocalResources, provision
from relayflow.settings import get_settings
from relayflow.validation import load_workflow_text

pytestmark = pytest.mark.integration
CONTEXT = SimpleNamespace(
    function_name="relayflow-dev", get_remaining_time_in_millis=lambda: 30_000
)


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with LocalRuntime(time_scale=0.001) as rt:
        # The sample's tenant and the other tenant of the last case each hold their own.
        provision(
            LocalResources(
                secrets={
                    "relayflow/local/acme/hook-secret": "s3cr3t",
                    "relayflow/local/globex/hook-secret": "g",
                }
            )
        )
        yield rt


server = pytest.fixture(fresh_allowed_server, name="server")


def fresh(event: dict[str, Any], **run: Any) -> dict[str, Any]:
    """The sample as a step of a run of its own (tests share the table)."""
    event["doc"]["run"]["id"] = f"run-{uuid.uuid4().hex[:12]}"
    event["doc"]["run"].update(run)
    return event


def step_records(run_id: str) -> list[dict[str, Any]]:
    from relayflow.dal.codec import deserialize

    raw = LocalRuntime.current().dynamodb_client.scan(TableName=get_settings().table_name)["Items"]
    return [deserialize(i) for i in raw if i["pk"]["S"].endswith(f"#STEP#{run_id}")]


# --------------------------------------------------------------------------- duplicates


def test_a_duplicate_webhook_out_sends_one_request(runtime, server):
    # Given the webhook_out sample, aimed at the recording server
    event = fresh(at_server(load_event("webhook_out", "order_created"), server))
    handler = load_handler("webhook_out").handler
    # When Lambda invokes it twice with the same payload
    first = handler(event, CONTEXT)
    second = handler(json.loads(json.dumps(event)), CONTEXT)
    # Then the receiver got one request, and both invocations returned the same result
    assert len(server.requests) == 1
    assert second == first
    assert first["output"]["status"] == 200
    # And the record sits in the run's partition of the sample's tenant
    (record,) = step_records(event["doc"]["run"]["id"])
    assert record["pk"] == f"TENANT#acme#STEP#{event['doc']['run']['id']}"
    assert record["status"] == "COMPLETED"


def test_a_duplicate_custom_step_posts_once(runtime, server):
    event = fresh(at_server(load_event("custom", "unsigned_no_branches"), server))
    handler = load_handler("custom").handler
    first = handler(event, CONTEXT)
    second = handler(event, CONTEXT)
    assert len(server.requests) == 1
    assert second == first


def test_a_duplicate_put_item_tool_writes_once(runtime):
    # Given the put_item sample and the user's table
    dynamodb = runtime.dynamodb_client
    create_orders_table(dynamodb)
    event = fresh(load_event("tool", "dynamodb_put_item"))
    handler = load_handler("tool").handler
    key = {"pk": {"S": "acme#order#ord-1"}, "sk": {"S": "meta"}}
    # When it runs, the item is removed, and the same payload is invoked again
    first = handler(event, CONTEXT)
    assert "Item" in dynamodb.get_item(TableName="orders", Key=key)
    dynamodb.delete_item(TableName="orders", Key=key)
    second = handler(event, CONTEXT)
    # Then the second invocation did not write the item again, and answered the same
    assert "Item" not in dynamodb.get_item(TableName="orders", Key=key)
    assert second == first


def test_a_duplicate_code_step_runs_the_code_once(runtime, tmp_path: Path):
    # Given a code step that appends a line to a file and returns its process id
    log = tmp_path / "ran.txt"
    event = fresh(load_event("code", "score_order"))
    code = (
        "import os\n"
        "with open(trigger['log'], 'a') as f:\n"
        "    f.write('ran\\n')\n"
        "return {'pid': os.getpid()}\n"
    )
    set_step_config(event, {**step_config(event), "code": code})
    event["doc"]["trigger"]["log"] = str(log)
    handler = load_handler("code").handler
    # When it is invoked twice
    first = handler(event, CONTEXT)
    second = handler(event, CONTEXT)
    # Then the code ran once, and the second answer is the first one's (same child process)
    assert log.read_text() == "ran\n"
    assert second == first


def test_a_failed_webhook_out_is_not_recorded_so_the_retry_sends_again(runtime, server):
    # Given a receiver that is unavailable once, then answers
    answers = iter([503, 200, 200])

    def flaky(received: Received) -> Reply:
        return next(answers), {"Content-Type": "application/json"}, b'{"ok": true}'

    server.reply = flaky
    event = fresh(at_server(load_event("webhook_out", "order_created"), server))
    handler = load_handler("webhook_out").handler
    # When the first invocation fails and the retry succeeds
    with pytest.raises(TransientError):
        handler(event, CONTEXT)
    assert step_records(event["doc"]["run"]["id"]) == []
    result = handler(event, CONTEXT)
    # Then the retry sent the request again, and a third invocation replays its result
    assert len(server.requests) == 2
    assert handler(event, CONTEXT) == result
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "change",
    [
        {"index": 1},
        {"counters": {"steps": 3}},
        {"run": {"id": "run-other"}},
        {"run": {"tenant": "globex"}},
    ],
    ids=["another item", "another pass", "another run", "another tenant, same run id"],
)
def test_another_item_pass_run_or_tenant_sends_its_own_request(runtime, server, change):
    event = fresh(at_server(load_event("webhook_out", "order_created"), server))
    event["doc"].update(index=0, counters={"steps": 0})
    other = json.loads(json.dumps(event))
    other["doc"]["run"].update(change.pop("run", {}))
    other["doc"].update(change)
    handler = load_handler("webhook_out").handler
    handler(event, CONTEXT)
    handler(other, CONTEXT)
    assert len(server.requests) == 2


# --------------------------------------------------------------------------- restarts

ORDER = """
id: restart-order
start: notify
steps:
  notify:
    type: webhook_out
    url: "{url}/notify/{{{{ trigger.id }}}}"
    body: {{id: "{{{{ trigger.id }}}}"}}
    on_success: lines
  lines:
    type: for_each
    items: "{{{{ trigger.lines }}}}"
    step: ship
    on_success: charge
  ship:
    type: webhook_out
    url: "{url}/ship/{{{{ item }}}}"
    body: {{line: "{{{{ index }}}}"}}
  charge:
    type: webhook_out
    url: "{url}/charge"
    body: {{id: "{{{{ trigger.id }}}}"}}
"""


def routes(server: Server, charge_status: list[int]) -> None:
    """Answer every request 200 with a random token, except /charge: ``charge_status``."""

    def reply(received: Received) -> Reply:
        status = charge_status[0] if received.path == "/charge" else 200
        body = json.dumps({"path": received.path, "token": uuid.uuid4().hex}).encode()
        return status, {"Content-Type": "application/json"}, body

    server.reply = reply


def start(runtime: LocalRuntime, url: str, document: dict[str, Any], name: str) -> Any:
    compiled = compile_workflow(load_workflow_text(ORDER.format(url=url), "restart.yaml"))
    return runtime.run("relayflow-restart-order", compiled.asl, document, execution_name=name)


def step_outputs(record: Any) -> dict[str, Any]:
    assert record.status == "SUCCEEDED", (record.status, record.error, record.cause)
    return recorded_outputs(record)


def test_a_new_execution_of_the_same_run_sends_nothing_again(runtime, server):
    # Given a run that succeeded
    routes(server, [200])
    document = execution_input("restart-order", {"id": "o-1", "lines": ["a", "b"]})
    run_id = document["run"]["id"]
    first = start(runtime, server.url, document, run_id)
    assert first.status == "SUCCEEDED"
    sent = len(server.requests)
    assert sent == 4
    # When a new execution of the same state machine starts with the same input (same run id)
    second = start(runtime, server.url, document, f"{run_id}_r2")
    # Then the receiver got no request at all, and every step's output is the recorded one
    assert second.status == "SUCCEEDED"
    assert len(server.requests) == sent
    assert step_outputs(second) == step_outputs(first)


def test_a_restart_after_a_failure_acts_only_from_the_failed_step(runtime, server):
    # Given a run whose last step failed after the others succeeded
    charge_status = [500]
    routes(server, charge_status)
    document = execution_input("restart-order", {"id": "o-2", "lines": ["a", "b", "c"]})
    run_id = document["run"]["id"]
    failed = start(runtime, server.url, document, run_id)
    assert failed.status == "FAILED"
    assert failed.error == "Relayflow.HttpError"
    assert len(server.to("/notify/o-2")) == 1
    assert sorted(r.path for r in server.requests if r.path.startswith("/ship/")) == [
        "/ship/a",
        "/ship/b",
        "/ship/c",
    ]
    # When the receiver is fixed and the run is restarted under the same run id
    charge_status[0] = 200
    restarted = start(runtime, server.url, document, f"{run_id}_r2")
    # Then only the failed step acted again: one more /charge, nothing else
    assert restarted.status == "SUCCEEDED"
    assert len(server.to("/notify/o-2")) == 1
    assert len([r for r in server.requests if r.path.startswith("/ship/")]) == 3
    assert len(server.to("/charge")) == 2
    outputs = step_outputs(restarted)
    assert [o["output"]["body"]["path"] for o in outputs["lines"]] == [
        "/ship/a",
        "/ship/b",
        "/ship/c",
    ]
