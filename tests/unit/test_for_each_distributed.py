"""for_each at scale: validation of mode / items_from / tolerated_failures, the Distributed Map
the compiler emits for it, and the IAM statements it reports (docs/flow-control.md)."""

from __future__ import annotations

from typing import Any

import pytest

from relayflow.compiler import CompileOptions, compile_workflow
from relayflow.compiler.check import check_machine
from relayflow.definition.for_each import Tolerance, parse_tolerance
from relayflow.validation import validate_data


def definition(each: dict[str, Any], item: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "orders",
        "start": "each",
        "steps": {
            "each": {"type": "for_each", "step": "price", **each},
            "price": item or {"type": "transform", "mapping": {"sku": "{{ item.sku }}"}},
        },
    }


def problems_of(data: dict[str, Any]) -> set[tuple[str, str]]:
    workflow, problems = validate_data(data, "wf.yaml")
    assert workflow is None, "an invalid definition must not produce a model"
    return {(p.path, p.rule) for p in problems}


def compiled(data: dict[str, Any], options: CompileOptions | None = None) -> Any:
    workflow, problems = validate_data(data, "wf.yaml")
    assert workflow is not None, problems
    result = compile_workflow(workflow, options)
    assert check_machine(result.asl) == []
    return result


S3_JSONL = {"items_from": "s3://app-exports/orders/{{ trigger.date }}.jsonl"}


# ------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("each", "expected"),
    [
        ({}, ("steps.each", "for-each-items")),
        (
            {"items": "{{ trigger.orders }}", **S3_JSONL},
            ("steps.each", "for-each-items"),
        ),
        (
            {"items_from": "s3://Bad_Bucket/orders.jsonl"},
            ("steps.each.items_from", "for-each-distributed"),
        ),
        (
            {"items_from": "s3://app-exports/orders"},
            ("steps.each.items_format", "for-each-distributed"),
        ),
        (
            {"items_from": "s3://app-exports/{{ trigger.name + 'x' }}.json"},
            ("steps.each.items_from", "for-each-distributed"),
        ),
        (
            {"items_from": "s3://app-exports/{{ nothing.here }}.json"},
            ("steps.each.items_from", "unknown-variable"),
        ),
        (
            {"items_from": "s3://app-exports/{{ item.day }}.json"},
            ("steps.each.items_from", "unknown-variable"),
        ),
        ({**S3_JSONL, "mode": "inline"}, ("steps.each.mode", "for-each-distributed")),
        ({**S3_JSONL, "max_items": 50}, ("steps.each.max_items", "for-each-distributed")),
        (
            {**S3_JSONL, "on_item_failure": "continue"},
            ("steps.each.on_item_failure", "for-each-distributed"),
        ),
        (
            {"items": "{{ trigger.orders }}", "tolerated_failures": 3},
            ("steps.each.tolerated_failures", "for-each-distributed"),
        ),
        (
            {"items": "{{ trigger.orders }}", "items_format": "csv"},
            ("steps.each.items_format", "for-each-distributed"),
        ),
    ],
)
def test_bad_for_each_settings_are_refused_with_path_and_rule(each, expected):
    assert expected in problems_of(definition(each))


@pytest.mark.parametrize("value", ["2.5%", "101%", -1, True, "five", "5"])
def test_a_tolerance_is_a_count_or_a_whole_percentage(value):
    # Then anything but a non-negative count or "N%" (0-100) is refused, naming the field
    paths = {path for path, _ in problems_of(definition({**S3_JSONL, "tolerated_failures": value}))}
    assert "steps.each.tolerated_failures" in paths


def test_tolerances_parse_to_a_count_or_a_percentage():
    assert parse_tolerance(5) == Tolerance(count=5)
    assert parse_tolerance(" 7 %") == Tolerance(percentage=7)
    assert parse_tolerance("100%") == Tolerance(percentage=100)
    assert parse_tolerance(None) is None


# ------------------------------------------------------------------------------ compilation


def test_items_from_s3_compile_to_a_distributed_map_reading_under_the_tenant_prefix():
    result = compiled(definition({**S3_JSONL, "max_concurrency": 50, "tolerated_failures": "2%"}))
    state = result.asl["States"]["each"]
    # The run enters the Map itself: there is no item-count guard for an S3 object
    assert result.asl["StartAt"] == "each"
    assert state["ItemProcessor"]["ProcessorConfig"] == {
        "Mode": "DISTRIBUTED",
        "ExecutionType": "STANDARD",
    }
    assert state["ItemReader"] == {
        "Resource": "arn:aws:states:::s3:getObject",
        "ReaderConfig": {"InputType": "JSONL"},
        "Parameters": {
            "Bucket": "app-exports",
            "Key.$": "States.Format('{}/orders/{}.jsonl', $.run.tenant, $.trigger.date)",
        },
    }
    assert "ItemsPath" not in state
    assert state["MaxConcurrency"] == 50
    assert state["ToleratedFailurePercentage"] == 2
    assert "ToleratedFailureCount" not in state
    # The results go to the payload bucket under the machine's own prefix
    assert state["ResultWriter"] == {
        "Resource": "arn:aws:states:::s3:putObject",
        "Parameters": {"Bucket": "relayflow-payloads", "Prefix": "for_each/relayflow-orders/each"},
    }
    # and the step's output is where they are
    assert state["ResultSelector"]["output"] == {
        "bucket.$": "$.ResultWriterDetails.Bucket",
        "manifest.$": "$.ResultWriterDetails.Key",
        "map_run_arn.$": "$.MapRunArn",
    }
    assert result.step_runners["each"] == "native"


