"""Parallel ``settle: all`` and the seed's step defaults, end to end on the local runtime.

Step Lambdas are replaced by small handlers that fail on purpose (by step key), so each
test states which step failed, how often it was invoked, and what the run and the timeline
show afterwards.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from relayflow.compiler import compile_workflow
from relayflow.compiler.check import assert_valid_machine
from relayflow.errors import InvalidArgsError, TransientError
from relayflow.local import LocalRuntime
from relayflow.runner import RunResult, run_workflow
from relayflow.validation import load_workflow_text

pytestmark = pytest.mark.integration


def keyed_handler(
    fail: dict[str, type[Exception]], calls: Counter[str]
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """A step Lambda that raises ``fail[key]`` for the listed step keys and otherwise
    answers ``{"output": {"from": key}}``; ``calls`` counts invocations per step key."""

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        key = event["step"]["key"]
        calls[key] += 1
        if key in fail:
            raise fail[key](f"step {key} failed on purpose")
        return {"output": {"from": key}}

    return handler


@pytest.fixture
def calls() -> Counter[str]:
    return Counter()


def run(definition: str, handlers: dict[str, Any], trigger: Any = None) -> RunResult:
    with LocalRuntime(handlers, time_scale=0.001) as runtime:
        return run_workflow(
            load_workflow_text(definition, "test.yaml"), trigger or {}, runtime=runtime
        )


def by_key(result: RunResult) -> dict[str, Any]:
    return {step.key: step for step in result.steps}


# --------------------------------------------------------------------------- settle: all

SETTLE = """
id: settle
start: fan
steps:
  fan:
    type: parallel
    branches: [ok_a, bad, ok_b]
    settle: all
    {fail_when}
    on_success: after
    {on_failure}
  ok_a: {{type: tool, tool: aws.dynamodb.get_item, args: {{table: t, key: {{id: a}}}}}}
  bad:
    type: tool
    tool: aws.dynamodb.get_item
    args: {{table: t, key: {{id: b}}}}
    on_success: never
  never: {{type: transform, mapping: unreachable}}
  ok_b: {{type: tool, tool: aws.dynamodb.get_item, args: {{table: t, key: {{id: c}}}}}}
  after:
    type: transform
    mapping:
      a: "{{{{ steps.ok_a.output }}}}"
      b: "{{{{ steps.ok_b.output }}}}"
      bad: "{{{{ steps.bad.error.Error }}}}"
      status: "{{{{ steps.bad.status }}}}"
