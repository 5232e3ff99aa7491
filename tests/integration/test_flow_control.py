"""Flow control against DynamoDB (moto): the semaphore under 30 threads, lease expiry, per-key
limits, rate windows, the guarded step functions, and whole workflows on the local runtime.

moto checks a write's condition and applies the write in two Python steps, so two threads can
both pass the check on one item; DynamoDB does both atomically per request. The
``serial_dynamodb`` fixture serialises moto's DynamoDB requests (it also records them), so
these tests check Relayflow's protocol under DynamoDB's guarantee rather than moto's thread
safety. Without it the 30-thread test sees a fourth holder now and then.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest
from relayflow_testing import load_handler, moto_table
from serial_moto import serialise_dynamodb

from relayflow.adapters.aws import client
from relayflow.dal import create_table
from relayflow.document import StepRef
from relayflow.errors import Throttled
from relayflow.local import LocalRuntime
from relayflow.observability import step_handler
from relayflow.reliability.flow import WHOLE_STEP, FlowControl, FlowLimits, FlowScope
from relayflow.runner import run_workflow
from relayflow.settings import get_settings
from relayflow.steps import transform
from relayflow.steps.guard import flow_controlled
from relayflow.validation import load_workflow_text

pytestmark = pytest.mark.integration

SCOPE = FlowScope("acme", "orders", "charge", "run-1")
T0 = 1_800_000_000.0  # a window boundary for 60 s windows


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class DynamoRequests:
    """Every DynamoDB request moto served, by action name."""

    def __init__(self) -> None:
        self.actions: list[str] = []

    def writes(self) -> int:
        return sum(a in ("PutItem", "UpdateItem", "DeleteItem") for a in self.actions)


@pytest.fixture
def serial_dynamodb(monkeypatch: pytest.MonkeyPatch) -> DynamoRequests:
    served = DynamoRequests()
    serialise_dynamodb(monkeypatch, served.actions)
    return served


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, serial_dynamodb: DynamoRequests) -> Iterator[None]:
    """moto, fake credentials, and the Relayflow table."""
    with moto_table(monkeypatch):
        serial_dynamodb.actions.clear()
        yield


def flow_items() -> list[dict[str, Any]]:
    """The table's flow-control items (plain values)."""
    from relayflow.dal.codec import deserialize

    raw = client("dynamodb").scan(TableName=get_settings().table_name)["Items"]
    return [deserialize(i) for i in raw if "#FLOW#" in i["pk"]["S"]]


# --------------------------------------------------------------------------- the semaphore


def test_thirty_threads_never_hold_more_than_a_limit_of_three(aws):
    # Given 30 threads that each need the step twice, under a limit of 3
    # (holders keep their slot until some thread has been refused: a refusal happens only
    # while 3 hold, so 3 held at once and some were refused, whatever the scheduler does)
    control = FlowControl()
    lock = threading.Lock()
    refused = threading.Event()
    holding, most, runs, refusals = 0, 0, 0, 0

    def worker() -> None:
        nonlocal holding, most, runs, refusals
        done = 0
        while done < 2:
            try:
                lease = control.acquire(SCOPE, WHOLE_STEP, 3, 30)
            except Throttled:
                with lock:
                    refusals += 1
                refused.set()
                time.sleep(0.002)
                continue
            try:
                with lock:
                    holding += 1
                    most = max(most, holding)
                assert refused.wait(timeout=60), "nobody was refused while 3 held"
                with lock:
                    holding -= 1
                    runs += 1
            finally:
                control.release(lease)
            done += 1

    # When they all compete at once
    with ThreadPoolExecutor(max_workers=30) as pool:
        for future in [pool.submit(worker) for _ in range(30)]:
            future.result(timeout=60)
    # Then never more than 3 held a slot at once, all 60 runs happened, some were refused,
    # and every slot was given back
    assert most == 3
    assert runs == 60
    assert refusals > 0
    assert flow_items() == []


def test_a_dead_holders_slot_is_reused_once_its_lease_runs_out(aws):
    # Given a limit of 2 and a holder that acquired a 30 s lease and then died
    clock = Clock()
    control = FlowControl(clock=clock)
    dead = control.acquire(SCOPE, WHOLE_STEP, 2, 30)
    alive = control.acquire(SCOPE, WHOLE_STEP, 2, 300)
    # When another execution comes 10 s later, both slots are held
    clock.now += 10
    with pytest.raises(Throttled) as info:
        control.acquire(SCOPE, WHOLE_STEP, 2, 30)
    assert info.value.details["retry_after"] == 20.0
    # And once the dead lease has run out, its slot goes to the newcomer
    clock.now += 20
    fresh = control.acquire(SCOPE, WHOLE_STEP, 2, 30)
    assert fresh.slot == dead.slot != alive.slot
    # Then the dead holder's late release leaves the new lease in place
    assert control.release(dead) is False
    held = {item["slot"]: item["lease_id"] for item in flow_items()}
    assert held == {fresh.slot: fresh.lease_id, alive.slot: alive.lease_id}


