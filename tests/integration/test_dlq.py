"""The run DLQ end to end on ``relayflow serve``: archive, manual retry, automatic retry.

A run fails at its second step (an HTTP endpoint that answers 503, a transient failure, or 400,
a permanent one). The recorder archives it; a retry restarts it under the same run id, and the
first step — which already succeeded — returns its recorded result instead of calling again.
Automatic retries are driven through the maintenance function with a chosen ``now``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from http_api import finished_run
from relayflow_testing import (
    HTTP_TIMEOUT,
    Received,
    Reply,
    Server,
    allowed_server,
    eventually,
    tenant_client,
)

from relayflow.dal.dlq import DlqDal
from relayflow.local.serve import LocalServer
from relayflow.reliability.dlq import MAX_AUTO_RETRIES

pytestmark = pytest.mark.integration


class Remote:
    """Two endpoints: /ok always answers 200; /flaky answers ``flaky_status`` until it is
    set to 200."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.flaky_status = 503
        server.reply = self.reply

    def calls(self, path: str, run_id: str) -> int:
        """Requests ``run_id``'s steps sent to ``path`` (webhook_out names the run and step in
        X-Relayflow-Delivery)."""
        return sum(
            1
            for r in self.server.to(path)
            if r.headers.get("x-relayflow-delivery", "").startswith(f"{run_id}:")
        )

    def reply(self, received: Received) -> Reply:
        if received.path == "/flaky" and self.flaky_status != 200:
            return self.flaky_status, {"Content-Type": "application/json"}, b'{"error":"down"}'
        return Server.echo(received)


@pytest.fixture(scope="module")
def remote() -> Iterator[Remote]:
    with allowed_server() as server:
        yield Remote(server)


@pytest.fixture(scope="module")
def server(remote: Remote) -> Iterator[LocalServer]:
    # Concurrent claims rely on DynamoDB's per-request atomicity (the runtime's compat fix).
    with LocalServer(time_scale=0.001) as local:
        local.set_rate_limit(per_second=1000, burst=10_000)
        yield local


@pytest.fixture(autouse=True)
def reset_remote(remote: Remote) -> None:
    remote.flaky_status = 503
    remote.server.requests.clear()


def definition(workflow_id: str, remote: Remote) -> dict[str, Any]:
    return {
        "id": workflow_id,
        # Standard: the recorder archives the run within seconds (an Express run is archived
        # by the maintenance sweep after its deadline, docs/engines.md).
        "engine": "standard",
        "start": "notify",
        "steps": {
            "notify": {
                "type": "webhook_out",
                "url": f"{remote.server.url}/ok",
                "body": {"order": "{{ trigger.order }}"},
                "on_success": "charge",
            },
            "charge": {
                "type": "webhook_out",
                "url": f"{remote.server.url}/flaky",
                "body": {"order": "{{ trigger.order }}"},
                # One attempt per execution (no default retries): /flaky's calls count the
                # executions the DLQ started.
                "retry": "none",
            },
        },
    }


def failed_run(server: LocalServer, api: httpx.Client, workflow_id: str, remote: Remote) -> str:
    """PUT the workflow, run it to its failure at ``charge``, and let the recorder archive it."""
    assert api.put(f"/workflows/{workflow_id}", json=definition(workflow_id, remote)).is_success
    started = api.post(f"/workflows/{workflow_id}/runs", json={"input": {"order": "o-1"}})
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    assert finished_run(api, run_id)["status"] == "failed"
    server.settle()
    return run_id


def settled(server: LocalServer, api: httpx.Client, run_id: str) -> dict[str, Any]:
    """The run once its current execution ended and the recorder settled its DLQ entry."""
    run = finished_run(api, run_id)
    server.settle()
    return run


def step_output(run: dict[str, Any], key: str) -> Any:
    """A step's output from the run's timeline (the final document keeps only live ones)."""
    return [step["output"] for step in run["steps"] if step["key"] == key][-1]