"""
HANDLE = """  handle: {type: transform, mapping: "{{ error.Error }}"}
"""


def settle(fail_when: str = "", on_failure: str = "", *, reads_error: bool = True) -> str:
    definition = SETTLE.format(fail_when=fail_when, on_failure=on_failure)
    if not reads_error:  # a native mapping of a path that is not there is States.Runtime
        definition = definition.replace('      bad: "{{ steps.bad.error.Error }}"\n', "")
        definition = definition.replace('      status: "{{ steps.bad.status }}"\n', "")
    return definition + HANDLE if on_failure else definition


def test_settled_parallel_keeps_the_other_branches_outputs(calls):
    # Given a settle: all parallel whose middle branch fails with a non-retryable error
    handler = keyed_handler({"bad": InvalidArgsError}, calls)
    # When it runs
    result = run(settle(), {"relayflow-tool": handler})
    # Then the run goes on: the other branches' outputs and the failed step's error reach
    # the next step, and the failed branch stopped at its failing step
    assert result.status == "succeeded", result.cause
    assert result.output["steps"]["after"]["output"] == {
        "a": {"from": "ok_a"},
        "b": {"from": "ok_b"},
        "bad": "Relayflow.InvalidArgs",
        "status": "failed",
    }
    assert calls == Counter({"ok_a": 1, "bad": 1, "ok_b": 1})
    steps = by_key(result)
    assert "never" not in steps
    # (the timeline shows a failure a Catch took as "caught", as for an on_failure route)
    assert (steps["bad"].status, steps["bad"].error) == ("caught", "Relayflow.InvalidArgs")
    assert steps["ok_a"].status == steps["ok_b"].status == "succeeded"


def test_fail_fast_stays_the_default(calls):
    # Given the same parallel without settle
    definition = settle().replace("settle: all", "")
    result = run(definition, {"relayflow-tool": keyed_handler({"bad": InvalidArgsError}, calls)})
    # Then the failing branch fails the step and the run
    assert result.status == "failed"
    assert result.error == "Relayflow.InvalidArgs"
    assert "after" not in by_key(result)


def test_fail_when_any_raises_a_routable_error_after_every_branch_ended(calls):
    # Given fail_when: any and an error route
    definition = settle("fail_when: any", "on_failure: handle")
    result = run(definition, {"relayflow-tool": keyed_handler({"bad": InvalidArgsError}, calls)})
    # Then every branch ran, and the step failed with Relayflow.BranchesFailed into its route
    assert calls == Counter({"ok_a": 1, "bad": 1, "ok_b": 1})
    assert result.status == "succeeded", result.cause
    assert by_key(result)["handle"].output == "Relayflow.BranchesFailed"
    assert "after" not in by_key(result)


def test_fail_when_any_without_a_route_fails_the_run(calls):
    definition = settle("fail_when: any")
    result = run(definition, {"relayflow-tool": keyed_handler({"bad": InvalidArgsError}, calls)})
    assert result.status == "failed"
    assert result.error == "Relayflow.BranchesFailed"


def test_fail_when_any_goes_on_when_no_branch_failed(calls):
    definition = settle("fail_when: any", "on_failure: handle", reads_error=False)
    result = run(definition, {"relayflow-tool": keyed_handler({}, calls)})
    assert result.status == "succeeded", result.cause
    steps = by_key(result)
    assert "handle" not in steps
    assert steps["after"].output == {"a": {"from": "ok_a"}, "b": {"from": "ok_b"}}
    assert steps["never"].output == "unreachable"


def test_a_branch_step_with_its_own_route_is_not_settled(calls):
    # Given the failing step routes its own failure inside the branch
    definition = settle("fail_when: any", reads_error=False).replace(
        "on_success: never", "on_success: never\n    on_failure: never"
    )
    result = run(definition, {"relayflow-tool": keyed_handler({"bad": InvalidArgsError}, calls)})
    # Then the branch handled it: nothing failed, fail_when: any does not fire
    assert result.status == "succeeded", result.cause
    assert by_key(result)["never"].output == "unreachable"


def hundred_branches(fail_when: str) -> str:
    lines = [
        "id: wide",
        "start: fan",
        "steps:",
        "  fan:",
        "    type: parallel",
        f"    branches: [{', '.join(f'b{i}' for i in range(100))}]",
        "    settle: all",
        f"    {fail_when}",
        "    on_success: after",
    ]
    tool = "type: tool, tool: aws.dynamodb.get_item"
    lines += [f"  b{i}: {{{tool}, args: {{table: t, key: {{id: b{i}}}}}}}" for i in range(100)]
    lines += [
        "  after:",
        "    type: transform",
        '    mapping: {first: "{{ steps.b0.output }}", last: "{{ steps.b99.output }}", '
        'failed: "{{ steps.b37.error.Error }}"}',
    ]
    return "\n".join(lines) + "\n"


def test_a_hundred_settled_branches_compile_within_limits_and_run(calls):
    # Given 100 branches, settle: all, fail_when: any, one of them failing
    definition = hundred_branches("fail_when: never")
    workflow = load_workflow_text(definition, "wide.yaml")
    # When compiled, the machine passes every ASL rule and quota check (≤10 intrinsics/field)
    assert_valid_machine(compile_workflow(workflow).asl)
    # And when run, 99 branches' outputs and the failed one's error reach the next step
    handler = keyed_handler({"b37": InvalidArgsError}, calls)
    result = run(definition, {"relayflow-tool": handler})
    assert result.status == "succeeded", result.cause
    assert len(calls) == 100 and set(calls.values()) == {1}
    assert result.output["steps"]["after"]["output"] == {
        "first": {"from": "b0"},
        "last": {"from": "b99"},
        "failed": "Relayflow.InvalidArgs",
    }


def test_a_hundred_settled_branches_with_fail_when_any(calls):
    definition = hundred_branches("fail_when: any")
    assert_valid_machine(compile_workflow(load_workflow_text(definition, "wide.yaml")).asl)
    result = run(definition, {"relayflow-tool": keyed_handler({"b98": InvalidArgsError}, calls)})
    assert len(calls) == 100
    assert (result.status, result.error) == ("failed", "Relayflow.BranchesFailed")


# --------------------------------------------------------------------------- defaults

DEFAULTS = """
id: defaults
start: call
{defaults}
steps:
  call:
    type: tool
    tool: aws.dynamodb.get_item
    args: {{table: t, key: {{id: x}}}}
    {retry}
    on_failure: handle
  handle: {{type: transform, mapping: "{{{{ error.Error }}}}"}}
