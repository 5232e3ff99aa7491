"""Issue 12's fixes, run on the local runtime through the compiled ASL: user keys ending in
``.$`` arrive as data, a linear retry on a cycle starts each pass from attempt one, and a
wide parallel step merges every branch's output."""

from __future__ import annotations

import json
from typing import Any

import pytest
from relayflow_testing import fresh_allowed_server
from workflow_shapes import routing_retry_loop

from relayflow.errors import TransientError
from relayflow.local import LocalRuntime
from relayflow.runner import RunResult, run_workflow
from relayflow.validation import load_workflow_text

pytestmark = pytest.mark.integration


def run(runtime: LocalRuntime, definition: str, trigger: Any = None) -> RunResult:
    return run_workflow(load_workflow_text(definition, "test.yaml"), trigger or {}, runtime=runtime)


def outputs(result: RunResult) -> dict[str, Any]:
    """Each step's output from the run's timeline (the final document keeps only the outputs
    still live at the end)."""
    return {step.key: step.output for step in result.steps if "[" not in step.key}


server = pytest.fixture(fresh_allowed_server, name="server")


# --------------------------------------------------------------------------- keys ending .$


def test_user_keys_ending_in_dollar_reach_the_step_and_the_world_as_data(server):
    # Given a transform mapping and a webhook_out body whose keys end in .$, with values that
    # Step Functions would evaluate as paths if the keys were Parameters fields
    definition = f"""
id: dollar
start: shape
steps:
  shape:
    type: transform
    mapping: {{"total.$": "$.trigger.amount", "n": "{{{{ trigger.n }}}}"}}
    on_success: hook
  hook:
    type: webhook_out
    url: {server.url}/hook
    body: {{"order.$": "$.trigger", "n": "{{{{ trigger.n }}}}"}}
"""
    with LocalRuntime(time_scale=0.001) as runtime:
        # When the workflow runs
        result = run(runtime, definition, {"amount": 12, "n": 5})
    # Then the step's output holds the user's key and value verbatim
    assert result.status == "succeeded", (result.error, result.cause)
    assert outputs(result)["shape"] == {"total.$": "$.trigger.amount", "n": 5}
    # And the HTTP body sent holds them verbatim too (only the placeholder was rendered)
    (request,) = server.requests
    assert json.loads(request.body) == {"order.$": "$.trigger", "n": 5}


# --------------------------------------------------------------------------- retry reset

CONDITION_LOOP = routing_retry_loop("loop", "condition")
CUSTOM_LOOP = routing_retry_loop("loop", "custom")


class FlakyRouter:
    """A routing step's function that fails the first attempt of every evaluation, then
    answers "go round again" twice and "leave" the third time."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.calls = 0

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls % 2 == 1:
            raise TransientError("the first attempt of each pass fails")
        again = self.calls < 6
        if self.kind == "condition":
            return {"output": {"result": again}, "branch": None}
        return {"output": {"pass": self.calls // 2}, "branch": "again" if again else None}


@pytest.mark.parametrize(
    ("kind", "definition"), [("condition", CONDITION_LOOP), ("custom", CUSTOM_LOOP)]
)
def test_a_linear_retry_on_a_cycle_starts_each_pass_from_attempt_one(kind, definition):
    # Given a routing step on a cycle, 2 attempts per pass, whose first attempt of every pass
    # fails: without the reset, the second pass would find its one retry used up
    router = FlakyRouter(kind)
    with LocalRuntime({f"relayflow-{kind}": router}, time_scale=0.001) as runtime:
        # When the loop runs three passes
        result = run(runtime, definition, {"n": 1})
    # Then every pass retried once and succeeded, and the run left the loop
    assert result.status == "succeeded", (result.error, result.cause)
    assert router.calls == 6
    assert "done" in outputs(result)
    # And the reset ran after the last pass: the counter is back at attempt zero
    assert result.output["retry_check"] == {"attempt": 0, "delay": 0}


# --------------------------------------------------------------------------- wide parallel


@pytest.mark.parametrize("count", [12, 100])
def test_a_wide_parallel_merges_every_branch_output(count):
    # Given 12 or 100 branches (a fold of JsonMerge would need count - 1 intrinsics in one
    # field; AWS allows 10, so the compiler merges groups and then the groups)
    branches = [f"b{i}" for i in range(count)]
    steps = "\n".join(f"  b{i}: {{type: transform, mapping: {i}}}" for i in range(count))
    last = count - 1
    definition = f"""
id: wide
start: fan
steps:
  fan: {{type: parallel, branches: {json.dumps(branches)}, on_success: after}}
  after: {{type: transform, mapping: "{{{{ steps.b{last}.output }}}}"}}
{steps}
"""
    with LocalRuntime(time_scale=0.001) as runtime:
        result = run(runtime, definition)
    # Then every branch's output is in the document after the join
    assert result.status == "succeeded", (result.error, result.cause)
    got = outputs(result)
    assert {f"b{i}": got[f"b{i}"] for i in range(count)} == {f"b{i}": i for i in range(count)}
    assert got["after"] == last
