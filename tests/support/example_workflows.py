"""The repository's example workflows set up for a run on the local runtime.

On pytest's ``pythonpath`` (pyproject.toml), so any test imports it by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from relayflow_testing import ROOT


@dataclass
class OrderFulfilment:
    workflow: Any
    trigger: dict[str, Any]
    #: An SQS queue a rule on the ``app-shop`` bus copies the ``shop.orders`` events to.
    seen_events: str


def order_fulfilment() -> OrderFulfilment:
    """The order-fulfilment example with its local resources provisioned (in the active moto
    or local runtime), a queue that sees the events it puts, and its sample trigger."""
    from relayflow.adapters.aws import client
    from relayflow.local.resources import load_resources, provision
    from relayflow.validation import load_workflow

    provision(load_resources(ROOT / "workflows/examples/local/order_fulfilment.resources.yaml"))
    queue_url = client("sqs").create_queue(QueueName="seen-events")["QueueUrl"]
    queue_arn = client("sqs").get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    client("events").put_rule(
        Name="all", EventBusName="app-shop", EventPattern='{"source": ["shop.orders"]}'
    )
    client("events").put_targets(
        Rule="all", EventBusName="app-shop", Targets=[{"Id": "q", "Arn": queue_arn}]
    )
    workflow = load_workflow(ROOT / "workflows/examples/order_fulfilment.yaml")
    trigger = json.loads((ROOT / "events/examples/order_fulfilment.json").read_text())
    return OrderFulfilment(workflow, trigger, queue_url)