"""


def test_default_retry_makes_three_attempts_on_transient_errors(calls):
    # Given a tool step without a retry policy whose Lambda always fails transiently
    definition = DEFAULTS.format(defaults="", retry="")
    result = run(definition, {"relayflow-tool": keyed_handler({"call": TransientError}, calls)})
    # Then the default policy made 3 attempts in all, then took the error route
    assert calls["call"] == 3
    steps = by_key(result)
    assert (steps["call"].status, steps["call"].attempts) == ("caught", 3)
    assert steps["handle"].output == "Relayflow.Transient"
    # And the compiled Retry says how: 10 s, ×2, capped at 300 s, full jitter
    compiled = compile_workflow(load_workflow_text(definition, "t.yaml")).asl
    task = compiled["States"]["call"]
    assert task["Retry"][-1] == {
        "ErrorEquals": ["Relayflow.Transient"],
        "IntervalSeconds": 10,
        "MaxAttempts": 2,
        "BackoffRate": 2.0,
        "MaxDelaySeconds": 300,
        "JitterStrategy": "FULL",
    }
    assert task["TimeoutSeconds"] == 30


def test_default_retry_leaves_other_errors_alone(calls):
    definition = DEFAULTS.format(defaults="", retry="")
    result = run(definition, {"relayflow-tool": keyed_handler({"call": InvalidArgsError}, calls)})
    assert calls["call"] == 1
    assert by_key(result)["call"].attempts == 1
    assert by_key(result)["handle"].output == "Relayflow.InvalidArgs"


def test_retry_none_opts_a_step_out(calls):
    definition = DEFAULTS.format(defaults="", retry="retry: none")
    result = run(definition, {"relayflow-tool": keyed_handler({"call": TransientError}, calls)})
    assert calls["call"] == 1
    assert by_key(result)["handle"].output == "Relayflow.Transient"


def test_workflow_defaults_override_the_seed(calls):
    # Given a workflow whose defaults say 5 fixed attempts
    definition = DEFAULTS.format(
        defaults="defaults: {retry: {max_attempts: 5, backoff: fixed, base_seconds: 1, "
        "retry_on: [Relayflow.Transient]}}",
        retry="",
    )
    result = run(definition, {"relayflow-tool": keyed_handler({"call": TransientError}, calls)})
    assert calls["call"] == 5
    assert by_key(result)["call"].attempts == 5


def test_workflow_defaults_retry_none(calls):
    definition = DEFAULTS.format(defaults="defaults: {retry: none}", retry="")
    run(definition, {"relayflow-tool": keyed_handler({"call": TransientError}, calls)})
    assert calls["call"] == 1


def test_a_transient_failure_then_success_acts_once(calls):
    # Given a tool that fails transiently once, then succeeds
    attempts: Counter[str] = Counter()

    def flaky(event: dict[str, Any], context: Any) -> dict[str, Any]:
        attempts["call"] += 1
        if attempts["call"] == 1:
            raise TransientError("blip")
        return {"output": {"attempt": attempts["call"]}}

    result = run(DEFAULTS.format(defaults="", retry=""), {"relayflow-tool": flaky})
    # Then the second attempt's result is the step's output and the run goes on
    steps = by_key(result)
    assert result.status == "succeeded"
    assert (steps["call"].status, steps["call"].attempts) == ("succeeded", 2)
    assert steps["call"].output == {"attempt": 2}
    assert "handle" not in steps


def test_delay_without_seconds_waits_the_default_minute():
    definition = """
id: pause
start: wait
defaults: {delay_seconds: 90}
steps:
  wait: {type: delay, on_success: done}
  plain: {type: delay}
  done: {type: noop, on_success: plain}
"""
    workflow = load_workflow_text(definition, "t.yaml")
    states = compile_workflow(workflow).asl["States"]
    assert states["wait"]["Seconds"] == 90
    seed = load_workflow_text(definition.replace("defaults: {delay_seconds: 90}\n", ""), "t.yaml")
    assert compile_workflow(seed).asl["States"]["wait"]["Seconds"] == 60
    with LocalRuntime(time_scale=0.0001) as runtime:
        result = run_workflow(workflow, {}, runtime=runtime)
    assert result.status == "succeeded"
    assert [s.key for s in result.steps] == ["wait", "done", "plain"]