def test_limits_per_key_are_independent(aws):
    # Given a limit of 1 per customer
    control = FlowControl()
    limits = FlowLimits.from_config({"concurrency": {"limit": 1, "key": "{{ trigger.customer }}"}})

    def doc(customer: str) -> dict[str, Any]:
        return {"trigger": {"customer": customer}}

    # When customer a holds its slot
    with control.admitted(SCOPE, limits, doc("a"), 30) as a_lease:
        # Then customer b still gets one, and a second execution for a is throttled
        with control.admitted(SCOPE, limits, doc("b"), 30) as b_lease:
            assert (a_lease.group, b_lease.group) == ("a", "b")
            with pytest.raises(Throttled) as info:
                control.acquire(SCOPE, "a", 1, 30)
            assert info.value.details["key"] == "a"
        # And the same key in another tenant is another group
        other_tenant = FlowScope("globex", "orders", "charge")
        with control.admitted(other_tenant, limits, doc("a"), 30):
            pass
    assert flow_items() == []


def test_a_rate_limit_admits_exactly_n_in_any_window_under_concurrency(aws):
    # Given a rate of 5 starts per 60 s, and 12 concurrent starts 10 s into a minute
    clock = Clock(T0 + 10)
    control = FlowControl(clock=clock)

    def start() -> bool:
        try:
            control.count_start(SCOPE, WHOLE_STEP, 5, 60)
        except Throttled as exc:
            assert exc.details["retry_after"] > 0
            return False
        return True

    with ThreadPoolExecutor(max_workers=12) as pool:
        admitted = list(pool.map(lambda _: start(), range(12)))
    # Then exactly 5 were admitted
    assert admitted.count(True) == 5
    # And the next minute admits none until those 5 have left the last 60 s (their 3 s
    # bucket ends at T0 + 12), then 5 again
    clock.now = T0 + 61
    assert start() is False
    clock.now = T0 + 72
    assert [start() for _ in range(6)] == [True] * 5 + [False]


# --------------------------------------------------------------------------- the step functions


def step_event(config: dict[str, Any]) -> dict[str, Any]:
    return {
        "step": StepRef(key="price", type="transform", config=config).wire(),
        "doc": {
            "run": {"id": "run-9", "workflow_id": "orders", "tenant": "acme"},
            "trigger": {"qty": 3},
            "steps": {},
        },
        "context": {"execution_id": "exec", "state": "price", "attempt": 0},
    }


LAMBDA_CONTEXT = SimpleNamespace(
    function_name="relayflow-dev-transform",
    aws_request_id="req-1",
    get_remaining_time_in_millis=lambda: 20_000,
)


def metrics_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]


def test_a_throttled_step_function_runs_no_logic_and_counts_as_step_throttled(
    aws, serial_dynamodb, monkeypatch, capsys
):
    # Given the transform function, in Lambda, for a step with a concurrency limit of 1
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "relayflow-dev-transform")
    handler = load_handler("transform").handler
    event = step_event({"mapping": {"n": "{{ trigger.qty }}"}, "concurrency": {"limit": 1}})
    # When it runs with the slot free
    assert handler(event, LAMBDA_CONTEXT)["output"] == {"n": 3}
    # Then it took the slot and gave it back: one put, one delete
    assert serial_dynamodb.actions == ["PutItem", "DeleteItem"]
    assert flow_items() == []
    # When another execution holds the slot
    FlowControl().acquire(FlowScope("acme", "orders", "price"), WHOLE_STEP, 1, 30)
    with pytest.raises(Throttled):
        handler(event, LAMBDA_CONTEXT)
    # Then the metrics say StepThrottled, not StepFailed
    *_, throttled = metrics_lines(capsys)
    assert throttled["StepThrottled"] == 1
    assert throttled["StepFailed"] == 0
    assert throttled["StepSucceeded"] == 0


def test_the_lease_lasts_the_invocations_remaining_time(aws):
    # Given a guarded step whose logic looks at the table while it runs
    seen: list[dict[str, Any]] = []

    def logic(event: dict[str, Any], context: Any) -> Any:
        seen.extend(flow_items())
        return transform.run(event)

    handler = step_handler(flow_controlled(logic))
    # When it is invoked with 20 s left
    started = time.time()
    handler(step_event({"mapping": {"n": 1}, "concurrency": {"limit": 1}}), LAMBDA_CONTEXT)
    # Then its slot was leased for those 20 s plus the 5 s margin, to its run and tenant
    (lease,) = seen
    assert lease["lease_until"] - lease["acquired_at"] == 25_000
    assert lease["acquired_at"] / 1000 >= int(started)
    assert (lease["run_id"], lease["tenant"], lease["type"]) == ("run-9", "acme", "flow_lease")
    assert flow_items() == []


