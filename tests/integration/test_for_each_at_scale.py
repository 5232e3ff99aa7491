"""for_each at scale on the local runtime (issue 20, item 8): a distributed for_each reads
10,000 items from an S3 JSON lines object, runs each as a child execution, writes the results
to S3 and honours its tolerated-failure threshold; beyond it the step fails with a named error.

The item step is a native transform (no Lambda), so the cost per item is the interpreter's;
every hundredth row lacks the field the transform reads and fails its child execution
(``States.Runtime``). Measured here: about 9-10 s for the 10,000 items."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from relayflow_testing import platform_runtime

from relayflow.control.recorder import record_status_change, status_change_event
from relayflow.control.service import ControlPlane
from relayflow.local import LocalRuntime
from relayflow.runner import RunResult, run_workflow
from relayflow.settings import get_settings
from relayflow.validation import load_workflow_text

pytestmark = pytest.mark.integration

BUCKET = "app-exports"
#: The quota of events in one execution's history; the parent must stay far below it.
HISTORY_QUOTA = 25_000


def workflow(tolerated: str, *, items_from: str = "orders/{{ trigger.date }}.jsonl") -> Any:
    return load_workflow_text(
        f"""
id: price-export
start: each
steps:
  each:
    type: for_each
    items_from: "s3://{BUCKET}/{items_from}"
    step: price
    max_concurrency: 16
    tolerated_failures: "{tolerated}"
    on_success: report
  price:
    type: transform
    mapping:
      sku: "{{{{ item.sku }}}}"
      cents: "{{{{ item.cents }}}}"
      position: "{{{{ index }}}}"
  report:
    type: transform
    mapping: {{results: "{{{{ steps.each.output }}}}"}}
""",
        "price-export.yaml",
    )


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with platform_runtime() as rt:
        rt.s3_client.create_bucket(Bucket=BUCKET)
        yield rt


def put_rows(rt: LocalRuntime, key: str, count: int) -> None:
    """``count`` JSON lines under the local tenant's prefix; every 100th row has no sku."""
    lines = [
        json.dumps({"cents": i} if i % 100 == 99 else {"sku": f"SKU-{i}", "cents": i})
        for i in range(count)
    ]
    body = ("\n".join(lines) + "\n").encode()
    rt.s3_client.put_object(Bucket=BUCKET, Key=f"local/{key}", Body=body)


def read_json(rt: LocalRuntime, bucket: str, key: str) -> Any:
    return json.loads(rt.s3_client.get_object(Bucket=bucket, Key=key)["Body"].read())


