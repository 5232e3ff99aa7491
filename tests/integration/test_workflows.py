"""Whole workflows on the local runtime: compiled ASL, moto's interpreter, real handlers.

Each test runs a definition end to end and asserts the run's status, the step outputs in the
state document, and how many Lambda invocations the local endpoint served.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from relayflow_testing import record_scaled_sleeps

from relayflow.errors import TransientError
from relayflow.local import LocalRuntime
from relayflow.runner import RunResult, run_workflow
from relayflow.validation import load_workflow, load_workflow_text

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


@pytest.fixture
def runtime() -> Iterator[LocalRuntime]:
    with LocalRuntime(time_scale=0.001) as rt:
        yield rt


def run(runtime: LocalRuntime, definition: str, trigger: Any = None, **kwargs: Any) -> RunResult:
    return run_workflow(
        load_workflow_text(definition, "test.yaml"), trigger or {}, runtime=runtime, **kwargs
    )


def outputs(result: RunResult) -> dict[str, Any]:
    """Each step's output, from the run's timeline (the state document keeps only the outputs
    still live, so the final output holds the last step's)."""
    return {step.key: step.output for step in result.steps}


def invoked(runtime: LocalRuntime, kind: str) -> int:
    return sum(1 for i in runtime.invocations if i.function_name == f"relayflow-{kind}")


# --------------------------------------------------------------------------- conditions

CONDITION = """
id: cond
start: check
steps:
  check:
    type: condition
    expression: {expression}
    on_true: big
    on_false: small
  big: {{type: transform, mapping: {{size: big}}}}
  small: {{type: transform, mapping: {{size: small}}}}
"""


@pytest.mark.parametrize(
    ("expression", "runner"),
    [
        ("trigger.total > 100 && trigger.country == 'DE'", "native"),
        ("trigger.lines.size() > 1 && trigger.total > 100", "condition"),
    ],
)
@pytest.mark.parametrize(
    ("trigger", "taken"),
    [
        ({"total": 250, "country": "DE", "lines": [1, 2]}, "big"),
        ({"total": 50, "country": "DE", "lines": [1]}, "small"),
    ],
)
def test_condition_takes_each_branch(runtime, expression, runner, trigger, taken):
    # Given a condition compiled natively or to the condition Lambda
    result = run(runtime, CONDITION.format(expression=f'"{expression}"'), trigger)
    # Then the run succeeds through exactly the branch the expression picks
    assert result.status == "succeeded"
    steps = outputs(result)
    assert steps[taken] == {"size": taken}
    assert ({"big", "small"} - {taken}).isdisjoint(steps)
    assert [s.runner for s in result.steps if s.key == "check"] == [runner]


def test_native_conditions_and_transforms_cost_zero_lambda_invocations(runtime):
    # Given the order-triage example, whose only non-native step is the per-line transform
    workflow = load_workflow(ROOT / "workflows/examples/order_triage.yaml")
    trigger = {
        "order": {
            "id": "o-1",
            "country": "FR",
            "total": 10,
            "customer": {"id": "c", "name": "N", "vip": False},
            "lines": [{"sku": "a", "qty": 1, "unit_price": 2.5}],
        }
    }
    # When it runs
    result = run_workflow(workflow, trigger, runtime=runtime)
    # Then the endpoint served exactly the one transform invocation per line, and nothing for
    # the native condition, the native transforms, the parallel or the noop
    assert result.status == "succeeded"
    assert [i.function_name for i in runtime.invocations] == ["relayflow-transform"]
    native = {s.key for s in result.steps if s.runner == "native"}
    assert {"normalise", "is_large", "notify_warehouse", "check_vip", "done"} <= native
    assert outputs(result)["normalise"]["summary"] == "Order o-1 for N"


# --------------------------------------------------------------------------- transforms


def test_transform_keeps_types_and_interpolates_natively_and_in_lambda(runtime):
    definition = """
id: shapes
start: native
steps:
  native:
    type: transform
    mapping:
      count: "{{ trigger.count }}"
      flag: "{{ trigger.flag }}"
      tags: "{{ trigger.tags }}"
      first: "{{ trigger.tags[0] }}"
      text: "#{{ trigger.count }} {{ trigger.name }} {kept}"
      nothing: "{{ trigger.none }}"
    on_success: computed
  computed:
    type: transform
    mapping:
      doubled: "{{ trigger.count * 2 }}"
      text: "{{ trigger.name }} has {{ size(trigger.tags) }} tags"
      from_step: "{{ steps.native.output.count }}"
"""
    trigger = {"count": 3, "flag": True, "tags": ["a", "b"], "name": "Ada", "none": None}
    result = run(runtime, definition, trigger)
    assert result.status == "succeeded"
    steps = outputs(result)
    assert steps["native"] == {
        "count": 3,
        "flag": True,
        "tags": ["a", "b"],
        "first": "a",
        "text": "#3 Ada {kept}",
        "nothing": None,
    }
    assert steps["computed"] == {"doubled": 6, "text": "Ada has 2 tags", "from_step": 3}
    assert invoked(runtime, "transform") == 1


# --------------------------------------------------------------------------- for_each

FOR_EACH = """
id: each
start: loop
steps:
  loop:
    type: for_each
    items: "{{{{ trigger.items }}}}"
    step: half
    max_items: 5
    on_item_failure: {mode}
    on_success: after
  half:
    type: transform
    mapping: {{value: "{{{{ 10 / item }}}}", at: "{{{{ index }}}}"}}
  after: {{type: noop}}
"""


def test_for_each_gives_per_item_outputs_in_order(runtime):
    result = run(runtime, FOR_EACH.format(mode="fail"), {"items": [1, 2, 5]})
    assert result.status == "succeeded"
    assert outputs(result)["loop"] == [
        {"output": {"value": 10, "at": 0}, "status": "succeeded"},
        {"output": {"value": 5, "at": 1}, "status": "succeeded"},
        {"output": {"value": 2, "at": 2}, "status": "succeeded"},
    ]
    assert invoked(runtime, "transform") == 3


def test_for_each_records_a_failing_item_and_continues(runtime):
    # Given an item that divides by zero, with on_item_failure: continue
    result = run(runtime, FOR_EACH.format(mode="continue"), {"items": [1, 0, 2]})
    # Then the run goes on and that item carries its named error
    assert result.status == "succeeded"
    items = outputs(result)["loop"]
    assert items[0] == {"output": {"value": 10, "at": 0}, "status": "succeeded"}
    assert items[1]["status"] == "failed"
    assert items[1]["error"]["Error"] == "Relayflow.ExpressionError"
    assert "divide by zero" in items[1]["error"]["Cause"]
    assert items[2] == {"output": {"value": 5, "at": 2}, "status": "succeeded"}
    assert "after" in outputs(result)


def test_for_each_failing_item_fails_the_run_by_default(runtime):
    result = run(runtime, FOR_EACH.format(mode="fail"), {"items": [1, 0]})
    assert result.status == "failed"
    assert result.error == "Relayflow.ExpressionError"


def test_for_each_refuses_more_items_than_max_items(runtime):
    result = run(runtime, FOR_EACH.format(mode="fail"), {"items": [1, 2, 3, 4, 5, 6]})
    assert result.status == "failed"
    assert result.error == "Relayflow.TooManyItems"
    assert result.cause == "for_each 'loop' allows at most 5 items"
    assert invoked(runtime, "transform") == 0


# --------------------------------------------------------------------------- parallel


def test_parallel_branch_outputs_join_the_document(runtime):
    definition = """
id: par
start: fork
steps:
  fork:
    type: parallel
    branches: [left, right]
    on_success: join
  left: {type: transform, mapping: {side: left}, on_success: left_more}
  left_more: {type: transform, mapping: "{{ steps.left.output.side }}-2"}
  right:
    type: condition
    expression: trigger.go
    on_true: right_yes
  right_yes: {type: transform, mapping: "{{ trigger.n * 10 }}"}
  join:
    type: transform
    mapping: "{{ steps.left_more.output }} and {{ steps.right_yes.output }}"
"""
    result = run(runtime, definition, {"go": True, "n": 4})
    assert result.status == "succeeded"
    steps = outputs(result)
    assert steps["left"] == {"side": "left"}
    assert steps["left_more"] == "left-2"
    assert steps["right_yes"] == 40
    assert steps["join"] == "left-2 and 40"


# --------------------------------------------------------------------------- delay


def test_delay_waits_scaled_time(runtime, monkeypatch):
    definition = """
id: wait
start: pause
steps:
  pause: {type: delay, seconds: 2000, on_success: until}
  until: {type: delay, until: "{{ trigger.at }}", on_success: done}
  done: {type: noop}
"""
    # Given a 2,000 s delay at time scale 0.001 (2 s) and a timestamp already passed
    sleeps = record_scaled_sleeps(monkeypatch)
    started = time.monotonic()
    result = run(runtime, definition, {"at": "2020-01-01T00:00:00Z"})
    elapsed = time.monotonic() - started
    # Then the run really waited, scaled: 2 s for the delay, nothing for the past timestamp
    assert result.status == "succeeded"
    assert sleeps[0] == (2000, pytest.approx(2.0))
    assert [real for _, real in sleeps[1:]] == [0.0]
    assert elapsed >= 1.8
    (pause,) = [s for s in result.steps if s.key == "pause"]
    assert pause.duration_ms is not None and pause.duration_ms >= 1800


# --------------------------------------------------------------------------- retries and errors

RETRY = """
id: retry
start: flaky
steps:
  flaky:
    type: transform
    mapping: "{{{{ trigger.n }}}}"
    retry: {{max_attempts: {attempts}, backoff: {backoff}, base_seconds: 1{extra}}}
    on_failure: recover
  recover:
    type: transform
    mapping: {{caught: "{{{{ error.Error }}}}"}}
"""


def always_transient(event: dict[str, Any], context: Any) -> dict[str, Any]:
    raise TransientError("the upstream is down")


@pytest.mark.parametrize("backoff", ["fixed", "exponential", "linear"])
def test_step_is_retried_the_configured_number_of_times_then_routed(backoff):
    # Given a transform whose Lambda always raises Relayflow.Transient
    with LocalRuntime({"relayflow-transform": always_transient}, time_scale=0.001) as rt:
        # When it runs with 4 attempts
        result = run(rt, RETRY.format(attempts=4, backoff=backoff, extra=""))
        # Then it was attempted exactly 4 times and the on_failure route got the error
        assert invoked(rt, "transform") == 4
    assert result.status == "succeeded"
    assert outputs(result)["recover"] == {"caught": "Relayflow.Transient"}
    (flaky,) = [s for s in result.steps if s.key == "flaky"]
    assert flaky.attempts == 4


def test_errors_that_cannot_succeed_are_not_retried(runtime):
    # Given a mapping that always fails to evaluate, and a policy without retry_on
    result = run(
        runtime,
        RETRY.format(attempts=5, backoff="fixed", extra="").replace(
            "{{ trigger.n }}", "{{ int('x') }}"
        ),
    )
    # Then Relayflow.ExpressionError goes straight to the error route
    assert invoked(runtime, "transform") == 1  # flaky once; recover is a native Pass
    assert outputs(result)["recover"] == {"caught": "Relayflow.ExpressionError"}


def test_retry_on_limits_which_errors_are_retried(runtime):
    definition = RETRY.format(
        attempts=3, backoff="fixed", extra=", retry_on: [Relayflow.ExpressionError]"
    ).replace("{{ trigger.n }}", "{{ int('x') }}")
    result = run(runtime, definition)
    assert invoked(runtime, "transform") == 3  # 3 attempts; recover is a native Pass
    assert outputs(result)["recover"] == {"caught": "Relayflow.ExpressionError"}


def test_linear_retry_without_error_route_reraises_the_original_error():
    definition = """
id: linear
start: flaky
steps:
  flaky:
    type: transform
    mapping: 1
    retry: {max_attempts: 3, backoff: linear, base_seconds: 2, max_delay_seconds: 3}
"""
    with LocalRuntime({"relayflow-transform": always_transient}, time_scale=0.001) as rt:
        result = run(rt, definition)
        assert invoked(rt, "transform") == 3
    assert result.status == "failed"
    assert result.error == "Relayflow.Transient"
    assert "the upstream is down" in (result.cause or "")


class Held:
    """A step's logic that answers only once the test releases it (a minute at most): only a
    timeout can end the step sooner, however slow the machine."""

    def __init__(self) -> None:
        self.answer = threading.Event()

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.answer.wait(60)
        return {"output": "too late"}


def run_with_a_held_transform(definition: str) -> RunResult:
    """``definition``'s run on a runtime whose transform function answers only once the run
    is over (so a step or run timeout fires first)."""
    held = Held()
    with LocalRuntime({"relayflow-transform": held}, time_scale=0.001) as rt:
        try:
            return run(rt, definition)
        finally:
            held.answer.set()


def test_step_timeout_routes_to_on_failure():
    definition = """
id: slow
start: slow
steps:
  slow: {type: transform, mapping: 1, timeout_seconds: 1, on_failure: late}
  late: {type: transform, mapping: {timed_out: "{{ error.Error }}"}}
"""
    result = run_with_a_held_transform(definition)
    assert result.status == "succeeded"
    assert outputs(result)["late"] == {"timed_out": "States.Timeout"}


def test_a_failing_step_fails_the_run_with_a_clear_error(runtime):
    definition = """
id: broken
start: total
steps:
  total: {type: transform, mapping: "{{ trigger.order.total * 2 }}"}
"""
    result = run(runtime, definition, {"order": {}})
    assert result.status == "failed"
    assert result.error == "Relayflow.ExpressionError"
    assert "trigger.order.total * 2" in (result.cause or "")
    (total,) = result.steps
    assert total.status == "failed" and total.error == "Relayflow.ExpressionError"


def test_workflow_error_route_catches_lambda_steps(runtime):
    definition = """
id: routed
start: total
errors: {on_failure: report}
steps:
  total: {type: transform, mapping: "{{ trigger.a / trigger.b }}"}
  report: {type: transform, mapping: "{{ error.Error }}"}
"""
    result = run(runtime, definition, {"a": 1, "b": 0})
    assert result.status == "succeeded"
    assert outputs(result)["report"] == "Relayflow.ExpressionError"


def test_a_cycle_is_stopped_by_max_steps_per_run(runtime):
    definition = """
id: forever
start: tick
max_steps_per_run: 10
steps:
  tick:
    type: transform
    mapping: "{{ has(steps.tick) ? steps.tick.output + 1 : 1 }}"
    on_success: again
  again:
    type: condition
    expression: steps.tick.output < 1000000
    on_true: tick
    on_false: done
  done: {type: noop}
"""
    result = run(runtime, definition)
    assert result.status == "failed"
    assert result.error == "Relayflow.MaxStepsExceeded"
    # 2 steps per pass through the cycle: the 6th pass would take it to 12 > 10
    assert invoked(runtime, "transform") == 6


def test_run_timeout_times_the_run_out():
    definition = """
id: slow-run
start: slow
run_timeout_seconds: 1
steps:
  slow: {type: transform, mapping: "{{ 1 + 1 }}"}
"""
    result = run_with_a_held_transform(definition)
    assert result.status == "timed_out"


# --------------------------------------------------------------------------- large outputs


def test_a_one_megabyte_output_is_offloaded_and_read_by_the_next_step(runtime):
    # Given a 100 KB trigger (inside the 256 KB input limit) and a step whose output repeats it
    # ten times: about 1 MB, four times what a state document may hold on AWS
    copies = {f"c{i}": "{{ trigger.chunk + '' }}" for i in range(10)}
    definition = {
        "id": "big",
        "start": "make",
        "steps": {
            "make": {"type": "transform", "mapping": copies, "on_success": "measure"},
            "measure": {
                "type": "transform",
                "mapping": {
                    "keys": "{{ size(steps.make.output) }}",
                    "length": "{{ size(steps.make.output.c9) }}",
                },
            },
        },
    }
    chunk = "abcd" * 25_000
    # When it runs
    result = run_workflow(
        load_workflow_text(json.dumps(definition), "big.json", fmt="json"),
        {"chunk": chunk},
        runtime=runtime,
    )
    # Then the document carries a small reference, and the next step read the whole value
    assert result.status == "succeeded", (result.error, result.cause)
    record = outputs(result)["make"]
    assert set(record) == {"$relayflow_ref"}
    assert record["$relayflow_ref"]["size"] > 1_000_000
    assert outputs(result)["measure"] == {"keys": 10, "length": 100_000}
    assert len(json.dumps(result.output)) < 256 * 1024


def test_a_small_output_is_never_offloaded_so_a_condition_can_route_near_the_limit(runtime):
    # Given a document already near the offload threshold and a condition run in its Lambda
    from relayflow.settings import override_settings

    definition = """
id: near-limit
start: check
steps:
  check:
    type: condition
    expression: size(trigger.blob) > 10
    on_true: big
  big: {type: noop}
"""
    with override_settings(offload_threshold_bytes=300):
        result = run(runtime, definition, {"blob": "x" * 400})
    # Then its small result stays in the document and the route Choice reads it
    assert result.status == "succeeded", (result.error, result.cause)
    assert outputs(result)["check"] == {"result": True}
    assert "big" in outputs(result)
