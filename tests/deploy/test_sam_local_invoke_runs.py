"""A whole Standard run through the built functions (`sam local invoke`, as
test_sam_local_invoke.py emulates it): the built API starts the run, the local runtime runs it,
the built recorder records its end from the execution history, and the built API reads the run
with its step timeline back.

The in-process recorder of ``relayflow serve`` is stopped first, so only the built recorder
records. Its end event is what Step Functions sends (``status_change_event`` over the
execution's ``DescribeExecution``). On the code before ``relayflow.executions.history`` was in the
layer, the recorder failed here with ``ModuleNotFoundError: relayflow.local`` (and so did
``GET /runs/{id}``): the history fold lived in the local runtime's package.

The other runs go through the built functions the same way, each at the point AWS would call
it: an Express run settled by the built maintenance function's sweep once its deadline has
passed; a debounced run the built webhook function folds and the built trigger function starts
when its deadline schedule's input is delivered, as EventBridge Scheduler would; and an
approval the built approval function records (the state machine's Task invokes it) and the
built API's ``POST /approvals/{id}/respond`` decides. In those runs every step function the
machine calls is the built one too (``built_steps``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sam_template import ROOT, function_resources, load_template
from test_sam_local_invoke import LAMBDA_PYTHON, NOT_IN_LAMBDA, built, invoke, sam_environments

__all__ = ["built", "sam_environments"]  # fixtures, shared with the sample tests

FUNCTIONS = function_resources(load_template())
WORKFLOW = "hello_standard"
#: The tenant the sample API events' authorizer context names.
TENANT = "acme"
pytestmark = pytest.mark.skipif(
    not LAMBDA_PYTHON.exists(), reason="run `make lambda-python` (make test does)"
)


@pytest.fixture(scope="module")
def local_stack() -> Iterator[Any]:
    """``relayflow serve --aws-port 0`` in process, its own recorder stopped."""
    from relayflow.local.aws_server import ExposedAws
    from relayflow.local.serve import LocalServer

    with LocalServer("127.0.0.1", 0) as server, ExposedAws("127.0.0.1", 0) as aws:
        assert server.recorder is not None
        server.recorder.stop()
        server.aws_url = aws.url
        yield server


@pytest.fixture(scope="module")
def exposed_aws(local_stack: Any) -> str:
    """The endpoint sam_environments points every function at."""
    return local_stack.aws_url


def _event(tmp_path: Path, name: str, event: dict[str, Any]) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(event))
    return path


def _api_event(sample: str, **changes: Any) -> dict[str, Any]:
    event = json.loads((ROOT / "events" / "api" / sample).read_text())
    event.update(changes)
    return event


def _ended(server: Any, run_id: str) -> dict[str, Any]:
    runtime = server.runtime
    deadline = time.monotonic() + 120
    while True:
        arns = [a for a in runtime.list_executions() if a.endswith(f":{run_id}")]
        if arns:
            description = runtime.sfn_client.describe_execution(executionArn=arns[0])
            if description["status"] != "RUNNING":
                return description
        assert time.monotonic() < deadline, f"run {run_id} did not end"
        time.sleep(0.2)


@pytest.fixture
def call(sam_environments, sam_build, built, tmp_path) -> Any:
    """``call(kind, event)``: the event through the built function of ``kind``."""

    def call(kind: str, event: dict[str, Any]) -> dict[str, Any]:
        logical_id = FUNCTIONS[kind]
        # A name of its own: the state machine's Tasks call in from other threads
        path = _event(tmp_path, f"{kind}-{uuid.uuid4().hex}", event)
        return invoke(sam_environments[logical_id], path, sam_build, built, logical_id)

    return call


def test_a_standard_run_end_is_recorded_by_the_built_recorder_and_read_by_the_built_api(
    local_stack, call
):
    from relayflow.local.serve_recorder import status_change_event

    # Given a Standard workflow registered, and a run of it started, through the built API
    definition = json.loads(_api_event("put_workflow.json")["body"])
    definition.update(id=WORKFLOW, engine="standard")
    registered = call(
        "api",
        _api_event(
            "put_workflow.json",
            path=f"/workflows/{WORKFLOW}",
            pathParameters={"proxy": f"workflows/{WORKFLOW}"},
            body=json.dumps(definition),
        ),
    )
    assert registered["result"]["statusCode"] == 201, registered
    path = f"/workflows/{WORKFLOW}/runs"
    started = call(
        "api", _api_event("start_run.json", path=path, pathParameters={"proxy": path[1:]})
    )
    assert "result" in started, started
    assert started["result"]["statusCode"] == 201, started
    run_id = json.loads(started["result"]["body"])["run_id"]
    assert json.loads(started["result"]["body"])["engine"] == "standard"
    description = _ended(local_stack, run_id)
    assert description["status"] == "SUCCEEDED", description

    # When the built recorder gets the run's end, as EventBridge delivers it
    end = status_change_event(description, region="us-east-1", account="123456789012")
    recorded = call("recorder", end)

    # Then it records the end from the execution's history, with the deployed history fold
    assert recorded.get("result", {}).get("recorded") is True, recorded
    assert recorded["result"]["status"] == "succeeded", recorded
    assert "relayflow.executions.history" in recorded["relayflowModules"], recorded
    # And the built API reads the closed run with its step timeline
    path = f"/runs/{run_id}"
    answer = call("api", _api_event("get_run.json", path=path, pathParameters={"proxy": path[1:]}))
    assert answer["result"]["statusCode"] == 200, answer
    run = json.loads(answer["result"]["body"])
    assert run["status"] == "succeeded", run
    steps = {step["key"]: step["status"] for step in run["steps"]}
    assert steps == {"greet": "succeeded"}, run
    # And the usage counts of its history are on the run (docs/cost.md)
    assert run["transitions"] >= 1, run


# ------------------------------------------------------------------ the other runs, built


class BuiltFunctionError(Exception):
    """An error a built function raised, passed on to the state machine under its own name
    (``errorType``), as Lambda's Python runtime reports it."""


