"""What a tenant sees of a failed step carries the error's name and message (and, for a code
step, the lines of the user's own code), never the server's stack trace or paths: the run's
cause, its step timeline, its DLQ entry, its lifecycle events and its failure notification.
The whole trace is in the logs, with the run id."""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from relayflow_testing import Received, Reply, Server, allowed_server

from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CODE = """\
def ratio(total, count):
    return total / count

return {"ratio": ratio(10, trigger["count"])}
"""


def server_paths() -> list[str]:
    """Text that would betray the server's files or an engine frame."""
    import relayflow

    package = str(Path(relayflow.__file__).resolve().parent)
    return [
        "Traceback",
        'File "',
        "stackTrace",
        str(ROOT),
        package,
        sys.prefix,
        "site-packages",
        "/var/task",
        "relayflow/",
        ".py",
    ]


def assert_public(text: str) -> None:
    leaks = [marker for marker in server_paths() if marker in text]
    assert leaks == [], f"{leaks} in {text[:2000]}"


@pytest.fixture(scope="module")
def remote() -> Iterator[Server]:
    with allowed_server() as server:

        def reply(received: Received) -> Reply:
            if received.path == "/invoices":
                return 400, {"Content-Type": "application/json"}, b'{"error":"bad customer"}'
            return Server.echo(received)

        server.reply = reply
        yield server


@pytest.fixture(scope="module")
def log() -> Iterator[io.StringIO]:
    from relayflow.observability import logger

    stream = io.StringIO()
    previous = logger.registered_handler.setStream(stream)  # type: ignore[attr-defined]
    try:
        yield stream
    finally:
        logger.registered_handler.setStream(previous)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def server(remote: Server, log: io.StringIO) -> Iterator[LocalServer]:
    with LocalServer(time_scale=0.001) as local:
        yield local


def notifications(remote: Server) -> dict[str, Any]:
    return {"on": ["failed"], "webhook": {"url": f"{remote.url}/notify"}}


def code_workflow(remote: Server) -> dict[str, Any]:
    return {
        "id": "divide",
        "start": "compute",
        "notifications": notifications(remote),
        "steps": {"compute": {"type": "code", "code": CODE, "retry": {"max_attempts": 1}}},
    }


def tool_workflow(remote: Server) -> dict[str, Any]:
    return {
        "id": "invoice",
        "start": "bill",
        "notifications": notifications(remote),
        "http_tools": {
            "billing": {
                "base_url": remote.url,
                "operations": {"create": {"method": "POST", "path": "/invoices"}},
            }
        },
        "steps": {"bill": {"type": "tool", "tool": "http.billing.create", "args": {}}},
    }


def run_to_end(
    server: LocalServer, api: httpx.Client, definition: dict[str, Any], trigger: dict[str, Any]
) -> str:
    """Put ``definition``, run it with ``trigger`` and wait until the run has ended and been
    recorded; the run's id."""
    put = api.put(f"/workflows/{definition['id']}", json=definition)
    assert put.status_code in (200, 201), put.text
    started = api.post(f"/workflows/{definition['id']}/runs", json={"input": trigger})
    assert started.status_code == 201, started.text
    run_id = str(started.json()["run_id"])
    deadline = time.monotonic() + 30
    while api.get(f"/runs/{run_id}").json()["status"] == "running":
        assert time.monotonic() < deadline, "the run did not end"
        time.sleep(0.05)
    server.settle()
    return run_id


def everything_the_tenant_sees(
    api: httpx.Client, remote: Server, run_id: str, workflow_id: str
) -> dict[str, Any]:
    run = api.get(f"/runs/{run_id}").json()
    listed = api.get(f"/workflows/{workflow_id}/runs").json()
    entry = api.get(f"/dlq/{run_id}").json()
    notified = [json.loads(r.body) for r in remote.to("/notify") if run_id.encode() in r.body]
    return {"run": run, "listed": listed, "dlq": entry, "notifications": notified}


