"""Run admission on ``relayflow serve`` (LocalServer): singleton, concurrency, debounce and
batch, through the HTTP API, webhooks and trigger deliveries, with real executions on the
local runtime and the recorder freeing slots as runs end.

Time that matters (debounce periods, batch timeouts) comes from a controllable clock set on
the admission, and one-time schedules are fired by the test when that clock says they are
due (what EventBridge Scheduler does on AWS). Concurrency tests use threads against moto's
DynamoDB with its requests serialised, as DynamoDB applies a request's condition and write
atomically and moto does not (see ``test_flow_control.py``).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from http_api import admission_clock, order_event_delivery
from relayflow_testing import FixedClock, eventually
from serial_moto import serialise_dynamodb

from relayflow.control.admission import key_id
from relayflow.control.dispatch import handle_trigger
from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration
TENANT = "local"
T0 = 1_900_000_000.0


@pytest.fixture
def clock(server: LocalServer) -> Iterator[FixedClock]:
    with admission_clock(server, T0) as clock:
        yield clock


@pytest.fixture
def serial_dynamodb(monkeypatch: pytest.MonkeyPatch) -> None:
    serialise_dynamodb(monkeypatch)


def workflow(workflow_id: str, *, delay: int = 100, **rules: Any) -> dict[str, Any]:
    """A workflow that holds each run in a (time-scaled) delay, then echoes its trigger."""
    return {
        "id": workflow_id,
        "start": "hold",
        "steps": {
            "hold": {"type": "delay", "seconds": delay, "on_success": "echo"},
            "echo": {"type": "transform", "mapping": {"trigger": "{{ trigger }}"}},
        },
        **rules,
    }


def register(api: httpx.Client, definition: dict[str, Any]) -> str:
    response = api.put(f"/workflows/{definition['id']}", json=definition)
    assert response.status_code in (200, 201), response.text
    return str(definition["id"])


def fresh(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def runs(server: LocalServer, workflow_id: str) -> list[Any]:
    items, _ = server.control().dal.list_runs(
        TENANT, workflow_id, status=None, limit=100, next_token=None
    )
    return items


def executions_running(server: LocalServer, workflow_id: str) -> int:
    sfn = server.runtime.sfn_client
    machines = sfn.list_state_machines()["stateMachines"]
    arns = [m["stateMachineArn"] for m in machines if m["name"].endswith(workflow_id)]
    return sum(
        len(sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"])
        for arn in arns
    )


def output_trigger(server: LocalServer, run: Any) -> Any:
    record = server.runtime.wait(run.execution_arn, timeout=30)
    return record.output["steps"]["echo"]["output"]["trigger"]


def fire_due(server: LocalServer, clock: FixedClock) -> int:
    """Fire the admission deadlines the clock has reached (Scheduler's part, locally)."""
    return server.fire_due_deadlines(clock.now)


def start(api: httpx.Client, workflow_id: str, payload: Any) -> httpx.Response:
    return api.post(f"/workflows/{workflow_id}/runs", json={"input": payload})


# --------------------------------------------------------------------------- concurrency


def test_concurrency_two_with_ten_triggers_runs_two_at_a_time_fifo(server, api):
    # Given a workflow that lets 2 runs of a customer run at once
    concurrency = {"limit": 2, "key": "{{ trigger.c }}"}
    wf = register(api, workflow(fresh("conc"), delay=1, concurrency=concurrency))

    # When 10 runs of one customer are asked for, and one of another customer (step-through
    # runs: each holds its slot, paused at its first gate, until the test lets it go, so no
    # run ends while the requests are still arriving)
    def stepped(payload: Any) -> httpx.Response:
        return api.post(f"/workflows/{wf}/runs", json={"input": payload, "step_through": True})

    answers = [stepped({"c": "a", "n": n}) for n in range(10)]
    other = stepped({"c": "b", "n": 99})
    # Then 2 start and 8 queue (202); the other customer's run is not held up
    assert [a.status_code for a in answers] == [201, 201] + [202] * 8
    assert all(a.json()["admission"] == "queued" for a in answers[2:])
    assert other.status_code == 201
    ids = [a.json()["run_id"] for a in answers]
    peak = 0

    control = server.control()

    def all_done() -> bool:
        nonlocal peak
        items = {r.run_id: r for r in runs(server, wf)}
        running = [i for i in ids if items[i].status == "running"]
        peak = max(peak, len(running))
        for run_id in running:  # let each go once it holds a slot
            with contextlib.suppress(Exception):  # not at its gate yet: next round
                control.continue_run(TENANT, run_id, to_end=True)
        return all(items[i].status == "succeeded" for i in ids)

    # And as runs end, queued ones start: never more than 2 running, all 10 finish
    eventually(all_done)
    control.cancel_run(TENANT, other.json()["run_id"])
    assert peak <= 2
    # (the other customer's execution stops asynchronously after the cancel answers)
    eventually(lambda: executions_running(server, wf) == 0)
    # And queued runs started first in, first out
    by_id = {r.run_id: r for r in runs(server, wf)}
    starts = [by_id[i].started_at for i in ids[2:]]
    assert starts == sorted(starts)
    assert [output_trigger(server, by_id[i])["n"] for i in ids] == list(range(10))
    gate = server.control().admission.store.gate(TENANT, wf, key_id("a"))
    assert (gate["running"], gate["queued"]) == (0, 0)


def test_concurrent_triggers_never_take_more_slots_than_the_limit(server, serial_dynamodb):
    # Given a limit of 2 and 10 threads asking for a run of one key at the same moment
    control = server.control()
    wf = fresh("conc-threads")
    # (step-through runs, paused before their first step: each holds its slot until let go,
    # so the gate is read while both starters hold it, whatever the timing)
    control.put_workflow(TENANT, wf, workflow(wf, delay=1, concurrency={"limit": 2}))
    with ThreadPoolExecutor(max_workers=10) as pool:
        results = list(
            pool.map(
                lambda n: control.start_run(TENANT, wf, {"n": n}, step_through=True), range(10)
            )
        )
    # Then exactly 2 started and 8 queued, and the gate holds exactly the 2 started
    started = [r.run_id for r in results if r.admission is None]
    queued = [r.run_id for r in results if r.admission == "queued"]
    assert (len(started), len(queued)) == (2, 8)
    store = control.admission.store
    assert sorted(store.holders(TENANT, wf, key_id("default"))) == sorted(started)
    assert sorted(store.queue(TENANT, wf, key_id("default"))) == sorted(queued)

    # And every one of them finishes in the end, each let go once it holds a slot
    def all_let_go() -> bool:
        for run in runs(server, wf):
            if run.status == "running":
                with contextlib.suppress(Exception):  # not at its gate yet: next round
                    control.continue_run(TENANT, run.run_id, to_end=True)
        return all(r.status == "succeeded" for r in runs(server, wf))

    eventually(all_let_go)
    assert len(runs(server, wf)) == 10


def test_cancelling_a_queued_run_takes_it_out_of_the_queue(server, api):
    wf = register(api, workflow(fresh("conc-cancel"), delay=2000, concurrency={"limit": 1}))
    first = start(api, wf, {"n": 1}).json()
    second = start(api, wf, {"n": 2}).json()
    assert second["admission"] == "queued"
    fetched = api.get(f"/runs/{second['run_id']}")
    assert fetched.status_code == 200, fetched.text
    assert (fetched.json()["status"], fetched.json()["steps"]) == ("queued", [])
    listed = api.get(f"/workflows/{wf}/runs", params={"status": "queued"}).json()
    assert listed.get("items") is not None, listed
    assert [r["run_id"] for r in listed["items"]] == [second["run_id"]]
    cancelled = api.post(f"/runs/{second['run_id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "aborted"
    assert server.control().admission.store.queue(TENANT, wf, key_id("default")) == []
    api.post(f"/runs/{first['run_id']}/cancel")


# --------------------------------------------------------------------------- singleton


def test_singleton_skip_names_the_running_run_until_it_ends(server, api):
    wf = register(api, workflow(fresh("single"), delay=300, singleton={"key": "{{ trigger.c }}"}))
    # Given a running run for customer a (in step-through, paused before its first step: it
    # holds the slot until let go, however slowly the next requests arrive)
    first = api.post(
        f"/workflows/{wf}/runs", json={"input": {"c": "a", "n": 1}, "step_through": True}
    )
    assert first.status_code == 201
    # When another trigger for a arrives, and one for b
    second = start(api, wf, {"c": "a", "n": 2})
    other = start(api, wf, {"c": "b", "n": 3})
    # Then a's is skipped, naming the running run; b's starts
    assert second.status_code == 200
    assert second.json()["admission"] == "skipped"
    assert second.json()["run_id"] == first.json()["run_id"]
    assert other.status_code == 201
    # And once the first run ended (recorded), a new trigger for a starts
    first_id = first.json()["run_id"]
    eventually(lambda: api.post(f"/runs/{first_id}/continue", json={"to_end": True}).is_success)
    eventually(lambda: server.control().dal.get_run(TENANT, first_id).status == "succeeded")
    third = start(api, wf, {"c": "a", "n": 4})
    assert third.status_code == 201 and third.json()["run_id"] != first_id


def test_singleton_cancel_running_stops_the_old_run_and_starts_the_new(server, api):
    wf = register(
        api, workflow(fresh("single-c"), delay=5000, singleton={"mode": "cancel_running"})
    )
    first = start(api, wf, {"n": 1}).json()
    second = start(api, wf, {"n": 2})
    assert second.status_code == 201
    dal = server.control().dal
    assert dal.get_run(TENANT, first["run_id"]).status == "aborted"
    assert dal.get_run(TENANT, second.json()["run_id"]).status == "running"
    holders = server.control().admission.store.holders(TENANT, wf, key_id("default"))
    assert holders == [second.json()["run_id"]]
    api.post(f"/runs/{second.json()['run_id']}/cancel")


def test_concurrent_singleton_triggers_start_exactly_one_run(server, serial_dynamodb):
    control = server.control()
    wf = fresh("single-threads")
    control.put_workflow(TENANT, wf, workflow(wf, delay=2000, singleton={"mode": "skip"}))
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda n: control.start_run(TENANT, wf, {"n": n}), range(8)))
    started = [r for r in results if r.admission is None]
    assert len(started) == 1
    assert {r.run_id for r in results} == {started[0].run_id}
    assert executions_running(server, wf) == 1
    control.cancel_run(TENANT, started[0].run_id)