@pytest.mark.parametrize(
    ("items_from", "items_format", "reader_config"),
    [
        ("s3://app-x/a.json", None, {"InputType": "JSON"}),
        ("s3://app-x/a.ndjson", None, {"InputType": "JSONL"}),
        ("s3://app-x/a.csv", None, {"InputType": "CSV", "CSVHeaderLocation": "FIRST_ROW"}),
        ("s3://app-x/export", "csv", {"InputType": "CSV", "CSVHeaderLocation": "FIRST_ROW"}),
        ("s3://app-x/a.csv", "jsonl", {"InputType": "JSONL"}),
    ],
)
def test_the_reader_format_comes_from_items_format_or_the_extension(
    items_from, items_format, reader_config
):
    each: dict[str, Any] = {"items_from": items_from}
    if items_format:
        each["items_format"] = items_format
    state = compiled(definition(each)).asl["States"]["each"]
    assert state["ItemReader"]["ReaderConfig"] == reader_config


def test_document_items_in_distributed_mode_keep_the_item_count_guard():
    each = {"items": "{{ trigger.orders }}", "mode": "distributed", "max_items": 20_000}
    result = compiled(definition({**each, "tolerated_failures": 10}))
    states = result.asl["States"]
    assert result.asl["StartAt"] == "each.list"  # the list check, then the count
    assert states["each.list"]["Choices"][-1]["Next"] == "each.size"
    assert states["each.check"]["Choices"][0]["NumericGreaterThan"] == 20_000
    assert states["each"]["ItemsPath"] == "$.trigger.orders"
    assert states["each"]["ToleratedFailureCount"] == 10
    assert states["each"]["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"


def test_document_items_stay_inline_by_default():
    state = compiled(definition({"items": "{{ trigger.orders }}"})).asl["States"]["each"]
    assert state["ItemProcessor"]["ProcessorConfig"] == {"Mode": "INLINE"}
    assert not {"ItemReader", "ResultWriter", "ToleratedFailureCount"} & set(state)


def test_a_zero_tolerance_is_written_out():
    state = compiled(definition({**S3_JSONL, "tolerated_failures": 0})).asl["States"]["each"]
    assert state["ToleratedFailureCount"] == 0


# ------------------------------------------------------------------------------ IAM


def test_iam_grants_the_map_its_own_children_its_items_and_its_result_prefix():
    options = CompileOptions(
        region="eu-west-1",
        account="111122223333",
        state_machine_name=lambda workflow_id: f"relayflow-prod-acme_{workflow_id}",
        payload_bucket="relayflow-prod-payloads",
    )
    statements = compiled(definition(S3_JSONL), options).iam_statements
    grants = {(a, r) for s in statements for a in s["Action"] for r in s["Resource"]}
    machine = "arn:aws:states:eu-west-1:111122223333:stateMachine:relayflow-prod-acme_orders"
    executions = "arn:aws:states:eu-west-1:111122223333:execution:relayflow-prod-acme_orders/*"
    results = "arn:aws:s3:::relayflow-prod-payloads/for_each/relayflow-prod-acme_orders/*"
    assert ("states:StartExecution", machine) in grants
    assert ("states:DescribeExecution", executions) in grants
    assert ("states:StopExecution", executions) in grants
    assert ("s3:PutObject", results) in grants
    assert ("s3:GetObject", "arn:aws:s3:::app-exports/*") in grants
    # and nothing wider: no S3 action on a whole bucket or on every bucket
    s3 = [r for a, r in grants if a.startswith("s3:")]
    assert all(r.count("/") >= 1 and not r.startswith("arn:aws:s3:::*") for r in s3)
    assert {a for a, _ in grants if a.startswith("s3:")} == {
        "s3:GetObject",
        "s3:PutObject",
        "s3:ListMultipartUploadParts",
        "s3:AbortMultipartUpload",
    }


def test_an_inline_for_each_asks_for_no_s3_or_child_grants():
    statements = compiled(definition({"items": "{{ trigger.orders }}"})).iam_statements
    actions = {a for s in statements for a in s["Action"]}
    assert not {a for a in actions if a.startswith(("s3:", "states:"))}


# ------------------------------------------------------------------------------ the check


def distributed_machine() -> dict[str, Any]:
    return compiled(definition({**S3_JSONL, "tolerated_failures": "5%"})).asl


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.update(ToleratedFailurePercentage=2.5), "ToleratedFailurePercentage"),
        (lambda m: m.update(ToleratedFailureCount=-1), "ToleratedFailureCount"),
        (
            lambda m: m["ItemProcessor"]["ProcessorConfig"].pop("ExecutionType"),
            "ExecutionType is STANDARD or EXPRESS",
        ),
        (lambda m: m["ItemReader"]["ReaderConfig"].update(InputType="XML"), "InputType 'XML'"),
        (lambda m: m["ItemReader"]["Parameters"].update({"Key.$": "orders"}), "Key.$"),
        (lambda m: m["ResultWriter"].pop("Resource"), "ResultWriter needs a Resource"),
        (
            lambda m: m["ItemProcessor"].update(ProcessorConfig={"Mode": "INLINE"}),
            "needs a DISTRIBUTED item processor",
        ),
        (
            lambda m: m["ItemProcessor"].update(ProcessorConfig={"Mode": "PARALLEL"}),
            "INLINE or DISTRIBUTED",
        ),
    ],
)
def test_the_check_refuses_broken_distributed_maps(change, message):
    # Given a compiled distributed for_each (which passes the check)
    asl = distributed_machine()
    # When one of its Distributed Map fields is broken
    change(asl["States"]["each"])
    # Then the check names the state and what is wrong
    violations = check_machine(asl)
    assert any(v.state == "each" and message in v.message for v in violations), violations