@pytest.fixture
def built_steps(local_stack, call) -> Iterator[list[str]]:
    """The state machines' Lambda Tasks call the built step functions: the local runtime's
    Invoke endpoint hands each payload to ``call``. Yields the kinds invoked, in order."""
    from relayflow.naming import STEP_FUNCTIONS, function_name

    invoked: list[str] = []

    def through_build(kind: str) -> Any:
        def handler(payload: Any, context: Any) -> Any:
            invoked.append(kind)
            answer = call(kind, payload)
            if "errorType" in answer:
                error = type(answer["errorType"], (BuiltFunctionError,), {})
                raise error(answer["errorMessage"])
            assert not [m for m in answer["relayflowModules"] if m.startswith(NOT_IN_LAMBDA)]
            return answer["result"]

        return handler

    runtime = local_stack.runtime
    kinds = [kind for kind in STEP_FUNCTIONS if kind in FUNCTIONS]
    for kind in kinds:
        runtime.register_handler(function_name(kind), through_build(kind))
    yield invoked
    for kind in kinds:
        runtime.handlers.pop(function_name(kind), None)


def _register(call: Any, definition: dict[str, Any]) -> None:
    path = f"/workflows/{definition['id']}"
    answer = call(
        "api",
        _api_event(
            "put_workflow.json",
            path=path,
            pathParameters={"proxy": path[1:]},
            body=json.dumps(definition),
        ),
    )
    assert answer["result"]["statusCode"] in (200, 201), answer


