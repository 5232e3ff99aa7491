"""A whole Standard run through the built functions (`sam local invoke`, as
test_sam_local_invoke.py emulates it): the built API starts the run, the local runtime runs it,
the built recorder records its end from the execution history, and the built API reads the run
with its step timeline back.

The in-process recorder of ``relayflow serve`` is stopped first, so only the built recorder
records. Its end event is what Step Functions sends (``status_change_event`` over the
execution's ``DescribeExecution``). On the code before ``relayflow.control.history`` was in the
layer, the recorder failed here with ``ModuleNotFoundError: relayflow.local`` (and so did
``GET /runs/{id}``): the history fold lived in the local runtime's package.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sam_template import ROOT, function_resources, load_template
from test_sam_local_invoke import LAMBDA_PYTHON, built, invoke, sam_environments

__all__ = ["built", "sam_environments"]  # fixtures, shared with the sample tests

FUNCTIONS = function_resources(load_template())
WORKFLOW = "hello_standard"
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


def test_a_standard_run_end_is_recorded_by_the_built_recorder_and_read_by_the_built_api(
    local_stack, sam_environments, sam_build, built, tmp_path
):
    from relayflow.local.serve_recorder import status_change_event

    def call(kind: str, event: dict[str, Any]) -> dict[str, Any]:
        logical_id = FUNCTIONS[kind]
        path = _event(tmp_path, f"{kind}-{len(list(tmp_path.iterdir()))}", event)
        return invoke(sam_environments[logical_id], path, sam_build, built, logical_id)

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
    assert "relayflow.control.history" in recorded["relayflowModules"], recorded
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