# --------------------------------------------------------------------------- whole workflows


def each_order(workflow_id: str, charge: str) -> str:
    """``each`` runs ``charge`` (a transform with the fields ``charge``) per trigger order."""
    return f"""
id: {workflow_id}
start: each
steps:
  each:
    type: for_each
    items: "{{{{ trigger.orders }}}}"
    step: charge
  charge:
    type: transform
{charge}"""


FAN_OUT = each_order(
    "fan-out",
    """    mapping: {order: "{{ item }}", position: "{{ index }}"}
    concurrency: {limit: 2}
    retry: {max_attempts: 1}
""",
)
UNLIMITED = each_order(
    "unlimited",
    """    mapping: {order: "{{ item }}"}
    retry: {max_attempts: 2}
""",
)


class Counting:
    """The transform logic, counting how many run at once. It holds its slot until some
    invocation has been refused (:meth:`guarded` notes refusals): a refusal happens only while
    the limit is held, so the limit was reached and refusals happened, whatever the timing."""

    def __init__(self, *, hold_until_refused: bool = True) -> None:
        self.lock = threading.Lock()
        self.refused = threading.Event()
        if not hold_until_refused:
            self.refused.set()
        self.running = 0
        self.most = 0
        self.runs = 0

    def guarded(self, handler: Any) -> Any:
        def noting_refusals(event: dict[str, Any], context: Any) -> Any:
            try:
                return handler(event, context)
            except Throttled:
                self.refused.set()
                raise

        return noting_refusals

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            assert self.refused.wait(timeout=20), "no invocation was refused while 2 held"
            return transform.run(event)
        finally:
            with self.lock:
                self.running -= 1
                self.runs += 1


@pytest.fixture
def runtime(serial_dynamodb: DynamoRequests) -> Iterator[LocalRuntime]:
    with LocalRuntime(time_scale=0.01) as rt:
        yield rt


def test_a_for_each_under_a_concurrency_limit_runs_every_item_two_at_a_time(
    runtime, serial_dynamodb
):
    # Given the table, and the transform function's real guard around a slow, counting logic
    create_table(runtime.dynamodb_client)
    logic = Counting()
    handler = logic.guarded(step_handler(flow_controlled(logic)))
    runtime.register_handler("relayflow-transform", handler)
    # When a for_each of 6 items runs a step limited to 2 at once, with no retries of its own
    result = run_workflow(
        load_workflow_text(FAN_OUT, "fan-out.yaml"),
        {"orders": [f"o-{i}" for i in range(6)]},
        runtime=runtime,
        timeout=25,
    )
    # Then every item succeeded, in order, each item's logic ran once
    assert result.status == "succeeded", (result.error, result.cause)
    outputs = result.output["steps"]["each"]["output"]
    assert [o["output"]["order"] for o in outputs] == [f"o-{i}" for i in range(6)]
    assert logic.runs == 6
    # And never more than 2 ran at once (and 2 did)
    assert logic.most == 2
    # And the waits were Relayflow.Throttled retries, which the policy of 1 attempt never saw
    calls = runtime.invocations_of("relayflow-transform")
    throttled = [c for c in calls if c.error_type == "Relayflow.Throttled"]
    assert throttled and len(calls) == 6 + len(throttled)
    assert {c.error_type for c in calls} == {None, "Relayflow.Throttled"}
    # And every slot was given back
    assert flow_items() == []


def test_steps_without_flow_control_make_no_dynamodb_request(runtime, serial_dynamodb):
    # Given a runtime that has provisioned its table (those requests are not the step's)
    serial_dynamodb.actions.clear()
    logic = Counting(hold_until_refused=False)  # nothing limits it, so nothing is refused
    runtime.register_handler("relayflow-transform", step_handler(flow_controlled(logic)))
    # When a for_each of 4 runs a Lambda step without limits
    result = run_workflow(
        load_workflow_text(UNLIMITED, "unlimited.yaml"),
        {"orders": ["a", "b", "c", "d"]},
        runtime=runtime,
        timeout=25,
    )
    # Then it succeeded with zero DynamoDB requests (so zero writes)
    assert result.status == "succeeded", (result.error, result.cause)
    assert logic.runs == 4
    assert serial_dynamodb.actions == []
