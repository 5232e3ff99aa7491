"""The public part of an error's cause: name and message, never the server's stack trace or
file paths (relayflow.causes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import relayflow
from relayflow.causes import (
    SERVER_PATH,
    public_cause,
    public_document,
    public_error,
    public_text,
    run_error_name,
)
from relayflow.errors import split_details, with_details

PACKAGE = str(Path(relayflow.__file__).resolve().parent)


def lambda_body(message: str) -> str:
    return json.dumps(
        {
            "errorMessage": message,
            "errorType": "Relayflow.HttpError",
            "requestId": "4f0c…",
            "stackTrace": [
                '  File "/var/task/app.py", line 14, in handler\n    return tool.run(event)\n',
                f'  File "{PACKAGE}/steps/tool.py", line 40, in run\n    raise HttpError(…)\n',
            ],
        }
    )


def test_a_lambda_error_body_keeps_its_name_and_message_only():
    cause = public_cause(lambda_body("HTTP 400 from POST https://api.example.com/v1/invoices"))
    assert json.loads(cause) == {
        "errorType": "Relayflow.HttpError",
        "errorMessage": "HTTP 400 from POST https://api.example.com/v1/invoices",
    }


def test_server_paths_inside_a_message_are_replaced_and_urls_are_not():
    message = (
        f"[Errno 2] No such file: '{PACKAGE}/x.json' (also {sys.prefix}/lib and /opt/python/y),"
        " see https://example.com/opt/docs and /options/a"
    )
    text = json.loads(public_cause(lambda_body(message)))["errorMessage"]
    assert PACKAGE not in text and sys.prefix not in text and "/opt/python" not in text
    assert text.count(SERVER_PATH) == 3
    assert "https://example.com/opt/docs" in text and "/options/a" in text


def test_a_traceback_in_text_is_cut_to_its_last_line():
    text = (
        "States.Runtime failed: Traceback (most recent call last):\n"
        f'  File "{PACKAGE}/local/compat.py", line 9, in f\n'
        "    boom()\n"
        "KeyError: 'x'"
    )
    assert public_text(text) == "States.Runtime failed:\nKeyError: 'x'"


def test_a_sub_workflow_cause_keeps_its_shape_with_the_childs_cause_public():
    child = json.dumps(
        {"child_run_id": "c1", "status": "failed", "error": "E", "cause": lambda_body("bad")}
    )
    parent = json.loads(public_cause(child))
    assert parent["child_run_id"] == "c1" and parent["error"] == "E"
    assert json.loads(parent["cause"]) == {
        "errorType": "Relayflow.HttpError",
        "errorMessage": "bad",
    }


def test_plain_and_missing_causes():
    assert public_cause(None) is None
    assert public_cause("for_each 'loop' allows at most 5 items") == (
        "for_each 'loop' allows at most 5 items"
    )
    assert json.loads(public_cause('{"error": "Declined", "message": "card"}')) == {
        "error": "Declined",
        "message": "card",
    }


def test_a_timed_out_run_is_named_states_timeout():
    assert run_error_name("TIMED_OUT", None) == "States.Timeout"
    assert run_error_name("timed_out", "Custom.Error") == "Custom.Error"
    assert run_error_name("FAILED", None) is None


# --------------------------------------------------------------------------- caught errors

LAMBDA_CAUSE = json.dumps(
    {
        "errorMessage": with_details(
            "POST https://api.example.com/… answered 400 Bad Request: bad customer",
            {"status": 400, "body": '{"error":"bad customer"}'},
        ),
        "errorType": "Relayflow.HttpError",
        "requestId": "r-1",
        "stackTrace": ['  File "/var/task/app.py", line 12, in handler\n    raise\n'],
    }
)


def test_a_caught_lambda_error_reads_as_name_message_and_details():
    # Given the error a Catch puts at $.error for a step Lambda's failure
    error = {"Error": "Relayflow.HttpError", "Cause": LAMBDA_CAUSE}
    # When a workflow reads it
    view = public_error(error)
    # Then it sees the name, the message and the details, and nothing of the server
    assert view == {
        "Error": "Relayflow.HttpError",
        "Cause": "POST https://api.example.com/… answered 400 Bad Request: bad customer",
        "details": {"status": 400, "body": '{"error":"bad customer"}'},
    }


def test_public_causes_keep_details_and_can_be_made_public_twice():
    once = public_cause(LAMBDA_CAUSE)
    assert json.loads(once)["details"]["status"] == 400
    assert "stackTrace" not in once and "/var/task" not in once
    assert public_cause(once) == once


def test_every_caught_error_in_a_document_is_made_public():
    document = {
        "error": {"Error": "Relayflow.HttpError", "Cause": LAMBDA_CAUSE},
        "steps": {
            "each": {"output": [{"status": "failed", "error": {"Error": "E", "Cause": "text"}}]},
            "ok": {"output": {"Cause": "a user's own field, without Error"}},
        },
    }
    public = public_document(document)
    assert public["error"]["Cause"].endswith("bad customer")
    assert public["steps"]["each"]["output"][0]["error"] == {"Error": "E", "Cause": "text"}
    assert public["steps"]["ok"] == document["steps"]["ok"]
    assert "stackTrace" not in json.dumps(public)


def test_a_reported_message_splits_back_into_message_and_details():
    assert split_details(with_details("m", {"a": 1})) == ("m", {"a": 1})
    assert split_details(with_details("m", {})) == ("m", None)
    assert split_details("plain") == ("plain", None)
    assert with_details("m", {"body": "x" * 20_000}) == "m"  # too long: left out


def test_a_child_input_reads_a_caught_error_only_by_name():
    from relayflow.validation import validate_data

    # Given an error route that starts a child with the caught error
    definition = {
        "id": "w",
        "start": "a",
        "steps": {
            "a": {
                "type": "tool",
                "tool": "aws.sqs.send_message",
                "args": {"queue_url": "q", "body": "x"},
                "on_failure": "b",
            },
            "b": {"type": "sub_workflow", "workflow_id": "child", "input": {}},
        },
    }
    for value, refused in [("{{ error.Error }}", False), ("{{ error.Cause }}", True)]:
        definition["steps"]["b"]["input"] = {"why": value}
        _, problems = validate_data(definition)
        # Then only the name passes natively; the raw Cause is refused, saying what to do
        assert [p.rule for p in problems] == (["sub-workflow-input"] if refused else [])
        assert not refused or "transform step" in problems[0].message