def run(rt: LocalRuntime, wf: Any, trigger: Any) -> tuple[RunResult, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    result = run_workflow(wf, trigger, runtime=rt, timeout=600, on_event=events.append)
    return result, events


def test_ten_thousand_items_from_s3_jsonl_finish_with_results_in_s3(runtime):
    # Given 10,000 rows in S3, 100 of them bad, and a tolerance of 1%
    put_rows(runtime, "orders/2026-12-01.jsonl", 10_000)
    # When the run starts
    result, events = run(runtime, workflow("1%"), {"date": "2026-12-01"})
    # Then it succeeds: 100 failures of 10,000 is within 1%
    assert result.succeeded, (result.error, result.cause)
    # And the step's output says where the results are, and a later step read it
    where = result.output["steps"]["report"]["output"]["results"]
    assert where["bucket"] == "relayflow-payloads"
    assert where["manifest"].startswith("for_each/relayflow-price-export/each/")
    assert where["manifest"].endswith("/manifest.json")
    manifest = read_json(runtime, where["bucket"], where["manifest"])
    assert manifest["MapRunArn"] == where["map_run_arn"]
    # And the results in S3 hold every item: 9,900 succeeded, 100 failed
    (succeeded_file,) = manifest["ResultFiles"]["SUCCEEDED"]
    (failed_file,) = manifest["ResultFiles"]["FAILED"]
    succeeded = read_json(runtime, where["bucket"], succeeded_file["Key"])
    failed = read_json(runtime, where["bucket"], failed_file["Key"])
    assert len(succeeded) == 9_900 and len(failed) == 100
    outputs = {json.loads(r["Output"])["output"]["position"] for r in succeeded}
    assert outputs == {i for i in range(10_000) if i % 100 != 99}
    first = json.loads(succeeded[0]["Output"])
    assert first == {"output": {"sku": "SKU-0", "cents": 0, "position": 0}, "status": "succeeded"}
    assert {r["Error"] for r in failed} == {"States.Runtime"}
    assert {json.loads(r["Input"])["index"] % 100 for r in failed} == {99}
    # And the run's own history stays a few dozen events long, far below the quota
    assert len(events) < 100 < HISTORY_QUOTA


def test_beyond_the_threshold_the_step_fails_with_a_named_error(runtime):
    # Given 2,000 rows of which 20 are bad (1%), and no failure tolerated
    put_rows(runtime, "orders/2026-12-02.jsonl", 2_000)
    # When the run starts
    result, _ = run(runtime, workflow("0%"), {"date": "2026-12-02"})
    # Then the for_each step fails with States.ExceedToleratedFailureThreshold
    assert result.status == "failed"
    assert result.error == "States.ExceedToleratedFailureThreshold"
    assert "20 of 2000 items failed (1%)" in (result.cause or "")
    assert "report" not in {step.key for step in result.steps}


def test_an_object_outside_the_tenant_prefix_is_never_read(runtime):
    # Given an object at the bucket's root, outside the local tenant's prefix
    runtime.s3_client.put_object(Bucket=BUCKET, Key="orders/root.jsonl", Body=b'{"sku": "x"}\n')
    # When a run names it
    result, _ = run(runtime, workflow("0%", items_from="orders/root.jsonl"), {})
    # Then the reader looks under local/ and finds nothing: the run fails
    assert result.status == "failed"
    assert "NoSuchKey" in (result.cause or ""), result.cause


@pytest.mark.parametrize(
    ("key", "body", "items_format"),
    [
        ("prices.json", json.dumps([{"sku": "A", "cents": 1}, {"sku": "B", "cents": 2}]), None),
        ("prices.csv", "sku,cents\nA,1\nB,2\n", None),
        ("prices", '{"sku": "A", "cents": 1}\n{"sku": "B", "cents": 2}\n', "jsonl"),
    ],
)
def test_json_csv_and_jsonl_objects_give_the_same_items(runtime, key, body, items_format):
    runtime.s3_client.put_object(Bucket=BUCKET, Key=f"local/{key}", Body=body.encode())
    fmt = f"\n    items_format: {items_format}" if items_format else ""
    wf = load_workflow_text(
        f"""
id: small-export
start: each
steps:
  each:
    type: for_each
    items_from: "s3://{BUCKET}/{key}"{fmt}
    step: price
  price:
    type: transform
    mapping: {{sku: "{{{{ item.sku }}}}", cents: "{{{{ item.cents }}}}"}}
""",
        "small.yaml",
    )
    result, _ = run(runtime, wf, {})
    assert result.succeeded, (result.error, result.cause)
    out = result.output["steps"]["each"]["output"]
    manifest = read_json(runtime, out["bucket"], out["manifest"])
    records = read_json(runtime, out["bucket"], manifest["ResultFiles"]["SUCCEEDED"][0]["Key"])
    skus = sorted(json.loads(r["Output"])["output"]["sku"] for r in records)
    assert skus == ["A", "B"]


def test_document_items_run_distributed_when_asked(runtime):
    wf = load_workflow_text(
        """
id: doc-distributed
start: each
steps:
  each:
    type: for_each
    mode: distributed
    items: "{{ trigger.orders }}"
    step: double
    tolerated_failures: 1
  double:
    type: transform
    mapping: {n: "{{ item.n }}"}
""",
        "doc.yaml",
    )
    orders = [{"n": 1}, {"m": 2}, {"n": 3}]
    result, _ = run(runtime, wf, {"orders": orders})
    assert result.succeeded, (result.error, result.cause)
    out = result.output["steps"]["each"]["output"]
    manifest = read_json(runtime, out["bucket"], out["manifest"])
    assert len(manifest["ResultFiles"]["FAILED"]) == 1


def test_through_the_control_plane_each_tenant_reads_its_own_prefix(runtime):
    # Given the same workflow put by two tenants, each with its own rows under its prefix
    plane = ControlPlane()
    definition = {
        "id": "tally",
        "start": "each",
        "steps": {
            "each": {"type": "for_each", "items_from": f"s3://{BUCKET}/rows.jsonl", "step": "n"},
            "n": {"type": "transform", "mapping": {"n": "{{ item.n }}"}},
        },
    }
    results = {}
    for tenant, count in (("t-dist-a", 3), ("t-dist-b", 5)):
        body = "".join(json.dumps({"n": i}) + "\n" for i in range(count)).encode()
        runtime.s3_client.put_object(Bucket=BUCKET, Key=f"{tenant}/rows.jsonl", Body=body)
        plane.put_workflow(tenant, "tally", definition)
        run = plane.start_run(tenant, "tally", {})
        item = plane.dal.get_run(tenant, run.run_id)
        assert item is not None and item.execution_arn
        runtime.wait(item.execution_arn, timeout=60)
        described = runtime.sfn_client.describe_execution(executionArn=item.execution_arn)
        record_status_change(status_change_event(described), control=plane)
        results[tenant] = plane.get_run(tenant, run.run_id)
    # Then each run read its own tenant's object, and wrote under its own machine's prefix
    for tenant, count in (("t-dist-a", 3), ("t-dist-b", 5)):
        detail = results[tenant]
        assert detail.status == "succeeded", (detail.error, detail.cause)
        out = detail.output["steps"]["each"]["output"]
        stage = get_settings().stage
        assert out["manifest"].startswith(f"for_each/relayflow-{stage}-{tenant}_tally/each/")
        manifest = read_json(runtime, out["bucket"], out["manifest"])
        records = read_json(runtime, out["bucket"], manifest["ResultFiles"]["SUCCEEDED"][0]["Key"])
        assert len(records) == count
