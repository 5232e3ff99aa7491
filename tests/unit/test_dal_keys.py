"""The table's keys, items, page tokens and schema: pure functions, no AWS."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from relayflow.control.limits import idempotent_run_id
from relayflow.dal import (
    ApiKeyItem,
    InvalidPageToken,
    RunItem,
    VersionItem,
    WorkflowItem,
    keys,
    schema,
)
from relayflow.dal.codec import decode_token, deserialize, encode_token, serialize
from relayflow.executions.stepfunctions import execution_arn, state_machine_name

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- keys


def test_every_tenant_owned_key_starts_with_the_tenant():
    # Given the keys of a workflow, a version, a run and the GSI1 partitions of one tenant
    built = [
        keys.workflow_key("acme", "orders")["pk"],
        keys.version_key("acme", "orders", 3)["pk"],
        keys.run_key("acme", "r1")["pk"],
        keys.workflows_partition("acme"),
        keys.runs_partition("acme", "orders"),
        keys.api_keys_partition("acme"),
    ]
    # Then each lies under TENANT#acme#, and never under a tenant whose id extends it
    assert all(k.startswith("TENANT#acme#") for k in built)
    assert not any(k.startswith("TENANT#acme-2#") for k in built)


def test_keys_match_the_contract():
    assert keys.api_key_key("ab12") == {"pk": "KEY#ab12", "sk": "KEY"}
    assert keys.workflow_key("t1", "wf") == {"pk": "TENANT#t1#WF#wf", "sk": "WF"}
    assert keys.version_key("t1", "wf", 7) == {"pk": "TENANT#t1#WF#wf", "sk": "V#0000000007"}
    assert keys.run_key("t1", "r1") == {"pk": "TENANT#t1#RUN#r1", "sk": "RUN"}
    assert keys.runs_partition("t1", "wf") == "TENANT#t1#WF#wf#RUNS"
    assert keys.runs_sort("2026-01-01T00:00:00.000Z", "r1") == "2026-01-01T00:00:00.000Z#r1"
    assert keys.workflows_partition("t1") == "TENANT#t1#WFS"
    assert keys.api_keys_partition("t1") == "TENANT#t1#KEYS"


def test_version_sort_keys_sort_numerically():
    assert sorted(keys.version_sort(v) for v in (10, 2, 1)) == [
        keys.version_sort(1),
        keys.version_sort(2),
        keys.version_sort(10),
    ]


@pytest.mark.parametrize(
    "build",
    [
        lambda: keys.workflow_key("acme#RUN", "x"),
        lambda: keys.workflow_key("acme", "x#V"),
        lambda: keys.run_key("acme", ""),
        lambda: keys.version_key("acme", "wf", 0),
        lambda: keys.version_key("acme", "wf", True),
    ],
)
def test_a_key_part_that_could_escape_its_partition_is_refused(build):
    with pytest.raises(ValueError):
        build()


# --------------------------------------------------------------------------- items


def test_items_carry_their_keys_and_tenant_and_read_back_equal():
    run = RunItem(
        run_id="r1",
        tenant="acme",
        workflow_id="orders",
        version=2,
        started_at="2026-11-30T09:00:00.000Z",
        duration_ms=12.5,
        input='{"a":1}',
    )
    stored = run.to_item()
    # Then the item has its table and GSI1 keys, its type, and no empty attributes
    assert stored["pk"] == "TENANT#acme#RUN#r1"
    assert stored["gsi1pk"] == "TENANT#acme#WF#orders#RUNS"
    assert stored["gsi1sk"] == "2026-11-30T09:00:00.000Z#r1"
    assert stored["type"] == "run" and stored["tenant"] == "acme"
    assert "output" not in stored and "ended_at" not in stored
    # And it survives DynamoDB's encoding (floats as numbers) unchanged
    assert RunItem.from_item(deserialize(serialize(stored))) == run


def test_workflow_version_and_key_items_index_as_the_contract_says():
    head = WorkflowItem(
        workflow_id="orders",
        tenant="acme",
        live_version=1,
        latest_version=1,
        live_version_arn="arn:v1",
        state_machine_arn="arn:sm",
        created_at="c",
        updated_at="u",
    )
    assert head.to_item()["gsi1pk"] == "TENANT#acme#WFS"
    assert head.to_item()["gsi1sk"] == "orders"
    version = VersionItem(
        tenant="acme",
        workflow_id="orders",
        version=1,
        definition="{}",
        asl_sha256="0" * 64,
        state_machine_version_arn="arn:v1",
        created_at="c",
    )
    assert "gsi1pk" not in version.to_item()
    key = ApiKeyItem(key_id="key_1", tenant="acme", name="ci", key_hash="ab", created_at="c")
    assert key.to_item()["pk"] == "KEY#ab"
    assert key.to_item()["gsi1pk"] == "TENANT#acme#KEYS"
    assert key.to_item()["gsi1sk"] == "c#key_1"


# --------------------------------------------------------------------------- page tokens


def test_a_page_token_round_trips_and_only_for_its_own_partition():
    last = serialize({"pk": "P", "sk": "S", "gsi1pk": "TENANT#a#WFS", "gsi1sk": "wf"})
    token = encode_token(last)
    attributes = ("pk", "sk", "gsi1pk", "gsi1sk")
    assert decode_token(token, "TENANT#a#WFS", attributes) == last
    # Another tenant's partition, a truncated token or garbage is refused
    for bad, partition in [
        (token, "TENANT#b#WFS"),
        (token[:-4], "TENANT#a#WFS"),
        ("not a token!", "TENANT#a#WFS"),
    ]:
        with pytest.raises(InvalidPageToken):
            decode_token(bad, partition, attributes)


# --------------------------------------------------------------------------- names


def test_state_machine_names_are_unique_per_tenant_and_workflow_and_fit_80_characters():
    # Given tenant/workflow pairs that a plain hyphen join would confuse
    a = state_machine_name("prod", "a-b", "c")
    b = state_machine_name("prod", "a", "b-c")
    assert a != b
    assert a == "relayflow-prod-a-b_c"
    long = state_machine_name("prod", "t" * 31, "w" * 64)
    other = state_machine_name("prod", "t" * 31, "w" * 63 + "x")
    assert len(long) == 80 and long != other
    assert long.startswith("relayflow-prod-" + "t" * 31 + "_")


def test_execution_arns_follow_the_state_machine_name():
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:relayflow-dev-acme_wf"
    assert execution_arn(machine + ":3", "run1") == (
        "arn:aws:states:us-east-1:123456789012:execution:relayflow-dev-acme_wf:run1"
    )


def test_an_idempotency_key_maps_to_one_run_id_per_tenant_and_workflow():
    first = idempotent_run_id("acme", "orders", "k-1")
    assert first == idempotent_run_id("acme", "orders", "k-1")
    assert len(first) == 32
    assert first != idempotent_run_id("other", "orders", "k-1")
    assert first != idempotent_run_id("acme", "refunds", "k-1")


# --------------------------------------------------------------------------- schema


class _TemplateLoader(yaml.SafeLoader):
    """Reads CloudFormation short forms (!Ref …) as plain values."""


_TemplateLoader.add_multi_constructor(
    "!", lambda loader, suffix, node: loader.construct_scalar(node) if node.id == "scalar" else None
)


def test_create_table_builds_the_table_template_yaml_declares():
    template = yaml.load((ROOT / "template.yaml").read_text(), Loader=_TemplateLoader)
    table = template["Resources"]["RelayflowTable"]["Properties"]
    assert table["AttributeDefinitions"] == schema.ATTRIBUTE_DEFINITIONS
    assert table["KeySchema"] == schema.KEY_SCHEMA
    assert table["GlobalSecondaryIndexes"] == schema.GLOBAL_SECONDARY_INDEXES
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["TimeToLiveSpecification"] == {
        "AttributeName": schema.TTL_ATTRIBUTE,
        "Enabled": True,
    }