def test_a_failed_run_is_archived_with_what_it_takes_to_understand_and_rerun_it(
    server, api, remote
):
    # When a run fails at its second step with a transient error (503)
    before = datetime.now(UTC)
    run_id = failed_run(server, api, "archive-me", remote)
    # Then the DLQ holds it: workflow, version, trigger payload, error, failing step, and
    # the outputs of the step that succeeded
    entry = api.get(f"/dlq/{run_id}").json()
    assert entry["workflow_id"] == "archive-me" and entry["version"] == 1
    assert entry["input"] == {"order": "o-1"}
    assert (entry["status"], entry["run_status"]) == ("pending", "failed")
    assert entry["error"] == "Relayflow.Transient" and entry["failing_step"] == "charge"
    assert entry["outputs"]["notify"]["status"] == 200
    assert entry["transient"] is True and entry["attempts"] == 0
    # And its first automatic retry is due 2 minutes after the failure (the run's end)
    due = datetime.fromisoformat(entry["next_retry_at"].replace("Z", "+00:00"))
    ended = datetime.fromisoformat(api.get(f"/runs/{run_id}").json()["ended_at"])
    assert ended >= before.replace(microsecond=0)
    assert due - ended == timedelta(minutes=2)
    # And it is listed, newest first, and filtered by status
    listed = api.get("/dlq", params={"status": "pending"}).json()["items"]
    assert run_id in [e["run_id"] for e in listed]
    assert run_id not in [e["run_id"] for e in api.get("/dlq?status=retried").json()["items"]]


def test_a_manual_retry_resumes_the_run_under_its_id_without_repeating_finished_steps(
    server, api, remote
):
    # Given a run archived after /ok was called once and /flaky failed
    run_id = failed_run(server, api, "resume-me", remote)
    assert remote.calls("/ok", run_id) == 1 and remote.calls("/flaky", run_id) == 1
    # When the endpoint recovers and the run is retried from the DLQ
    remote.flaky_status = 200
    retried = api.post(f"/dlq/{run_id}/retry")
    # Then the same run restarts as attempt 2
    assert retried.status_code == 202, retried.text
    assert (retried.json()["run_id"], retried.json()["attempt"]) == (run_id, 2)
    run = settled(server, api, run_id)
    assert (run["status"], run["attempt"]) == ("succeeded", 2)
    # And the step that had succeeded was not repeated: /ok still saw one request, and its
    # recorded output is the step's output
    assert remote.calls("/ok", run_id) == 1
    assert remote.calls("/flaky", run_id) == 2
    assert step_output(run, "notify")["status"] == 200
    # And the entry is retried; retrying it again is refused
    entry = api.get(f"/dlq/{run_id}").json()
    assert (entry["status"], entry["attempts"], entry["last_retry_by"]) == ("retried", 1, "manual")
    again = api.post(f"/dlq/{run_id}/retry")
    assert again.status_code == 409 and again.json()["code"] == "dlq_entry_not_retryable"


def test_an_output_read_after_the_failure_survives_the_resume(server, api, remote):
    # Given a run whose failing step reads the output of the step before it, through a
    # step nobody reads (the document drops what is dead, not what is referenced)
    steps = definition("resume-reads", remote)["steps"]
    steps["notify"]["on_success"] = "pause"
    steps["pause"] = {"type": "noop", "on_success": "charge"}
    steps["charge"]["body"] = {"order": "{{ trigger.order }}", "seen": "{{ steps.notify.output }}"}
    data = {"id": "resume-reads", "start": "notify", "steps": steps}
    assert api.put("/workflows/resume-reads", json=data).is_success
    started = api.post("/workflows/resume-reads/runs", json={"input": {"order": "o-2"}})
    run_id = started.json()["run_id"]
    assert finished_run(api, run_id)["status"] == "failed"
    server.settle()
    # When the endpoint recovers and the run is resumed from the DLQ
    remote.flaky_status = 200
    assert api.post(f"/dlq/{run_id}/retry").status_code == 202
    run = settled(server, api, run_id)
    assert run["status"] == "succeeded"
    # Then notify was not called again, and charge read notify's recorded output both times
    assert remote.calls("/ok", run_id) == 1
    bodies = [json.loads(r.body) for r in remote.server.to("/flaky") if r.body]
    seen = [b["seen"] for b in bodies if b.get("order") == "o-2"]
    assert len(seen) == 2 and seen[0] == seen[1]
    assert seen[1]["status"] == 200
    # And the final document keeps the step the run ended on
    assert set(run["output"]["steps"]) == {"charge"}