def failed_and_seen(
    server: LocalServer, api: httpx.Client, remote: Server, definition: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """A failed run of ``definition``: its id, and everything the tenant sees of it."""
    run_id = run_to_end(server, api, definition, {"count": 0})
    return run_id, everything_the_tenant_sees(api, remote, run_id, definition["id"])


def test_a_failing_code_step_shows_its_name_message_and_the_users_lines_only(
    server: LocalServer, api: httpx.Client, remote: Server, log: io.StringIO
) -> None:
    # Given a code step that divides by zero two calls deep in the user's code
    # When the tenant reads the run, its runs, its DLQ entry and its notification
    run_id, seen = failed_and_seen(server, api, remote, code_workflow(remote))
    # Then each names the error and the message, and the user's own lines …
    run = seen["run"]
    assert run["status"] == "failed" and run["error"] == "Relayflow.CodeError"
    cause = json.loads(run["cause"])
    assert cause["errorType"] == "Relayflow.CodeError"
    assert cause["errorMessage"].startswith("ZeroDivisionError at line 2: division by zero")
    assert "line 4" in cause["errorMessage"] and "line 2, in ratio" in cause["errorMessage"]
    step = next(s for s in run["steps"] if s["key"] == "compute")
    assert json.loads(step["cause"]) == cause
    assert seen["dlq"]["cause"] == run["cause"]
    assert len(seen["notifications"]) == 1
    # … and nothing of the server anywhere
    assert_public(json.dumps(seen))
    # And the full trace is in the log, with the run id
    failures = [
        json.loads(line)
        for line in log.getvalue().splitlines()
        if line.startswith("{") and '"step failed"' in line and run_id in line
    ]
    assert failures and "Traceback" in failures[0]["exception"]
    assert failures[0]["run_id"] == run_id


def test_a_failing_tool_step_shows_its_name_and_message_only(
    server: LocalServer, api: httpx.Client, remote: Server, log: io.StringIO
) -> None:
    # Given a tool step whose HTTP endpoint refuses the call (raised deep in the engine)
    # When the tenant reads everything about the run
    run_id, seen = failed_and_seen(server, api, remote, tool_workflow(remote))
    # Then the error is named with its message …
    run = seen["run"]
    assert run["error"] == "Relayflow.HttpError"
    cause = json.loads(run["cause"])
    assert set(cause) == {"errorType", "errorMessage", "details"}
    assert "400" in cause["errorMessage"] and "bad customer" in cause["errorMessage"]
    # (the endpoint's status and body excerpt travel as the error's details)
    assert cause["details"] == {"status": 400, "body": '{"error":"bad customer"}'}
    assert seen["dlq"]["error"] == "Relayflow.HttpError"
    assert len(seen["notifications"]) == 1
    # … and no engine frame or server path reaches the tenant
    assert_public(json.dumps(seen))
    # While the log keeps the engine's trace for the operator
    assert any(
        '"step failed"' in line and run_id in line and "Traceback" in line
        for line in log.getvalue().splitlines()
    )


def copying_workflow(remote: Server) -> dict[str, Any]:
    workflow = tool_workflow(remote)
    workflow["id"] = "invoice-report"
    workflow["steps"]["bill"]["on_failure"] = "report"
    workflow["steps"]["report"] = {
        "type": "transform",
        "mapping": {
            "copied": "{{ error }}",
            "cause": "{{ error.Cause }}",
            "name": "{{ error.Error }}",
        },
    }
    return workflow


def test_an_error_copied_into_an_output_shows_its_name_message_and_details_only(
    server: LocalServer, api: httpx.Client, remote: Server
) -> None:
    # Given a workflow whose error route copies {{ error }} into its output
    run_id = run_to_end(server, api, copying_workflow(remote), {})
    # When the tenant reads the run
    run = api.get(f"/runs/{run_id}").json()
    assert run["status"] == "succeeded", run
    report = next(s for s in run["steps"] if s["key"] == "report")["output"]
    # Then the copy holds the error's name, message and Relayflow's details …
    copied = report["copied"]
    assert copied["Error"] == "Relayflow.HttpError" == report["name"]
    assert "answered 400" in copied["Cause"] and "bad customer" in copied["Cause"]
    assert report["cause"] == copied["Cause"]
    assert copied["details"] == {"status": 400, "body": '{"error":"bad customer"}'}
    # … and no stack trace, engine frame or path of the machine
    assert_public(json.dumps(run))