# --------------------------------------------------------------------------- debounce


def webhook_workflow(workflow_id: str, slug: str, **rules: Any) -> dict[str, Any]:
    definition = workflow(workflow_id, delay=1, **rules)
    definition["triggers"] = [{"type": "webhook", "slug": slug}]
    return definition


def test_twenty_webhook_posts_in_the_period_start_one_run_with_the_last(server, api, clock):
    slug = fresh("deb")
    debounce = {"key": "{{ trigger.order }}", "period": "30s", "max_wait": "5m"}
    wf = register(api, webhook_workflow(fresh("deb"), slug, debounce=debounce))
    # When 20 posts for one order arrive a second apart
    answers = []
    for n in range(20):
        clock.now = T0 + n
        answers.append(api.post(f"/hooks/{slug}", json={"order": "o-1", "n": n}))
    # Then each is accepted (202) with the same pending run id, and nothing runs yet
    assert {a.status_code for a in answers} == {202}
    assert {a.json()["admission"] for a in answers} == {"debounced"}
    assert answers[-1].json()["starts_at"] == "2030-03-17T17:47:29.000Z"  # T0 + 19 s + 30 s
    pending = {a.json()["run_id"] for a in answers}
    assert len(pending) == 1
    fire_due(server, clock)  # other tests' deadlines may fire; none of this key is due
    assert runs(server, wf) == []
    # When the key has been quiet for the period
    clock.now = T0 + 19 + 30
    fire_due(server, clock)
    # Then exactly one run started, under the pending id, with the last payload
    (run,) = runs(server, wf)
    assert run.run_id == pending.pop()
    assert output_trigger(server, run) == {"order": "o-1", "n": 19}


