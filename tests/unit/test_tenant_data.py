"""The pure parts of relayflow.tools.tenant_data: a tenant's S3 keys, the partition a query's
key condition fixes, and the shared-resources setting read from the environment."""

from __future__ import annotations

import pytest

from relayflow.settings import Settings
from relayflow.tools.aws import QueryArgs
from relayflow.tools.tenant_data import _queried_partition, tenant_key_problem


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("alpha/x.json", None),
        ("alpha/invoices/2030/x.json", None),
        ("beta/x.json", "does not start"),
        ("alphabet/x.json", "does not start"),
        ("/alpha/x.json", "does not start"),
        ("alpha", "does not start"),
        ("alpha/x/alpha/y", "further"),
    ],
)
def test_a_tenants_keys_lie_under_its_folder_and_no_further_one(key, problem):
    found = tenant_key_problem(key, "alpha")
    assert (found is None) if problem is None else (problem in (found or ""))


@pytest.mark.parametrize(
    ("condition", "names", "values", "expected"),
    [
        ("pk = :p", None, {":p": "alpha#1"}, "alpha#1"),
        (":p = pk", None, {":p": "alpha#1"}, "alpha#1"),
        ("#k = :p AND begins_with(sk, :s)", {"#k": "pk"}, {":p": "beta#1", ":s": "x"}, "beta#1"),
        ("sk = :s AND pk = :p", None, {":p": "alpha#1", ":s": "alpha#2"}, "alpha#1"),
        ("other = :p", None, {":p": "alpha#1"}, None),
    ],
)
def test_the_partition_a_query_fixes(condition, names, values, expected):
    args = QueryArgs(table="t", key_condition=condition, names=names, values=values)
    assert _queried_partition(args, "pk") == expected


def test_shared_tool_resources_are_a_json_list_in_the_environment(monkeypatch):
    arns = ["arn:aws:sns:us-east-1:1:app-news", "arn:aws:s3:::app-catalogue/*"]
    monkeypatch.setenv("RELAYFLOW_SHARED_TOOL_RESOURCES", '["' + '", "'.join(arns) + '"]')
    assert Settings().shared_tool_resources == arns
    monkeypatch.delenv("RELAYFLOW_SHARED_TOOL_RESOURCES")
    assert Settings().shared_tool_resources == []