def test_transient_failures_retry_automatically_after_2_4_and_8_minutes_then_exhaust(
    server, api, remote
):
    control = server.control()
    run_id = failed_run(server, api, "auto-retry", remote)
    failed_at = datetime.now(UTC)
    # A maintenance pass before the first retry is due starts nothing
    early = control.dlq.retry_due(now=failed_at + timedelta(minutes=1))
    assert run_id not in [s["run_id"] for s in early["started"]]
    offsets = (timedelta(minutes=3), timedelta(minutes=8), timedelta(minutes=17))
    for attempt, offset in enumerate(offsets, start=1):
        # When the maintenance function runs after the backoff (2, then 4, then 8 minutes)
        result = control.dlq.retry_due(now=datetime.now(UTC) + offset)
        # Then it restarts the run once, and the retry fails again
        assert [s["run_id"] for s in result["started"] if s["run_id"] == run_id] == [run_id]
        run = settled(server, api, run_id)
        assert (run["status"], run["attempt"]) == ("failed", attempt + 1)
        entry = api.get(f"/dlq/{run_id}").json()
        assert (entry["auto_attempts"], entry["last_retry_by"]) == (attempt, "auto")
        if attempt < MAX_AUTO_RETRIES:
            # waiting for the next retry, twice as long as the last
            assert entry["status"] == "pending"
            failed = datetime.fromisoformat(run["ended_at"].replace("Z", "+00:00"))
            due = datetime.fromisoformat(entry["next_retry_at"].replace("Z", "+00:00"))
            assert due - failed == timedelta(minutes=2 * 2**attempt)
    # After three automatic retries the entry is exhausted and no pass starts it again
    entry = api.get(f"/dlq/{run_id}").json()
    assert (entry["status"], entry["next_retry_at"]) == ("exhausted", None)
    later = control.dlq.retry_due(now=datetime.now(UTC) + timedelta(days=1))
    assert run_id not in [s["run_id"] for s in later["started"]]
    # The first step ran once over the four executions; the failing one four times
    assert remote.calls("/ok", run_id) == 1 and remote.calls("/flaky", run_id) == 4
    # A manual retry is still allowed, and succeeds once the endpoint is back
    remote.flaky_status = 200
    assert api.post(f"/dlq/{run_id}/retry").status_code == 202
    assert settled(server, api, run_id)["status"] == "succeeded"
    assert api.get(f"/dlq/{run_id}").json()["status"] == "retried"


def test_a_permanent_failure_waits_for_a_manual_retry(server, api, remote):
    # Given a run that failed with a 400 (Relayflow.HttpError: retrying cannot help)
    remote.flaky_status = 400
    run_id = failed_run(server, api, "permanent", remote)
    entry = api.get(f"/dlq/{run_id}").json()
    assert (entry["error"], entry["transient"], entry["next_retry_at"]) == (
        "Relayflow.HttpError",
        False,
        None,
    )
    # Then no maintenance pass retries it
    result = server.control().dlq.retry_due(now=datetime.now(UTC) + timedelta(days=1))
    assert run_id not in [s["run_id"] for s in result["started"]]
    assert api.get(f"/runs/{run_id}").json()["attempt"] == 1


def test_a_discarded_entry_leaves_the_depth_and_cannot_be_retried(server, api, remote):
    store = DlqDal()
    run_id = failed_run(server, api, "discard-me", remote)
    depth = store.depth()
    # When it is discarded
    discarded = api.delete(f"/dlq/{run_id}")
    # Then it is discarded, its automatic retry is gone, and the depth is one less
    assert discarded.status_code == 200, discarded.text
    assert (discarded.json()["status"], discarded.json()["next_retry_at"]) == ("discarded", None)
    assert store.depth() == depth - 1
    result = server.control().dlq.retry_due(now=datetime.now(UTC) + timedelta(hours=1))
    assert run_id not in [s["run_id"] for s in result["started"]]
    refused = api.post(f"/dlq/{run_id}/retry")
    assert refused.status_code == 409 and refused.json()["details"]["status"] == "discarded"
    assert api.delete(f"/dlq/{run_id}").status_code == 409


def test_another_tenant_sees_nothing_of_the_dlq(server, api, remote):
    run_id = failed_run(server, api, "private", remote)
    with tenant_client(server, "other-dlq", timeout=30) as other:
        assert other.get(f"/dlq/{run_id}").status_code == 404
        assert other.post(f"/dlq/{run_id}/retry").status_code == 404
        assert other.delete(f"/dlq/{run_id}").status_code == 404
        assert run_id not in [e["run_id"] for e in other.get("/dlq").json()["items"]]
    assert api.get(f"/dlq/{run_id}").json()["status"] == "pending"