def test_max_wait_forces_a_start_under_continuous_traffic(server, api, clock):
    slug = fresh("deb-max")
    debounce = {"key": "{{ trigger.order }}", "period": 30, "max_wait": "5m"}
    wf = register(api, webhook_workflow(fresh("deb-max"), slug, debounce=debounce))
    # When a post arrives every 20 s for 400 s (never 30 s of quiet)
    pending_ids = []
    for n in range(21):
        clock.now = T0 + 20 * n
        fire_due(server, clock)
        pending_ids.append(api.post(f"/hooks/{slug}", json={"order": "o-2", "n": n}).json())
    # Then max_wait started a run at 300 s with the last trigger before it
    started = runs(server, wf)
    assert len(started) == 1
    assert output_trigger(server, started[0]) == {"order": "o-2", "n": 14}
    # And the posts after it wait under a new pending run id
    assert pending_ids[0]["run_id"] == started[0].run_id == pending_ids[14]["run_id"]
    assert {p["run_id"] for p in pending_ids[15:]} == {pending_ids[15]["run_id"]}
    assert pending_ids[15]["run_id"] != started[0].run_id


def test_concurrent_debounced_triggers_share_one_pending_run(server, clock, serial_dynamodb):
    control = server.control()
    wf = fresh("deb-threads")
    control.put_workflow(TENANT, wf, workflow(wf, delay=1, debounce={"period": 10}))
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda n: control.start_run(TENANT, wf, {"n": n}), range(16)))
    assert len({r.run_id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    clock.now = T0 + 10
    fire_due(server, clock)
    (run,) = runs(server, wf)
    assert output_trigger(server, run)["n"] in range(16)


# --------------------------------------------------------------------------- batch


def event_delivery(workflow_id: str, n: int) -> dict[str, Any]:
    return order_event_delivery(TENANT, workflow_id, f"evt-{n}", {"n": n})


def test_250_events_with_max_100_give_three_runs_of_100_100_and_50(
    server, api, clock, serial_dynamodb
):
    definition = workflow(fresh("batch"), delay=1, batch={"max_size": 100, "timeout": "60s"})
    definition["triggers"] = [{"type": "event", "source": "shop", "detail_type": "order.created"}]
    wf = register(api, definition)
    control = server.control()
    # When 250 events arrive from 5 concurrent deliverers
    with ThreadPoolExecutor(max_workers=5) as pool:
        results = list(
            pool.map(lambda n: handle_trigger(event_delivery(wf, n), control=control), range(250))
        )
    assert {r["status"] for r in results} == {"batched"}
    # Then two full batches started at once; the third starts when its timeout runs out
    assert len(runs(server, wf)) == 2
    clock.now = T0 + 60
    fire_due(server, clock)
    started = runs(server, wf)
    sizes = sorted((len(json.loads(r.input)) for r in started), reverse=True)
    assert sizes == [100, 100, 50]
    # And every event is in exactly one run, each batch in arrival order of its triggers
    seen = [t["detail"]["n"] for r in started for t in output_trigger(server, r)]
    assert sorted(seen) == list(range(250))
    assert {r.trigger_type for r in started} == {"batch"}


def test_webhook_deliveries_are_batched_too(server, api):
    slug = fresh("batch-hook")
    definition = webhook_workflow(fresh("batch-hook"), slug, batch={"max_size": 3})
    wf = register(api, definition)
    answers = [api.post(f"/hooks/{slug}", json={"n": n}) for n in range(3)]
    assert {a.status_code for a in answers} == {202}
    assert {a.json()["admission"] for a in answers} == {"batched"}
    assert len({a.json()["run_id"] for a in answers}) == 1
    # And each answer says how many triggers the batch holds (docs/flow-control.md)
    assert [a.json().get("batch_size") for a in answers] == [1, 2, 3]
    (run,) = runs(server, wf)
    assert output_trigger(server, run) == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_api_starts_are_not_batched(server, api):
    wf = register(api, workflow(fresh("batch-api"), delay=1, batch={"max_size": 5}))
    answer = start(api, wf, {"n": 1})
    assert answer.status_code == 201 and answer.json().get("admission") is None


# --------------------------------------------------------------------------- schedule overlap


def cron_workflow(workflow_id: str, overlap: str) -> dict[str, Any]:
    """A cron workflow whose runs hold at a waitpoint until the test completes it (no
    timeout): a run is slow for exactly as long as the test says, however loaded the machine."""
    return {
        "id": workflow_id,
        "start": "hold",
        "steps": {
            "hold": {"type": "waitpoint", "label": "slow", "on_success": "done"},
            "done": {"type": "noop"},
        },
        "triggers": [{"type": "cron", "cron": "*/5 * * * *", "overlap": overlap}],
    }


def finish_slow_run(api: httpx.Client, run_id: str) -> None:
    """Complete the run's waitpoint, so the run ends (succeeds) rather than being stopped."""
    (waitpoint,) = eventually(
        lambda: api.get("/waitpoints", params={"run_id": run_id}).json()["items"]
    )
    done = api.post(f"/waitpoints/{waitpoint['waitpoint_id']}/complete", json={"data": {}})
    assert done.status_code == 200, done.text


def tick(server: LocalServer, workflow_id: str, minute: int) -> dict[str, Any]:
    """Fire the workflow's cron schedule for 10:<minute> and return the trigger's result."""
    from relayflow.cron import schedule_name

    name = schedule_name(TENANT, workflow_id, 0, 0)
    delivery = server.events.fire_schedule(name, f"2026-12-01T10:{minute:02d}:00Z", wait=True)
    return dict(delivery.result)


def test_overlap_skip_drops_ticks_while_the_previous_run_runs(server, api):
    wf = register(api, cron_workflow(fresh("cron-skip"), "skip"))
    first = tick(server, wf, 0)
    second = tick(server, wf, 5)
    assert first["status"] == "started"
    assert (second["status"], second["run_id"]) == ("skipped", first["run_id"])
    assert len(runs(server, wf)) == 1
    # Once the slow run has ended, the next tick starts again
    finish_slow_run(api, first["run_id"])
    server.settle()
    dal = server.control().dal
    eventually(lambda: dal.get_run(TENANT, first["run_id"]).status == "succeeded")

    def started_tick() -> dict[str, Any] | None:
        result = tick(server, wf, 10)
        return result if result["status"] == "started" else None

    finish_slow_run(api, eventually(started_tick)["run_id"])


def test_overlap_buffer_one_keeps_one_tick_for_when_the_run_ends(server, api):
    wf = register(api, cron_workflow(fresh("cron-buf"), "buffer_one"))
    first = tick(server, wf, 0)
    second = tick(server, wf, 5)
    third = tick(server, wf, 10)
    # Then the 10:05 tick waits and the 10:10 one is skipped (one buffered at most)
    assert first["status"] == "started"
    assert second["status"] == "queued"
    assert (third["status"], third["run_id"]) == ("skipped", first["run_id"])
    assert {r.run_id for r in runs(server, wf)} == {first["run_id"], second["run_id"]}
    # When the slow run ends, the buffered tick starts
    finish_slow_run(api, first["run_id"])
    dal = server.control().dal
    eventually(lambda: dal.get_run(TENANT, first["run_id"]).status == "succeeded")
    eventually(lambda: dal.get_run(TENANT, second["run_id"]).status == "running")
    api.post(f"/runs/{second['run_id']}/cancel")


# --------------------------------------------------------------------------- schedule catch-up


def test_catch_up_after_a_three_hour_disable_runs_the_last_hours_ticks(server, api, clock):
    from relayflow.reliability.breakers import workflow_breaker_id

    wf = fresh("catch-up")
    definition = workflow(wf, delay=1)
    definition["triggers"] = [
        {
            "type": "cron",
            "cron": "*/15 * * * *",
            "input": {"job": "sync"},
            "catch_up": {"window": "1h"},
        }
    ]
    register(api, definition)
    ten = datetime(2026, 12, 1, 10, 0, tzinfo=UTC).timestamp()
    # Given the 10:00 tick ran
    clock.now = ten
    assert tick(server, wf, 0)["status"] == "started"
    # When the workflow is disabled for 3 hours and enabled again at 13:00
    assert api.delete(f"/workflows/{wf}").status_code == 200
    clock.now = ten + 3 * 3600
    register(api, definition)
    # Then the ticks of the last hour (12:00 to 13:00) ran once each, oldest first
    keys = sorted(r.idempotency_key for r in runs(server, wf))
    hours = ("10:00", "12:00", "12:15", "12:30", "12:45", "13:00")
    assert keys == [f"schedule:0:2026-12-01T{h}:00Z" for h in hours]
    # And the 7 older ticks (10:15 to 11:45) are recorded as skipped
    skips = server.control().breakers.store.list_skips(TENANT, workflow_breaker_id(wf))
    assert len(skips) == 1 and skips[0].reason.startswith("7 missed tick(s) of triggers[0]")
    # And Scheduler's own delivery of 13:00 starts no second run; enabling again adds none
    from relayflow.cron import schedule_name

    name = schedule_name(TENANT, wf, 0, 0)
    late = server.events.fire_schedule(name, "2026-12-01T13:00:00Z", wait=True)
    assert late.result["status"] == "duplicate"
    register(api, definition)
    assert len(runs(server, wf)) == 6


def test_a_debounced_run_refused_at_its_deadline_is_tried_again_later(server, api, clock):
    # Given a pending debounced run, and its workflow disabled before the deadline
    wf = register(api, workflow(fresh("deb-retry"), delay=1, debounce={"period": 30}))
    pending = start(api, wf, {"n": 1}).json()
    assert api.delete(f"/workflows/{wf}").status_code == 200
    # When the deadline fires, the start is refused: nothing runs, the trigger is kept
    clock.now = T0 + 30
    fire_due(server, clock)
    assert runs(server, wf) == []
    # When the workflow is enabled again, the retry a minute later starts the run
    register(api, workflow(wf, delay=1, debounce={"period": 30}))
    clock.now = T0 + 30 + 60
    fire_due(server, clock)
    (run,) = runs(server, wf)
    assert run.run_id == pending["run_id"]
    assert output_trigger(server, run) == {"n": 1}