def _api(call: Any, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    sample = "get_run.json" if method == "GET" else "start_run.json"
    answer = call(
        "api",
        _api_event(
            sample,
            httpMethod=method,
            path=path.split("?")[0],
            pathParameters={"proxy": path.split("?")[0][1:]},
            queryStringParameters=(
                dict(p.split("=", 1) for p in path.split("?")[1].split("&"))
                if "?" in path
                else None
            ),
            body=None if body is None else json.dumps(body),
        ),
    )
    assert "result" in answer, answer
    return answer["result"]["statusCode"], json.loads(answer["result"]["body"] or "null")


def _greeting(workflow_id: str, **settings: Any) -> dict[str, Any]:
    """A one-step workflow whose step runs in the transform function (with a
    ``timeout_seconds`` a transform is a Lambda Task, not a native Pass: docs/definitions.md)."""
    greet = {
        "type": "transform",
        "mapping": {"message": "Hello {{ trigger.name }}"},
        "timeout_seconds": 30,
    }
    return {"id": workflow_id, "start": "greet", "steps": {"greet": greet}, **settings}


def _recorded_end(local_stack: Any, run_id: str, call: Any) -> dict[str, Any]:
    """The run's end, as the built recorder records it from EventBridge's status change."""
    from relayflow.local.serve_recorder import status_change_event

    description = _ended(local_stack, run_id)
    end = status_change_event(description, region="us-east-1", account="123456789012")
    recorded = call("recorder", end)
    assert recorded.get("result", {}).get("recorded") is True, recorded
    return recorded


def test_an_express_run_is_settled_by_the_built_maintenance_sweep(local_stack, call, built_steps):
    from relayflow.dal.express import ExpressDeadlines

    dal = local_stack.control().dal
    # Given an Express workflow and a run of it started through the built API
    workflow_id = "hello_express"
    _register(call, _greeting(workflow_id, engine="express"))
    status, started = _api(
        call, "POST", f"/workflows/{workflow_id}/runs", {"input": {"name": "Ada"}}
    )
    assert status == 201, started
    assert started["engine"] == "express", started
    run_id = started["run_id"]

    # When its machine has run (its step in the built transform function) and recorded its
    # end with its own recording states
    deadline = time.monotonic() + 120
    while (run := dal.get_run(TENANT, run_id)) is None or run.native_status is None:
        assert time.monotonic() < deadline, f"express run {run_id} recorded no end"
        time.sleep(0.2)
    assert built_steps == ["transform"]
    assert run.native_status == "succeeded", run
    assert run.recorded_status is None, run  # not settled yet: the sweep does that
    # And its deadline has passed (the marker is moved to now: the sweep's only clock)
    (marker,) = [m for m in ExpressDeadlines(dal).due("9999", 1000) if m.run_id == run_id]
    ExpressDeadlines(dal).remove(marker)
    ExpressDeadlines(dal).add("2000-01-01T00:00:00.000000Z", marker.tenant, run_id)
    # And the built maintenance function runs on its one-minute schedule
    schedule = json.loads((ROOT / "events" / "maintenance" / "every_minute.json").read_text())
    swept = call("maintenance", schedule)

    # Then the sweep settled the run as the recorder settles a Standard run's end
    assert swept.get("result", {}).get("express") == {"timed_out": [], "settled": [run_id]}, swept
    settled = dal.get_run(TENANT, run_id)
    assert settled is not None
    assert (settled.status, settled.recorded_status) == ("succeeded", "succeeded"), settled
    assert not [m for m in ExpressDeadlines(dal).due("9999", 1000) if m.run_id == run_id]
    # And the built API reads it with the timeline its records give
    status, read = _api(call, "GET", f"/runs/{run_id}")
    assert status == 200, read
    assert (read["status"], read["engine"]) == ("succeeded", "express"), read
    assert {s["key"]: s["status"] for s in read["steps"]} == {"greet": "succeeded"}, read
    assert read["output"]["steps"]["greet"]["output"] == {"message": "Hello Ada"}, read
    # And a second sweep finds nothing left to settle
    again = call("maintenance", schedule)
    assert again["result"]["express"] == {"timed_out": [], "settled": []}, again


def test_a_debounced_webhook_run_starts_when_its_deadline_reaches_the_built_trigger(
    local_stack, call, built_steps, sam_environments
):
    from relayflow.triggers.signatures import sign

    # Given a workflow with a signed webhook trigger whose posts are debounced by order, and
    # its signing secret in the tenant's folder of Secrets Manager
    workflow_id, slug, secret = "reindex_order", "order-changed", "whsec-sam-local"
    local_stack.runtime.client("secretsmanager").create_secret(
        Name=f"relayflow/local/{TENANT}/webhooks/{slug}", SecretString=secret
    )
    definition = _greeting(
        workflow_id,
        triggers=[{"type": "webhook", "slug": slug, "secret": {"name": f"webhooks/{slug}"}}],
        debounce={"key": "{{ trigger.order }}", "period": 1, "max_wait": 60},
    )
    definition["steps"]["greet"]["mapping"] = {
        "order": "{{ trigger.order }}",
        "n": "{{ trigger.n }}",
    }
    _register(call, definition)

    def post(n: int, signed_with: str) -> dict[str, Any]:
        hook = json.loads((ROOT / "events" / "webhook" / "relayflow_signed.json").read_text())
        body = json.dumps({"order": "o-7", "n": n})
        headers = {
            "Content-Type": "application/json",
            "X-Relayflow-Delivery": f"dlv-{n}",
            "X-Relayflow-Signature": sign(
                "relayflow", body.encode(), signed_with, int(time.time())
            ),
        }
        hook.update(
            path=f"/hooks/{slug}",
            pathParameters={"slug": slug},
            body=body,
            headers=headers,
            multiValueHeaders={k: [v] for k, v in headers.items()},
        )
        answer = call("webhook", hook)
        assert "result" in answer, answer
        return answer["result"]

    # When a post signed with another secret reaches the built webhook function
    forged = post(0, "not-the-secret")
    # Then it is refused, and folds into nothing
    assert forged["statusCode"] == 401, forged
    assert json.loads(forged["body"])["details"]["reason"] == "mismatch", forged

    # When two signed posts for one order reach it
    answers = []
    for n in (1, 2):
        answer = post(n, secret)
        assert answer["statusCode"] == 202, answer
        answers.append(json.loads(answer["body"]))

    # Then both fold into one pending run, which is not a run yet
    assert {a["admission"] for a in answers} == {"debounced"}, answers
    (pending,) = {a["run_id"] for a in answers}
    status, _ = _api(call, "GET", f"/runs/{pending}")
    assert status == 404
    # And its deadline is a one-time Scheduler schedule aimed at the trigger function
    env = sam_environments[FUNCTIONS["webhook"]]["env"]
    scheduler = local_stack.runtime.client("scheduler")
    group = env["RELAYFLOW_SCHEDULE_GROUP_NAME"]
    names = [
        s["Name"]
        for s in scheduler.list_schedules(GroupName=group, NamePrefix="rf-adm-")["Schedules"]
    ]
    schedules = [scheduler.get_schedule(Name=name, GroupName=group) for name in names]
    (schedule,) = [
        s for s in schedules if json.loads(s["Target"]["Input"]).get("workflow_id") == workflow_id
    ]
    assert schedule["Target"]["Arn"] == env["RELAYFLOW_TRIGGER_FUNCTION_ARN"], schedule
    assert schedule["Target"]["RoleArn"] == env["RELAYFLOW_SCHEDULER_ROLE_ARN"], schedule
    assert schedule["ActionAfterCompletion"] == "DELETE", schedule
    assert built_steps == []  # nothing ran yet

    # When the key has been quiet for the period and Scheduler delivers the schedule's input
    # to the built trigger function (it waits for the deadline: the function's clock is real)
    quiet_at = datetime.fromisoformat(answers[-1]["starts_at"].replace("Z", "+00:00"))
    while datetime.now(UTC) <= quiet_at + timedelta(milliseconds=10):  # starts_at is in ms
        time.sleep(0.05)
    fired = call("trigger", json.loads(schedule["Target"]["Input"]))

    # Then one run started under the pending id, with the last post as its trigger
    assert fired.get("result", {}).get("status") == "started", fired
    assert fired["result"]["run_id"] == pending, fired
    recorded = _recorded_end(local_stack, pending, call)
    assert recorded["result"]["status"] == "succeeded", recorded
    assert built_steps == ["transform"]
    status, run = _api(call, "GET", f"/runs/{pending}")
    assert status == 200, run
    assert run["status"] == "succeeded", run
    stored = local_stack.control().dal.get_run(TENANT, pending)
    assert stored is not None and stored.trigger_type == "webhook", stored
    assert run["output"]["steps"]["greet"]["output"] == {"order": "o-7", "n": 2}, run


def test_an_approval_is_recorded_by_the_built_function_and_decided_through_the_built_api(
    local_stack, call, built_steps
):
    # Given a workflow that asks for an approval before it greets
    workflow_id = "approve_greeting"
    definition = _greeting(workflow_id, start="sign_off")
    definition["steps"]["sign_off"] = {
        "type": "approval",
        "title": "Greet {{ trigger.name }}?",
        "options": ["approve", "reject"],
        "on_approve": "greet",
    }
    _register(call, definition)
    status, started = _api(
        call, "POST", f"/workflows/{workflow_id}/runs", {"input": {"name": "Ada"}}
    )
    assert status == 201, started
    run_id = started["run_id"]

    # When the machine's Task has invoked the built approval function
    deadline = time.monotonic() + 120
    while True:
        status, page = _api(call, "GET", "/approvals?status=pending")
        assert status == 200, page
        mine = [a for a in page["items"] if a["run_id"] == run_id]
        if mine:
            break
        assert time.monotonic() < deadline, "the approval request was not recorded"
        time.sleep(0.2)
    (request,) = mine
    assert request["title"] == "Greet Ada?", request
    assert "task_token" not in json.dumps(request)
    assert built_steps == ["approval"]

    # When the built API records the decision (SendTaskSuccess with the stored token)
    status, decided = _api(
        call, "POST", f"/approvals/{request['approval_id']}/respond", {"option": "approve"}
    )

    # Then the approval is decided and the run goes on to its end, recorded by the recorder
    assert status == 200, decided
    assert decided["status"] == "decided", decided
    recorded = _recorded_end(local_stack, run_id, call)
    assert recorded["result"]["status"] == "succeeded", recorded
    assert built_steps == ["approval", "transform"]
    status, run = _api(call, "GET", f"/runs/{run_id}")
    assert status == 200, run
    assert {s["key"]: s["status"] for s in run["steps"]} == {
        "sign_off": "succeeded",
        "greet": "succeeded",
    }, run
    assert run["output"]["steps"]["sign_off"]["output"]["option"] == "approve", run
    # And a second decision is refused
    status, again = _api(
        call, "POST", f"/approvals/{request['approval_id']}/respond", {"option": "reject"}
    )
    assert (status, again["code"]) == (409, "approval_decided"), again
