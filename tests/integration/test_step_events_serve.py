"""Per-step lifecycle events under ``relayflow serve``: a workflow registered over the API
with ``events: {steps: true}`` publishes its steps' events on the local bus, with no test
code in between (the server ships each run's history to the step-events function when the
run starts and when it ends)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from relayflow_testing import HTTP_TIMEOUT

from relayflow.local.serve import LocalServer
from relayflow.settings import get_settings

pytestmark = pytest.mark.integration


def test_serve_publishes_step_events_of_an_opted_in_workflow(server: LocalServer):
    assert server.runtime is not None
    sqs = server.runtime.client("sqs")
    url = sqs.create_queue(QueueName="serve-steps")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    bus = get_settings().event_bus_name
    events = server.runtime.events_client
    pattern = {"detail-type": [{"prefix": "relayflow.step."}], "detail": {"tenant": ["local"]}}
    events.put_rule(Name="serve-steps", EventBusName=bus, EventPattern=json.dumps(pattern))
    events.put_targets(Rule="serve-steps", EventBusName=bus, Targets=[{"Id": "q", "Arn": arn}])
    definition: dict[str, Any] = {
        "id": "greet",
        "events": {"steps": True},
        "start": "hello",
        "steps": {
            "hello": {"type": "transform", "mapping": {"hi": "there"}, "on_success": "done"},
            "done": {"type": "noop"},
        },
    }
    headers = {"Authorization": f"Bearer {server.bootstrap_key}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=HTTP_TIMEOUT) as api:
        assert api.put("/workflows/greet", json=definition).status_code in (200, 201)
        run_id = api.post("/workflows/greet/runs", json={"input": {}}).json()["run_id"]
        for _ in range(200):
            if api.get(f"/runs/{run_id}").json()["status"] != "running":
                break
            time.sleep(0.05)
    server.settle()
    seen: list[tuple[str, str]] = []
    for _ in range(40):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        for message in got:
            body = json.loads(message["Body"])
            assert body["detail"]["run_id"] == run_id
            seen.append((body["detail-type"], body["detail"]["step"]))
        if len(seen) >= 4:
            break
        time.sleep(0.05)
    assert seen == [
        ("relayflow.step.started", "hello"),
        ("relayflow.step.succeeded", "hello"),
        ("relayflow.step.started", "done"),
        ("relayflow.step.succeeded", "done"),
    ]
