"""No event lost between services: a recorder failure lands in its queue, and the replay
records the run.

As deployed (template.yaml): Step Functions status changes reach the recorder through an
EventBridge rule, an asynchronous invocation; after Lambda's retries a failing invocation goes
to the recorder's on-failure destination (SQS); ``relayflow ops redrive <queue>`` replays it.
Here the local runtime's event router plays EventBridge and Lambda's async invoker, with the
recorder's on-failure destination configured as the template configures it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from relayflow.cli.main import main
from relayflow.control.recorder import status_change_event
from relayflow.control.redrive import RedriveError, parse_message, redrive
from relayflow.control.service import ControlPlane
from relayflow.local import LocalRuntime
from relayflow.local.eventbridge import LocalEventRouter
from relayflow.naming import function_arn, function_name
from relayflow.settings import override_settings

pytestmark = pytest.mark.integration

GREET = {
    "id": "greet",
    # The recorder hears of Standard runs only (an Express machine records its own end).
    "engine": "standard",
    "start": "done",
    "steps": {"done": {"type": "transform", "mapping": {"greeting": "hi"}}},
}
RULE = "run-status-changes"


@pytest.fixture
def queue(runtime) -> tuple[str, str]:
    """A fresh recorder queue: (url, arn)."""
    sqs = runtime.client("sqs")
    url = sqs.create_queue(QueueName=f"recorder-dlq-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return url, arn["QueueArn"]


@pytest.fixture
def router(runtime, queue) -> Iterator[LocalEventRouter]:
    # The status-change rule of template.yaml, targeting the recorder, whose failures go to
    # its queue (EventInvokeConfig.DestinationConfig.OnFailure).
    events = runtime.events_client
    events.put_rule(
        Name=RULE,
        EventPattern=json.dumps(
            {"source": ["aws.states"], "detail-type": ["Step Functions Execution Status Change"]}
        ),
    )
    events.put_targets(Rule=RULE, Targets=[{"Id": "recorder", "Arn": function_arn("recorder")}])
    with LocalEventRouter(
        runtime, failure_destinations={function_name("recorder"): queue[1]}
    ) as opened:
        yield opened
    events.remove_targets(Rule=RULE, Ids=["recorder"])
    events.delete_rule(Name=RULE)


def finished_event(runtime: LocalRuntime, plane: ControlPlane, tenant: str) -> tuple[str, dict]:
    """Run GREET to its end; its run id and the status change AWS would send."""
    plane.put_workflow(tenant, "greet", GREET)
    run = plane.start_run(tenant, "greet", {"n": 1})
    arn = plane.dal.get_run(tenant, run.run_id).execution_arn
    runtime.wait(arn, timeout=30)
    event = status_change_event(runtime.sfn_client.describe_execution(executionArn=arn))
    return run.run_id, event


def put_status_change(runtime: LocalRuntime, event: dict) -> None:
    runtime.events_client.put_events(
        Entries=[
            {
                "Source": event["source"],
                "DetailType": event["detail-type"],
                "Detail": json.dumps(event["detail"]),
                "Resources": event.get("resources", []),
            }
        ]
    )


def messages(runtime: LocalRuntime, url: str) -> list[dict]:
    sqs = runtime.client("sqs")
    found = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=0
    ).get("Messages", [])
    return found


def test_a_recorder_failure_lands_in_its_queue_and_the_replay_records_the_run(
    runtime, router, queue
):
    # Given a run that ended while the recorder cannot reach its table (an outage)
    plane = ControlPlane()
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    run_id, event = finished_event(runtime, plane, tenant)
    assert plane.get_run(tenant, run_id).status == "running"
    with override_settings(table_name="relayflow-outage"):
        put_status_change(runtime, event)
        assert router.settle(30)
    # Then the invocation failed every try and its record is in the recorder's queue
    (delivery,) = [d for d in router.deliveries if d.rule == RULE]
    assert delivery.error and delivery.attempts == router.attempts
    assert delivery.dead_lettered_to == queue[1]
    (message,) = messages(runtime, queue[0])
    target, payload = parse_message(message)
    assert target.startswith(function_arn("recorder"))
    assert payload["detail"]["name"] == run_id
    assert plane.get_run(tenant, run_id).status == "running"

    # When the outage is over and the queue is redriven
    result = redrive(queue[0])
    # Then the run is recorded as its execution ended, and the queue is empty
    assert [r.ok for r in result.replays] == [True], result.replays
    assert plane.get_run(tenant, run_id).status == "succeeded"
    assert messages(runtime, queue[0]) == []
    # And a second redrive finds nothing to replay
    assert redrive(queue[0]).replays == []


def test_a_replay_that_fails_again_stays_in_the_queue(runtime, router, queue, capsys):
    # Given a dead-lettered status change
    plane = ControlPlane()
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    run_id, event = finished_event(runtime, plane, tenant)
    with override_settings(table_name="relayflow-outage"):
        put_status_change(runtime, event)
        assert router.settle(30)
        # When it is redriven (through the CLI) while the outage lasts
        code = main(["ops", "redrive", queue[0]])
    # Then the command fails, says so, and the message is still there
    assert code == 1
    out = capsys.readouterr().out
    assert "0 replayed, 1 left in the queue" in out, out
    assert len(messages(runtime, queue[0])) == 1, out
    # And once the outage is over, the same command records the run
    assert main(["ops", "redrive", queue[0]]) == 0
    assert plane.get_run(tenant, run_id).status == "succeeded"


def test_eventbridge_and_scheduler_dead_letters_name_their_target_in_an_attribute():
    # Given an EventBridge (or Scheduler) dead letter: the payload as body, the target aside
    message = {
        "MessageId": "m-1",
        "Body": json.dumps({"kind": "schedule", "tenant": "acme"}),
        "MessageAttributes": {
            "TARGET_ARN": {"StringValue": function_arn("trigger"), "DataType": "String"}
        },
    }
    # Then the replay targets the trigger with the payload unchanged
    assert parse_message(message) == (
        function_arn("trigger"),
        {"kind": "schedule", "tenant": "acme"},
    )


def test_a_message_naming_a_foreign_function_is_refused():
    message = {
        "MessageId": "m-2",
        "Body": json.dumps(
            {
                "requestContext": {"functionArn": "arn:aws:lambda:us-east-1:1:function:payroll"},
                "requestPayload": {},
            }
        ),
    }
    with pytest.raises(RedriveError, match="not a Relayflow function"):
        parse_message(message)
