"""The public part of an error's cause: name and message, never the server's stack trace or
file paths (relayflow.control.causes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import relayflow
from relayflow.control.causes import SERVER_PATH, public_cause, public_text, run_error_name

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
