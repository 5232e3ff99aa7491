"""check_tool: the static problems of a tool step, as validation reports them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from relayflow.tools import aws_tool_names, check_tool
from relayflow.tools.http import join_url, render_with_args

HTTP_TOOLS = {
    "billing": {
        "base_url": "https://billing.example.com/v1",
        "operations": {"create_invoice": {"method": "POST", "path": "/invoices"}},
    }
}

CATALOGUE = [
    "aws.dynamodb.get_item",
    "aws.dynamodb.put_item",
    "aws.dynamodb.query",
    "aws.dynamodb.update_item",
    "aws.events.put_events",
    "aws.lambda.invoke",
    "aws.s3.get_object",
    "aws.s3.put_object",
    "aws.ses.send_email",
    "aws.sns.publish",
    "aws.sqs.send_message",
    "aws.stepfunctions.start_execution",
]


def test_the_catalogue_lists_every_aws_tool():
    assert aws_tool_names() == CATALOGUE


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("aws.dynamodb.put_item", {"table": "t", "item": {"pk": "{{ trigger.id }}"}}),
        ("aws.dynamodb.put_item", "{{ steps.build.output }}"),
        ("aws.ses.send_email", {"from": "a@b.c", "to": ["d@e.f"], "subject": "s", "text": "t"}),
        ("aws.events.put_events", {"source": "s", "detail_type": "d"}),
        ("http.billing", {"method": "GET", "path": "/x", "query": {"a": 1}}),
        ("http.billing", {"method": "{{ trigger.method }}"}),
        ("http.billing.create_invoice", {"anything": "{{ trigger.x }}"}),
    ],
)
def test_well_formed_tool_steps_have_no_problems(tool, args):
    assert check_tool(tool, args, HTTP_TOOLS) == []


def test_an_unknown_aws_tool_suggests_close_names():
    ((path, rule, message),) = check_tool("aws.dynamodb.put_itme", {}, HTTP_TOOLS)
    assert (path, rule) == ("tool", "unknown-tool")
    assert "'aws.dynamodb.put_item'" in message


def test_an_unknown_aws_tool_without_close_names_lists_the_catalogue():
    ((_, rule, message),) = check_tool("aws.kinesis.put_record", {}, HTTP_TOOLS)
    assert rule == "unknown-tool"
    assert "aws.sqs.send_message" in message


def test_missing_required_args_are_named():
    problems = check_tool("aws.dynamodb.put_item", {"item": {}}, HTTP_TOOLS)
    assert problems == [("args", "tool-args", "aws.dynamodb.put_item needs args.table")]


def test_unknown_args_are_named_with_a_suggestion():
    problems = check_tool("aws.dynamodb.get_item", {"tabel": "t", "key": {"pk": 1}}, HTTP_TOOLS)
    assert ("args", "tool-args", "aws.dynamodb.get_item needs args.table") in problems
    (unknown,) = [p for p in problems if p[0] == "args.tabel"]
    assert unknown[1] == "tool-args"
    assert "did you mean 'table'" in unknown[2]


def test_aliased_args_use_the_name_a_definition_writes():
    problems = check_tool("aws.ses.send_email", {"to": ["a@b.c"], "subject": "s"}, HTTP_TOOLS)
    assert problems == [("args", "tool-args", "aws.ses.send_email needs args.from")]


@pytest.mark.parametrize("args", [["a"], 3, None, "plain text"])
def test_args_must_be_an_object(args):
    problems = check_tool("aws.sqs.send_message", args, HTTP_TOOLS)
    assert [(p[0], p[1]) for p in problems] == [("args", "tool-args")]
    assert "args must be an object" in problems[0][2]


def test_an_undeclared_http_tool_is_unknown():
    ((path, rule, message),) = check_tool("http.biling", {}, HTTP_TOOLS)
    assert (path, rule) == ("tool", "unknown-tool")
    assert "not declared under http_tools" in message
    assert "'billing'" in message


def test_an_undeclared_operation_is_unknown():
    ((path, rule, message),) = check_tool("http.billing.create_invoce", {}, HTTP_TOOLS)
    assert (path, rule) == ("tool", "unknown-tool")
    assert "'create_invoice'" in message


def test_generic_http_calls_take_only_request_fields():
    problems = check_tool("http.billing", {"verb": "GET", "method": "FETCH"}, HTTP_TOOLS)
    assert sorted(p[0] for p in problems) == ["args.method", "args.verb"]
    assert {p[1] for p in problems} == {"tool-args"}


def test_a_name_outside_aws_and_http_is_unknown():
    assert [p[1] for p in check_tool("gcp.pubsub.publish", {}, HTTP_TOOLS)] == ["unknown-tool"]


def test_checking_tools_imports_neither_boto3_nor_httpx():
    code = (
        "import sys\n"
        "from relayflow.tools.catalogue import check_tool\n"
        "check_tool('aws.dynamodb.put_item', {'table': 't', 'item': {}}, {})\n"
        "check_tool('http.x.y', {}, {'x': {'operations': {'y': {}}}})\n"
        "import relayflow.steps.tool, relayflow.steps.webhook_out, relayflow.steps.custom\n"
        "print(sorted(m for m in ('boto3', 'botocore', 'httpx') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- HTTP helpers


@pytest.mark.parametrize(
    ("base", "path", "url"),
    [
        ("https://api.example.com/v1", "/invoices", "https://api.example.com/v1/invoices"),
        ("https://api.example.com/v1/", "invoices", "https://api.example.com/v1/invoices"),
        ("https://api.example.com", "", "https://api.example.com"),
        ("https://api.example.com", "@evil.example", "https://api.example.com/@evil.example"),
        ("https://api.example.com/v1", "?q=1", "https://api.example.com/v1?q=1"),
    ],
)
def test_join_url_appends_the_path_to_the_base_url(base, path, url):
    assert join_url(base, path, tool="http.t") == url


@pytest.mark.parametrize(
    ("base", "path", "error", "field"),
    [
        ("http://0177.0.0.1/", "/x", "Relayflow.SsrfBlocked", "rule"),
        ("https://api.example.com", "/a\x00b", "Relayflow.InvalidArgs", "field"),
        ("https://api.example.com", "/orders/\nHost: evil", "Relayflow.InvalidArgs", "field"),
        ("https://api.example.com", "/a\x7f", "Relayflow.InvalidArgs", "field"),
    ],
)
def test_a_url_httpx_refuses_is_a_named_error(base, path, error, field):
    # Given an HTTP tool call whose URL httpx cannot parse (an octal address, control
    # characters in the path)
    from relayflow.errors import RelayflowError
    from relayflow.tools.http import call_http_tool

    # When it is called, Then it fails with a Relayflow error (never httpx's InvalidURL),
    # before any request
    with pytest.raises(RelayflowError) as raised:
        call_http_tool("t", None, {"base_url": base}, {"method": "GET", "path": path}, {})
    assert raised.value.error_name == error and field in raised.value.details


def test_operation_templates_see_args_next_to_the_document():
    doc = {"run": {"id": "r1"}, "trigger": {"n": 2}, "steps": {}}
    rendered = render_with_args(
        {"path": "/x/{{ args.id }}", "n": "{{ args.n * trigger.n }}", "r": "{{ run.id }}"},
        doc,
        {"id": "A", "n": 21},
    )
    assert rendered == {"path": "/x/A", "n": 42, "r": "r1"}


def test_each_aws_tool_names_the_iam_action_it_needs():
    from relayflow.tools import iam_actions

    assert iam_actions("aws.dynamodb.put_item") == ["dynamodb:PutItem"]
    assert iam_actions("aws.stepfunctions.start_execution") == ["states:StartExecution"]
    assert all(iam_actions(name) for name in CATALOGUE)
    assert iam_actions("http.billing") == []
