"""What per-step lifecycle events cost per 1,000 steps, computed from a real local run.

``order_triage`` (every native step type and a Lambda step; ``events: {steps: true}`` added)
runs on the local runtime through the control plane, so its machine logs at level ALL. Its
execution history becomes the records Step Functions would log without execution data
(:func:`relayflow.local.step_logs.log_record`), and those go through the real step-events
handler (``functions/step_events``) twice:

- **best case**: the whole run in one subscription batch;
- **worst case**: every record in a batch of its own (CloudWatch Logs batches records that
  arrive together; a busy account sees far larger batches).

It counts the records and their bytes (CloudWatch Logs meters each event as its message plus
26 bytes), the Lambda invocations and their measured duration, the DynamoDB request units of
the step traces and the events put on the bus, and prices them with ``cost_bench``'s us-east-1
list prices plus CloudWatch Logs' vended-log ingestion. Storage of the log group (one retention
period of a few KB per 1,000 steps) is left out.

Run: ``.venv/bin/python bench/step_events_bench.py``.
"""

from __future__ import annotations

import json
import math
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cost_bench import (
    DDB_PER_READ_UNIT,
    DDB_PER_WRITE_UNIT,
    EVENTS_PER_EVENT,
    LAMBDA_MEMORY_GB,
    LAMBDA_PER_GB_SECOND,
    LAMBDA_PER_REQUEST,
    SFN_PER_TRANSITION,
)

from relayflow.adapters.aws import client
from relayflow.control.recorder import record_status_change, status_change_event
from relayflow.control.service import ControlPlane
from relayflow.control.step_events import encode_subscription, handle_subscription
from relayflow.dal import create_table
from relayflow.dal.step_trace import StepTraceDal
from relayflow.local import LocalRuntime
from relayflow.local.step_logs import log_record
from relayflow.settings import get_settings, override_settings

ROOT = Path(__file__).resolve().parents[1]
#: CloudWatch Logs vended logs (Step Functions) delivered to CloudWatch Logs: $0.50 per GB.
LOGS_PER_GB = 0.50
#: CloudWatch Logs meters each log event as its message plus this many bytes.
LOG_EVENT_OVERHEAD = 26
LOG_GROUP = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/vendedlogs/states/steps:*"


class CountingTraces(StepTraceDal):
    """The step-trace DAL, counting request units (items are far below 1 KB)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.writes = 0

    def states(self, tenant: str, execution: str) -> list[dict[str, Any]]:
        found = super().states(tenant, execution)
        self.reads += max(1, math.ceil(sum(len(json.dumps(t, default=str)) for t in found) / 4096))
        return found

    def save(self, tenant: str, execution: str, state: str, trace: dict[str, Any]) -> bool:
        self.writes += 1
        return super().save(tenant, execution, state, trace)

    def delete(self, tenant: str, execution: str, state: str) -> None:
        self.writes += 1
        super().delete(tenant, execution, state)


class CountingEvents:
    """An EventBridge client that counts the entries it puts."""

    def __init__(self) -> None:
        self.entries = 0
        self._client = client("events")

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.entries += len(Entries)
        return dict(self._client.put_events(Entries=Entries))


def deliver(records: list[dict[str, Any]], batches: list[list[dict[str, Any]]]) -> dict[str, Any]:
    traces, events = CountingTraces(), CountingEvents()
    started = time.perf_counter()
    billed_ms = 0
    for batch in batches:
        t0 = time.perf_counter()
        handle_subscription(
            encode_subscription(batch, log_group="/g", log_stream="s"), traces=traces, events=events
        )
        billed_ms += math.ceil((time.perf_counter() - t0) * 1000)
    return {
        "invocations": len(batches),
        "billed_ms": billed_ms,
        "seconds": time.perf_counter() - started,
        "reads": traces.reads,
        "writes": traces.writes,
        "events": events.entries,
    }


def main() -> None:
    definition = yaml.safe_load((ROOT / "workflows/examples/order_triage.yaml").read_text())
    definition["events"] = {"steps": True}
    trigger = json.loads((ROOT / "events/examples/order_triage.json").read_text())
    with (
        LocalRuntime(time_scale=0.001) as runtime,
        override_settings(step_events_log_group_arn=LOG_GROUP),
    ):
        create_table(client("dynamodb"))
        runtime.events_client.create_event_bus(Name=get_settings().event_bus_name)
        plane = ControlPlane()
        plane.put_workflow("bench", definition["id"], definition)
        run_id = plane.start_run("bench", definition["id"], trigger).run_id
        arn = plane.dal.get_run("bench", run_id).execution_arn
        runtime.wait(arn, timeout=60)
        record_status_change(
            status_change_event(runtime.sfn_client.describe_execution(executionArn=arn)),
            control=plane,
        )
        steps = [s for s in plane.get_run("bench", run_id).steps]
        history = runtime.sfn_client.get_execution_history(executionArn=arn, maxResults=1000)
        records = [log_record(e, arn) for e in history["events"]]
        transitions = sum(1 for e in history["events"] if e["type"].endswith("StateEntered"))
        best = deliver(records, [records])
        # The same run again under another execution name, one record per batch.
        other = arn.rsplit(":", 1)[0] + ":" + uuid.uuid4().hex
        again = [dict(r, execution_arn=other) for r in records]
        worst = deliver(again, [[r] for r in again])

    size = sum(len(json.dumps(r)) + LOG_EVENT_OVERHEAD for r in records)
    per = 1000 / len(steps)
    print(f"order_triage: {len(steps)} steps, {len(records)} log records, {size} bytes metered")
    print(f"  Step Functions transitions of the run itself: {transitions}")
    print("per 1,000 steps                       best case    worst case")
    logs = size * per / 1e9 * LOGS_PER_GB
    rows = [("CloudWatch Logs ingestion", logs, logs)]
    for name, key, price in (
        ("Lambda requests", "invocations", LAMBDA_PER_REQUEST),
        ("DynamoDB reads (RRU)", "reads", DDB_PER_READ_UNIT),
        ("DynamoDB writes (WRU)", "writes", DDB_PER_WRITE_UNIT),
        ("EventBridge PutEvents", "events", EVENTS_PER_EVENT),
    ):
        rows.append((name, best[key] * per * price, worst[key] * per * price))
    gb_s = LAMBDA_MEMORY_GB * LAMBDA_PER_GB_SECOND / 1000
    rows.append(
        ("Lambda duration", best["billed_ms"] * per * gb_s, worst["billed_ms"] * per * gb_s)
    )
    for name, low, high in rows:
        print(f"  {name:<34} ${low:>10.6f}  ${high:>10.6f}")
    print(f"  {'total':<34} ${sum(r[1] for r in rows):>10.6f}  ${sum(r[2] for r in rows):>10.6f}")
    print(f"  counts best {best}\n  counts worst {worst}")
    print(
        f"  for scale: the run's own transitions cost ${transitions * per * SFN_PER_TRANSITION:.6f}"
        " per 1,000 of these steps"
    )


if __name__ == "__main__":
    main()
