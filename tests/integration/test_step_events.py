"""Per-step lifecycle events on the local runtime: a workflow with ``events: {steps: true}``
logs every event; the local stand-in for CloudWatch Logs ships the execution history to the
step-events function (``functions/step_events``), which publishes ``relayflow.step.*`` on the
Relayflow bus. Subscribers are EventBridge rules feeding SQS queues, one per tenant.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from event_schemas import validate_event

from relayflow.adapters.aws import client
from relayflow.control.recorder import record_status_change, status_change_event
from relayflow.control.service import ControlPlane
from relayflow.dal import create_table
from relayflow.dal.step_trace import StepTraceDal
from relayflow.errors import TransientError
from relayflow.local import LocalRuntime
from relayflow.local.step_logs import StepLogShipper
from relayflow.settings import get_settings, override_settings

pytestmark = pytest.mark.integration

LOG_GROUP = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/vendedlogs/states/steps:*"
ERROR_GROUP = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/vendedlogs/states/errors:*"


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with (
        LocalRuntime(time_scale=0.001) as rt,
        override_settings(
            step_events_log_group_arn=LOG_GROUP, state_machine_log_group_arn=ERROR_GROUP
        ),
    ):
        create_table(client("dynamodb"))
        rt.events_client.create_event_bus(Name=get_settings().event_bus_name)
        yield rt


@pytest.fixture
def shipper(runtime: LocalRuntime) -> StepLogShipper:
    handler = runtime.handlers.get("relayflow-step_events")
    if handler is None:
        from relayflow.local.lambda_endpoint import HandlerRegistry

        registry = HandlerRegistry(None, runtime.functions_dir)
        handler = registry.resolve("relayflow-step_events")
    assert handler is not None
    return StepLogShipper(runtime, handler, log_group_arn=LOG_GROUP)


def subscribe(runtime: LocalRuntime, tenant: str) -> dict[str, Any]:
    """An SQS queue fed by a rule that takes the tenant's step events, as a tenant's
    integration would subscribe."""
    sqs = runtime.client("sqs")
    url = sqs.create_queue(QueueName=f"steps-{tenant}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    bus = get_settings().event_bus_name
    pattern = {
        "source": ["relayflow"],
        "detail-type": [{"prefix": "relayflow.step."}],
        "detail": {"tenant": [tenant]},
    }
    runtime.events_client.put_rule(
        Name=f"steps-{tenant}", EventBusName=bus, EventPattern=json.dumps(pattern)
    )
    runtime.events_client.put_targets(
        Rule=f"steps-{tenant}", EventBusName=bus, Targets=[{"Id": "queue", "Arn": arn}]
    )
    return {"sqs": sqs, "url": url}


def drain(queue: dict[str, Any]) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while True:
        got = queue["sqs"].receive_message(QueueUrl=queue["url"], MaxNumberOfMessages=10)
        messages = got.get("Messages", [])
        if not messages:
            return seen
        for message in messages:
            event = json.loads(message["Body"])
            validate_event(event)  # every event the step-events function emits: docs/events/
            seen.append(event)
            queue["sqs"].delete_message(
                QueueUrl=queue["url"], ReceiptHandle=message["ReceiptHandle"]
            )


def finish(runtime: LocalRuntime, plane: ControlPlane, tenant: str, run_id: str) -> Any:
    run = plane.dal.get_run(tenant, run_id)
    assert run is not None and run.execution_arn
    runtime.wait(run.execution_arn, timeout=30)
    described = runtime.sfn_client.describe_execution(executionArn=run.execution_arn)
    record_status_change(status_change_event(described), control=plane)
    return run


def three_steps(steps: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "orders",
        "start": "shape",
        "steps": {
            "shape": {
                "type": "transform",
                "mapping": {"id": "{{ trigger.id }}"},
                "on_success": "price",
            },
            # CEL arithmetic has no native form: this step runs in the transform Lambda.
            "price": {
                "type": "transform",
                "mapping": {"total": "{{ trigger.n * 2 }}"},
                "retry": {"max_attempts": 3, "backoff": "fixed", "base_seconds": 1},
                "on_success": "done",
            },
            "done": {"type": "noop"},
        },
    }
    if steps:
        data["events"] = {"steps": True}
    # Standard, whose log level the opt-in switches (an Express machine logs ALL anyway).
    data["engine"] = "standard"
    return data


def flaky_transform(runtime: LocalRuntime, failures: int) -> list[int]:
    """Make the transform function fail ``failures`` times with Relayflow.Transient, then run
    the real handler."""
    from relayflow.local.lambda_endpoint import HandlerRegistry

    real = HandlerRegistry(None, runtime.functions_dir).resolve("relayflow-transform")
    assert real is not None
    calls: list[int] = []

    def handler(event: dict[str, Any], context: Any) -> Any:
        calls.append(1)
        if len(calls) <= failures:
            raise TransientError("the upstream is down")
        return real(event, context)

    runtime.register_handler("relayflow-transform", handler)
    return calls


def test_a_subscriber_receives_every_steps_events_in_order_with_attempts(runtime, plane, shipper):
    # Given a tenant's workflow that publishes step events, and subscriptions of two tenants
    tenant, other = f"t-{uuid.uuid4().hex[:8]}", f"o-{uuid.uuid4().hex[:8]}"
    mine, theirs = subscribe(runtime, tenant), subscribe(runtime, other)
    plane.put_workflow(tenant, "orders", three_steps())
    # And a price step whose first attempt fails transiently
    calls = flaky_transform(runtime, failures=1)
    try:
        # When a run finishes and its logs are shipped
        run_id = plane.start_run(tenant, "orders", {"id": "o-1", "n": 21}).run_id
        run = finish(runtime, plane, tenant, run_id)
        assert plane.get_run(tenant, run_id).status == "succeeded"
        shipper.ship([run.execution_arn])
    finally:
        runtime.handlers.pop("relayflow-transform", None)
    assert len(calls) == 2
    # Then the tenant's subscription got started/succeeded for every step, in run order,
    # and the retried step's second attempt as retrying
    events = drain(mine)
    seen = [(e["detail-type"], e["detail"]["step"], e["detail"]["attempt"]) for e in events]
    assert seen == [
        ("relayflow.step.started", "shape", 1),
        ("relayflow.step.succeeded", "shape", 1),
        ("relayflow.step.started", "price", 1),
        ("relayflow.step.retrying", "price", 2),
        ("relayflow.step.succeeded", "price", 2),
        ("relayflow.step.started", "done", 1),
        ("relayflow.step.succeeded", "done", 1),
    ]
    for event in events:
        detail = event["detail"]
        assert (detail["tenant"], detail["workflow_id"], detail["run_id"]) == (
            tenant,
            "orders",
            run_id,
        )
        assert event["resources"] == [run.execution_arn]
    retrying = events[3]["detail"]
    assert retrying["error"] == "Relayflow.Transient"
    ended = [e["detail"] for e in events if e["detail-type"] == "relayflow.step.succeeded"]
    assert all(d["duration_ms"] is not None and d["duration_ms"] >= 0 for d in ended)
    assert len({e["detail"]["event_id"] for e in events}) == len(events)
    # And the other tenant's subscription received none
    assert drain(theirs) == []
    # And no trace is left behind once every state exited
    assert StepTraceDal().states(tenant, run_id) == []


def test_shipping_again_publishes_nothing_new(runtime, plane, shipper):
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    mine = subscribe(runtime, tenant)
    plane.put_workflow(tenant, "orders", three_steps())
    run_id = plane.start_run(tenant, "orders", {"id": "o-2", "n": 1}).run_id
    run = finish(runtime, plane, tenant, run_id)
    assert shipper.ship([run.execution_arn]) > 0
    assert shipper.ship([run.execution_arn]) == 0
    assert len(drain(mine)) == 6


def test_a_workflow_without_the_opt_in_logs_errors_only_and_publishes_nothing(
    runtime, plane, shipper
):
    # Given a workflow without events.steps
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    mine = subscribe(runtime, tenant)
    head = plane.put_workflow(tenant, "orders", three_steps(steps=False))
    machine = runtime.sfn_client.describe_state_machine(
        stateMachineArn=plane.dal.get_workflow(tenant, "orders").state_machine_arn
    )
    # Then its machine logs errors only, to the stack's log group
    assert machine["loggingConfiguration"]["level"] == "ERROR"
    # When it runs, nothing is shipped or published
    run_id = plane.start_run(tenant, "orders", {"id": "o-3", "n": 1}).run_id
    run = finish(runtime, plane, tenant, run_id)
    assert shipper.ship([run.execution_arn]) == 0
    assert drain(mine) == []
    # When the opt-in is added, a new version switches the machine to level ALL
    again = plane.put_workflow(tenant, "orders", three_steps(steps=True))
    assert again.version != head.version
    machine = runtime.sfn_client.describe_state_machine(stateMachineArn=machine["stateMachineArn"])
    logging = machine["loggingConfiguration"]
    assert (logging["level"], logging["includeExecutionData"]) == ("ALL", False)