def test_concurrent_retries_of_one_entry_start_one_execution(server, api, remote):
    # Given an archived run, and the endpoint back
    run_id = failed_run(server, api, "race", remote)
    remote.flaky_status = 200
    # When a manual retry and two maintenance passes race for it
    control = server.control()
    answers: list[Any] = []
    barrier = threading.Barrier(3)

    def manual() -> None:
        barrier.wait()
        answers.append(api.post(f"/dlq/{run_id}/retry").status_code)

    def maintenance() -> None:
        barrier.wait()
        answers.append(control.dlq.retry_due(now=datetime.now(UTC) + timedelta(minutes=3)))

    threads = [threading.Thread(target=f) for f in (manual, maintenance, maintenance)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then exactly one of them restarted the run
    started = sum(1 for a in answers if a == 202) + sum(
        1 for a in answers if isinstance(a, dict) for s in a["started"] if s["run_id"] == run_id
    )
    assert started == 1, answers
    run = settled(server, api, run_id)
    assert (run["status"], run["attempt"]) == ("succeeded", 2)
    assert remote.calls("/flaky", run_id) == 2


def test_the_maintenance_admin_route_runs_the_function(server, api, remote):
    answer = httpx.post(
        f"{server.url}/admin/maintenance",
        headers={"X-Admin-Token": server.admin_token},
        timeout=HTTP_TIMEOUT,
    )
    assert answer.status_code == 200, answer.text
    assert set(answer.json()) == {"started", "postponed", "skipped", "depth", "express"}
    assert answer.json()["depth"] == DlqDal().depth()


def test_a_late_event_of_the_earlier_execution_does_not_touch_the_retried_run(server, api, remote):
    from relayflow.control.recorder import record_status_change, status_change_event

    # Given a run that failed, was retried from the DLQ and succeeded
    run_id = failed_run(server, api, "late-event", remote)
    first = server.control().dal.get_run("local", run_id).execution_arn
    remote.flaky_status = 200
    assert api.post(f"/dlq/{run_id}/retry").status_code == 202
    assert settled(server, api, run_id)["status"] == "succeeded"
    # When EventBridge delivers the first execution's FAILED event again
    described = server.runtime.sfn_client.describe_execution(executionArn=first)
    result = record_status_change(status_change_event(described), control=server.control())
    # Then it is ignored: the run stays succeeded and its entry retried
    assert not result["recorded"] and "earlier execution" in result["reason"]
    run = api.get(f"/runs/{run_id}").json()
    assert (run["status"], run["attempt"], run["error"]) == ("succeeded", 2, None)
    assert api.get(f"/dlq/{run_id}").json()["status"] == "retried"


def test_the_recorder_sends_the_workflow_failure_notification_once_per_failed_execution(
    server, api, remote
):
    import json

    # Given a workflow that notifies a webhook of its failed runs
    workflow = definition("notified", remote)
    workflow["notifications"] = {"webhook": {"url": f"{remote.server.url}/alerts"}}
    assert api.put("/workflows/notified", json=workflow).is_success
    # When a run fails, and its retry fails again
    run_id = api.post("/workflows/notified/runs", json={"input": {"order": "o-9"}}).json()["run_id"]
    settled(server, api, run_id)
    assert api.post(f"/dlq/{run_id}/retry").status_code == 202
    settled(server, api, run_id)
    # Then the webhook received one notification per failed execution, naming the workflow,
    # the run, the failing step and the error
    alerts = [json.loads(r.body) for r in remote.server.to("/alerts")]
    mine = [a for a in alerts if a["data"]["run_id"] == run_id]
    assert [a["data"]["attempt"] for a in mine] == [1, 2]
    data = mine[0]["data"]
    assert (data["workflow_id"], data["status"], data["failing_step"], data["error"]) == (
        "notified",
        "failed",
        "charge",
        "Relayflow.Transient",
    )
    assert mine[0]["event"] == "relayflow.run.failed" and mine[0]["id"] != mine[1]["id"]


EXPIRING_APPROVAL = {
    "type": "approval",
    "title": "Refund?",
    "timeout_seconds": 1,
    "timeout_action": "fail",
    "on_approve": "done",
    "on_reject": "done",
}


@pytest.mark.parametrize(
    ("workflow", "failing_step"),
    [
        # an approval that fails its run when nobody answers within a second
        (
            {
                "id": "expiring",
                "start": "ask",
                "steps": {"ask": EXPIRING_APPROVAL, "done": {"type": "noop"}},
            },
            "ask",
        ),
        # the same approval in a parallel branch: the run fails in the parallel
        (
            {
                "id": "expiring-branch",
                "start": "fan",
                "steps": {
                    "fan": {"type": "parallel", "branches": ["ask", "note"]},
                    "ask": EXPIRING_APPROVAL,
                    "done": {"type": "noop"},
                    "note": {"type": "noop"},
                },
            },
            "fan",
        ),
    ],
    ids=["approval", "approval-inside-a-parallel"],
)
def test_an_approval_that_expired_waits_for_a_manual_retry(server, api, workflow, failing_step):
    # Given an approval that fails its run when nobody answers in time
    put = api.put(f"/workflows/{workflow['id']}", json=workflow)
    assert put.is_success, put.text
    run_id = api.post(f"/workflows/{workflow['id']}/runs", json={"input": {}}).json()["run_id"]
    run = settled(server, api, run_id)
    assert (run["status"], run["error"]) == ("failed", "States.Timeout")
    # Then its DLQ entry is not transient: asking the approver again is a person's decision
    # (and the approval the run ended in expired, inside a parallel too)
    entry = api.get(f"/dlq/{run_id}").json()
    assert (entry["failing_step"], entry["transient"], entry["next_retry_at"]) == (
        failing_step,
        False,
        None,
    )


def test_a_retry_does_not_ask_again_for_a_decision_or_a_callback_already_given(server, api, remote):
    # Given a run that was approved, got its partner's callback, then failed at the next step
    workflow = {
        "id": "approved-then-failed",
        "start": "ask",
        "steps": {
            "ask": {
                "type": "approval",
                "title": "Charge order {{ trigger.order }}?",
                "timeout_seconds": 600,
                "on_approve": "partner",
                "on_reject": "stop",
            },
            "partner": {"type": "waitpoint", "timeout_seconds": 600, "on_success": "charge"},
            "charge": {
                "type": "webhook_out",
                "url": f"{remote.server.url}/flaky",
                "body": {"order": "{{ trigger.order }}", "ref": "{{ steps.partner.output.ref }}"},
                "retry": "none",  # one attempt per execution, as above
            },
            "stop": {"type": "noop"},
        },
    }
    assert api.put("/workflows/approved-then-failed", json=workflow).is_success
    run_id = api.post(
        "/workflows/approved-then-failed/runs", json={"input": {"order": "o-5"}}
    ).json()["run_id"]

    def pending_approval() -> Any:
        items = api.get("/approvals").json()["items"]
        return next((a for a in items if a["run_id"] == run_id), None)

    approval = eventually(pending_approval)
    answer = api.post(f"/approvals/{approval['approval_id']}/respond", json={"option": "approve"})
    assert answer.status_code == 200, answer.text
    (waitpoint,) = eventually(
        lambda: api.get("/waitpoints", params={"run_id": run_id}).json()["items"]
    )
    done = api.post(
        f"/waitpoints/{waitpoint['waitpoint_id']}/complete", json={"data": {"ref": "p-1"}}
    )
    assert done.status_code == 200, done.text
    assert settled(server, api, run_id)["status"] == "failed"
    # When the run is retried from the DLQ once the endpoint is back
    remote.flaky_status = 200
    assert api.post(f"/dlq/{run_id}/retry").status_code == 202
    # Then it resumes with the recorded decision and callback data: nobody is asked again
    run = settled(server, api, run_id)
    assert (run["status"], run["attempt"]) == ("succeeded", 2), run
    assert step_output(run, "ask")["option"] == "approve"
    assert step_output(run, "partner") == {"ref": "p-1"}
    assert pending_approval() is None
    assert api.get(f"/approvals/{approval['approval_id']}").json()["status"] == "decided"
    waitpoints = api.get("/waitpoints", params={"run_id": run_id}).json()["items"]
    assert [w["status"] for w in waitpoints] == ["completed"]
    assert remote.calls("/flaky", run_id) == 2


def test_the_dlq_commands_list_retry_and_discard_against_serve(
    server, api, remote, capsys, monkeypatch
):
    from relayflow.cli.main import main

    monkeypatch.delenv("RELAYFLOW_API_URL", raising=False)
    monkeypatch.delenv("RELAYFLOW_API_KEY", raising=False)
    options = ["--api", server.url, "--api-key", server.bootstrap_key]
    run_id = failed_run(server, api, "cli-dlq", remote)
    other = failed_run(server, api, "cli-dlq", remote)
    capsys.readouterr()
    # `dlq list` shows each archived run with its failing step and error
    assert main(["dlq", "list", "--status", "pending", "--limit", "100", *options]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if run_id in line]
    assert len(rows) == 1 and "charge" in rows[0] and "Relayflow.Transient" in rows[0]
    # `dlq get` prints the entry as the API answers it
    assert main(["dlq", "get", run_id, *options]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["run_id"], shown["failing_step"]) == (run_id, "charge")
    # `dlq retry` restarts it; `dlq discard` gives up on the other
    remote.flaky_status = 200
    assert main(["dlq", "retry", run_id, *options]) == 0
    assert f"run {run_id} restarted (attempt 2)" in capsys.readouterr().out
    assert settled(server, api, run_id)["status"] == "succeeded"
    assert main(["dlq", "discard", other, *options]) == 0
    assert api.get(f"/dlq/{other}").json()["status"] == "discarded"
    # And a refused retry exits 1 with the API's reason
    assert main(["dlq", "retry", other, *options]) == 1
    assert "dlq_entry_not_retryable" in capsys.readouterr().err


def test_an_automatic_retry_that_cannot_start_is_dropped_not_attempted_every_minute(server):
    from relayflow.dal import RunItem

    # Given a transient failure of a run that no retry can restart (it was started outside
    # the control plane: no recorded version)
    control = server.control()
    now = datetime.now(UTC)
    run = RunItem(
        run_id="e" * 32,
        tenant="local",
        workflow_id="external-wf",
        version=None,
        status="failed",
        error="Relayflow.Transient",
        started_at=now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        trigger_type="external",
    )
    assert control.dal.create_run(run)
    entry = control.dlq.archive(run, now=now)
    assert entry is not None and entry.next_retry_at is not None
    # When the maintenance function finds it due
    result = control.dlq.retry_due(now=now + timedelta(minutes=3))
    # Then it is skipped, and nothing stays due for it
    assert run.run_id in result["skipped"]
    assert control.dlq.get_entry("local", run.run_id).next_retry_at is None
    again = control.dlq.retry_due(now=now + timedelta(minutes=30))
    assert run.run_id not in again["skipped"] + [s["run_id"] for s in again["started"]]


def test_a_retry_after_a_failed_waitpoint_waits_for_it_again_under_the_same_id(server, api):
    # Given a run whose partner failed its waitpoint (no failure route: the run failed)
    workflow = {
        "id": "partner-failed",
        "start": "partner",
        "steps": {"partner": {"type": "waitpoint", "timeout_seconds": 600}},
    }
    assert api.put("/workflows/partner-failed", json=workflow).is_success
    run_id = api.post("/workflows/partner-failed/runs", json={"input": {}}).json()["run_id"]
    (first,) = eventually(lambda: api.get("/waitpoints", params={"run_id": run_id}).json()["items"])
    path = f"/waitpoints/{first['waitpoint_id']}"
    assert api.post(f"{path}/fail", json={"message": "try later"}).status_code == 200
    run = settled(server, api, run_id)
    assert (run["status"], run["error"]) == ("failed", "Relayflow.WaitpointFailed")
    assert api.get(f"/dlq/{run_id}").json()["transient"] is False
    # When it is retried from the DLQ
    assert api.post(f"/dlq/{run_id}/retry").status_code == 202

    # Then the same waitpoint waits again, its failure forgotten, and completing it resumes
    # the retried execution
    def pending() -> Any:
        waitpoint = api.get(path).json()
        return waitpoint if waitpoint["status"] == "pending" else None

    again = eventually(pending)
    assert again["error"] is None
    assert api.post(f"{path}/complete", json={"data": {"ok": True}}).status_code == 200
    run = settled(server, api, run_id)
    assert (run["status"], run["attempt"]) == ("succeeded", 2)
    assert step_output(run, "partner") == {"ok": True}
