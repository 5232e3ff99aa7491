"""A step attempt that timed out is retried as its policy says: the retry really acts (no
false "already running" from the record the abandoned call still holds), its own result is
the step's, and the abandoned call's late result is never recorded over it. A restart of the
run still replays the recorded result. A timed-out run names its error."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from relayflow_testing import Received, Reply, Server, allowed_server

from relayflow.compiler import compile_workflow
from relayflow.compiler.options import local_state_machine_name
from relayflow.definition.models import Workflow
from relayflow.document import execution_input
from relayflow.local import LocalRuntime
from relayflow.runner import run_workflow
from relayflow.settings import get_settings

pytestmark = pytest.mark.integration

HOLD_LIMIT_SECONDS = 60.0


class SlowFirstCall:
    """The first request is held until released; every later one answers at once. Each
    answer names the request's position."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.release = threading.Event()
        self.first_answered = threading.Event()
        self.count = 0
        self.lock = threading.Lock()
        server.reply = self.reply

    def reply(self, received: Received) -> Reply:
        with self.lock:
            self.count += 1
            number = self.count
        if number == 1:
            self.release.wait(HOLD_LIMIT_SECONDS)
        body = json.dumps({"attempt": number}).encode()
        if number == 1:
            self.first_answered.set()
        return 200, {"Content-Type": "application/json"}, body


@pytest.fixture
def remote() -> Iterator[SlowFirstCall]:
    with allowed_server() as server:
        slow = SlowFirstCall(server)
        try:
            yield slow
        finally:
            slow.release.set()


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with LocalRuntime(time_scale=0.001) as rt, allowed_server() as warm:
        # Load the webhook_out function once: its first import must not eat the 1 s timeout.
        warmed = run_workflow(
            workflow(f"{warm.url}/warm", timeout=30), {"order": "o-0"}, runtime=rt
        )
        assert warmed.status == "succeeded", (warmed.error, warmed.cause)
        yield rt


def workflow(url: str, timeout: int = 1, **retry: Any) -> Workflow:
    return Workflow.model_validate(
        {
            "id": "deliver",
            "start": "send",
            "steps": {
                "send": {
                    "type": "webhook_out",
                    "url": url,
                    "body": {"order": "{{ trigger.order }}"},
                    "timeout_seconds": timeout,
                    "retry": {"max_attempts": 5, "retry_on": ["States.Timeout"], **retry},
                }
            },
        }
    )


def recorded_outputs(runtime: LocalRuntime, run_id: str) -> list[Any]:
    from relayflow.dal.codec import deserialize

    table = get_settings().table_name
    items = runtime.dynamodb_client.scan(TableName=table)["Items"]
    records = [deserialize(item) for item in items]
    return [
        json.loads(r["data"])
        for r in records
        if run_id in str(r.get("pk")) and r.get("status") == "COMPLETED"
    ]


def attempt_of(output: Any) -> int:
    return int(output["body"]["attempt"])


def test_a_timed_out_attempt_is_retried_and_the_retrys_result_is_the_steps(
    runtime: LocalRuntime, remote: SlowFirstCall
) -> None:
    # Given a webhook_out step with a 1 s timeout whose first call hangs, retried on
    # States.Timeout
    run_id = uuid.uuid4().hex
    definition = workflow(f"{remote.server.url}/hook", base_seconds=1)
    # When the run runs
    result = run_workflow(definition, {"order": "o-1"}, runtime=runtime, run_id=run_id)
    # Then a later attempt really ran, and its answer (the last request's) is the step's output
    assert result.status == "succeeded", (result.error, result.cause)
    send = next(step for step in result.steps if step.key == "send")
    assert remote.count >= 2
    assert send.attempts >= 2
    assert attempt_of(send.output) == remote.count
    # When the abandoned first call finally completes
    remote.release.set()
    assert remote.first_answered.wait(HOLD_LIMIT_SECONDS)
    _wait_for_first_invocation(runtime, run_id)
    # Then its late result is not recorded over the retry's
    last = remote.count
    assert [attempt_of(o["output"]) for o in recorded_outputs(runtime, run_id)] == [last]
    # And a restart of the run replays the retry's result without calling again
    document = execution_input(definition.id, {"order": "o-1"}, run_id=run_id)
    replay = runtime.run(
        local_state_machine_name(definition.id),
        compile_workflow(definition).asl,
        document,
        execution_name=f"{run_id}_r2",
    )
    assert replay.status == "SUCCEEDED"
    assert attempt_of(replay.output["steps"]["send"]["output"]) == last
    assert remote.count == last


def test_a_run_that_times_out_names_its_error(runtime: LocalRuntime) -> None:
    # Given a workflow whose run timeout is shorter than its delay
    definition = Workflow.model_validate(
        {
            "id": "sleepy",
            "start": "hold",
            "run_timeout_seconds": 1,
            "steps": {
                "hold": {"type": "delay", "seconds": 3600, "on_success": "mark"},
                "mark": {"type": "noop"},
            },
        }
    )
    runtime.time_scale = 1.0
    try:
        # When it runs past its timeout
        result = run_workflow(definition, {}, runtime=runtime)
    finally:
        runtime.time_scale = 0.001
    # Then it timed out, and says so by name
    assert result.status == "timed_out"
    assert result.error == "States.Timeout"


def _wait_for_first_invocation(runtime: LocalRuntime, run_id: str) -> None:
    """Until the abandoned first invocation of the run's webhook_out step has returned."""
    deadline = time.monotonic() + HOLD_LIMIT_SECONDS
    while time.monotonic() < deadline:
        done = [
            i
            for i in runtime.invocations_of("relayflow-webhook_out")
            if json.dumps(i.payload).find(run_id) >= 0
        ]
        if any(i.result is not None for i in done) and len(done) >= 2:
            return
        time.sleep(0.02)
    raise AssertionError("the abandoned first invocation never returned")


DELAYED = """\
id: delayed
start: hold
steps:
  hold: {type: delay, seconds: 3600}
"""


def test_relayflow_run_timeout_ends_the_command(tmp_path: Path) -> None:
    # Given a workflow that waits an hour
    path = tmp_path / "delayed.yaml"
    path.write_text(DELAYED)
    # When `relayflow run --timeout 2` runs it at real speed (an hour unless the timeout works;
    # subprocess's own timeout only ends a test that is failing anyway)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "relayflow.cli",
            "run",
            str(path),
            "--timeout",
            "2",
            "--time-scale",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Then the command gives up with exit 1 and says why, long before the run would end
    assert done.returncode == 1, done.stderr
    assert "did not finish within --timeout 2 s" in done.stderr
    assert "Traceback" not in done.stderr
