"""Parallel ``settle: all`` and the workflow's ``defaults``: the models, the effective
settings, the compiled states and the liveness plan around a settling parallel."""

from __future__ import annotations

from typing import Any

import pytest

from relayflow.cli.main import main
from relayflow.compiler import compile_workflow
from relayflow.compiler.check import assert_valid_machine
from relayflow.compiler.driver import Driver
from relayflow.compiler.options import CompileOptions
from relayflow.definition.effective import effective_rows, effective_workflow
from relayflow.validation import validate_data

TOOL = {"type": "tool", "tool": "aws.sqs.send_message", "args": {"queue_url": "q", "body": "b"}}


def workflow(steps: dict[str, Any], **extra: Any) -> Any:
    wf, problems = validate_data({"id": "wf", "start": next(iter(steps)), "steps": steps, **extra})
    assert wf is not None, problems
    return wf


def problems_of(steps: dict[str, Any], **extra: Any) -> list[tuple[str, str, str]]:
    wf, problems = validate_data({"id": "wf", "start": next(iter(steps)), "steps": steps, **extra})
    assert wf is None
    return [(p.path, p.rule, p.message) for p in problems]


# --------------------------------------------------------------------------- effective


def test_acting_steps_get_the_seed_defaults_and_others_do_not():
    wf = effective_workflow(
        workflow(
            {"call": {**TOOL, "on_success": "shape"}, "shape": {"type": "transform", "mapping": 1}}
        )
    )
    call, shape = wf.steps["call"], wf.steps["shape"]
    assert call.retry.model_dump() == {
        "max_attempts": 3,
        "backoff": "exponential",
        "base_seconds": 10,
        "max_delay_seconds": 300,
        "jitter": True,
        "retry_on": ["Relayflow.Transient"],
    }
    assert call.timeout_seconds == 30
    assert (shape.retry, shape.timeout_seconds) == (None, None)


@pytest.mark.parametrize(
    ("step", "defaults", "retry", "timeout"),
    [
        ({**TOOL, "retry": "none"}, None, None, 30),
        (TOOL, {"retry": "none", "timeout_seconds": "none"}, None, None),
        ({**TOOL, "timeout_seconds": 7}, {"timeout_seconds": 99}, 3, 7),
        (TOOL, {"retry": {"max_attempts": 6}}, 6, 30),
        ({**TOOL, "retry": {"max_attempts": 2}}, {"retry": "none"}, 2, 30),
    ],
)
def test_steps_and_the_defaults_block_override_the_seed(step, defaults, retry, timeout):
    extra = {"defaults": defaults} if defaults is not None else {}
    got = effective_workflow(workflow({"call": step}, **extra)).steps["call"]
    assert (got.retry.max_attempts if got.retry else None, got.timeout_seconds) == (retry, timeout)


def test_effective_settings_are_idempotent():
    wf = workflow({"call": {**TOOL, "retry": "none", "on_success": "b"}, "b": dict(TOOL)})
    once = effective_workflow(wf)
    twice = effective_workflow(once)
    assert twice.steps["call"].retry is None and twice.steps["b"].retry.max_attempts == 3
    assert compile_workflow(once).asl == compile_workflow(wf).asl


def test_the_default_timeout_stays_above_a_limit_the_step_declares():
    wf = effective_workflow(
        workflow(
            {
                "hook": {"type": "webhook_out", "url": "https://x.example", "on_success": "code"},
                "code": {
                    "type": "code",
                    "code": "result = 1",
                    "wall_seconds": 50,
                    "on_success": "api",
                },
                "api": {
                    "type": "tool",
                    "tool": "http.fast",
                    "args": {"method": "GET", "path": "/"},
                },
            },
            http_tools={"fast": {"base_url": "https://fast.example", "timeout_seconds": 10}},
        )
    )
    timeouts = {key: step.timeout_seconds for key, step in wf.steps.items()}
    assert timeouts == {"hook": 35, "code": 55, "api": 30}


def test_a_delay_without_seconds_or_until_waits_the_default():
    steps = {"wait": {"type": "delay", "on_success": "at"}, "at": {"type": "delay", "seconds": 5}}
    assert effective_workflow(workflow(steps)).steps["wait"].seconds == 60
    tuned = effective_workflow(workflow(steps, defaults={"delay_seconds": 7}))
    assert (tuned.steps["wait"].seconds, tuned.steps["at"].seconds) == (7, 5)


def test_effective_rows_say_where_each_value_came_from():
    wf = workflow(
        {
            "call": {**TOOL, "on_success": "once"},
            "once": {**TOOL, "retry": "none", "timeout_seconds": 5, "on_success": "wait"},
            "wait": {"type": "delay", "on_success": "shape"},
            "shape": {"type": "transform", "mapping": 1},
        }
    )
    rows = {row.key: row for row in effective_rows(wf)}
    assert set(rows) == {"call", "once", "wait"}
    assert rows["call"].retry == (
        "3 attempts on Relayflow.Transient, exponential 10 s ×2 ≤ 300 s, full jitter"
    )
    assert (rows["call"].timeout, rows["call"].source) == ("30 s", "defaults: retry, timeout")
    assert (rows["once"].retry, rows["once"].timeout, rows["once"].source) == (
        "none",
        "5 s",
        "step",
    )
    assert (rows["wait"].wait, rows["wait"].source) == ("60 s", "defaults: wait")


def test_compile_effective_prints_the_table_and_plain_compile_names_defaulted_steps(
    tmp_path, capsys
):
    path = tmp_path / "wf.yaml"
    path.write_text(
        "id: wf\nstart: call\nsteps:\n  call: {type: webhook_out, url: https://x.example}\n"
    )
    assert main(["compile", str(path), "--effective"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["step", "type", "retry", "timeout", "wait", "from"]
    assert out[2].startswith("call") and "35 s" in out[2] and "defaults: retry, timeout" in out[2]
    assert main(["compile", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("{")
    assert "defaults applied to 1 step(s) (call)" in captured.err


# --------------------------------------------------------------------------- validation


def test_fail_when_needs_settle_all():
    steps = {
        "fan": {"type": "parallel", "branches": ["a"], "fail_when": "any"},
        "a": {"type": "noop"},
    }
    ((path, rule, message),) = problems_of(steps)
    assert (path, rule) == ("steps.fan", "value-error")
    assert "settle: all" in message


@pytest.mark.parametrize(
    ("retry", "path", "rule"),
    [
        ("nope", "steps.a.retry", "model-type"),
        ({"max_attempts": 0}, "steps.a.retry.max_attempts", "greater-than-equal"),
    ],
)
def test_a_bad_retry_is_one_problem_at_the_path_written(retry, path, rule):
    ((got_path, got_rule, message),) = problems_of({"a": {**TOOL, "retry": retry}})
    assert (got_path, got_rule) == (path, rule)
    if rule == "model-type":
        assert "or none" in message


def test_bad_defaults_name_their_path():
    found = problems_of({"a": TOOL}, defaults={"timeout_seconds": 0, "delay_seconds": -1})
    assert {(p, r) for p, r, _ in found} == {
        ("defaults.timeout_seconds", "greater-than-equal"),
        ("defaults.delay_seconds", "greater-than-equal"),
    }


def test_a_delay_takes_seconds_or_until_not_both():
    ((path, rule, message),) = problems_of(
        {"d": {"type": "delay", "seconds": 1, "until": "2030-01-01T00:00:00Z"}}
    )
    assert (path, rule, message) == (
        "steps.d",
        "value-error",
        "a delay takes seconds or until, not both",
    )


# --------------------------------------------------------------------------- compiled states


def settle_steps(**fan: Any) -> dict[str, Any]:
    steps: dict[str, Any] = {
        "fan": {"type": "parallel", "branches": ["a", "b"], "settle": "all", **fan},
        "a": {**TOOL, "on_success": "a2"},
        "a2": {**TOOL, "retry": "none"},
        "b": {**TOOL, "on_failure": "b_fix"},
        "b_fix": {"type": "noop"},
    }
    if "on_failure" in fan:
        steps["handle"] = {"type": "noop"}
    return steps


def test_settle_all_catches_inside_each_branch_into_a_settled_record():
    asl = compile_workflow(workflow(settle_steps())).asl
    first, second = asl["States"]["fan"]["Branches"]
    # A step without its own route ends its branch with its failed record
    assert first["States"]["a"]["Catch"] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "a.settled"}
    ]
    assert first["States"]["a.settled"] == {
        "Type": "Pass",
        "End": True,
        "Parameters": {"status": "failed", "error.$": "$.error"},
        "ResultPath": "$.steps.a",
    }
    assert first["States"]["a2"]["Catch"][0]["Next"] == "a2.settled"
    # A step that routes its own failure keeps its route
    assert second["States"]["b"]["Catch"][0]["Next"] == "b_fix"
    assert "b.settled" not in second["States"]
    # Without fail_when the step has no check and never fails for a branch
    assert "fan.settle_check" not in asl["States"]
    assert "Catch" not in asl["States"]["fan"]


def test_fail_when_any_checks_every_branch_step_and_raises_a_routable_error():
    steps = settle_steps(fail_when="any", on_failure="handle", on_success="after")
    steps["after"] = {"type": "noop"}
    states = compile_workflow(workflow(steps)).asl["States"]
    assert states["fan"]["Next"] == "fan.settle_check"
    check = states["fan.settle_check"]
    assert check["Default"] == "after"
    (rule,) = check["Choices"]
    assert rule["Next"] == "fan.branches_failed"
    tested = [r["And"][1]["Variable"] for r in rule["Or"]]
    assert tested == [f"$.steps.{k}.status" for k in ("a", "a2", "b", "b_fix")]
    assert states["fan.branches_failed"]["Result"]["Error"] == "Relayflow.BranchesFailed"
    assert states["fan.branches_failed"]["Next"] == "handle"
    # Without a route, the compiled error fails the run
    unrouted = compile_workflow(workflow(settle_steps(fail_when="any"))).asl["States"]
    assert unrouted["fan.branches_failed"]["Type"] == "Fail"
    assert unrouted["fan.settle_check"]["Default"] == "fan.settle_end"


def test_a_hundred_settling_branches_stay_within_the_limits():
    steps: dict[str, Any] = {
        "fan": {
            "type": "parallel",
            "branches": [f"b{i}" for i in range(100)],
            "settle": "all",
            "fail_when": "any",
        }
    }
    steps.update({f"b{i}": dict(TOOL) for i in range(100)})
    asl = compile_workflow(workflow(steps)).asl
    assert_valid_machine(asl)
    assert asl["States"]["fan"]["Next"] == "fan.merge"
    assert asl["States"]["fan.merge"]["Next"] == "fan.settle_check"


def test_a_wait_for_event_timeout_in_a_settling_branch_is_settled():
    steps = {
        "fan": {"type": "parallel", "branches": ["wait"], "settle": "all"},
        "wait": {"type": "wait_for_event", "event": "paid", "timeout_seconds": 60},
    }
    (branch,) = compile_workflow(workflow(steps)).asl["States"]["fan"]["Branches"]
    assert branch["States"]["wait.timeout"]["Type"] == "Pass"
    assert branch["States"]["wait.timeout"]["Next"] == "wait.settled"


# --------------------------------------------------------------------------- liveness


def test_no_drop_names_an_output_a_settled_branch_may_not_have_written():
    # Given a branch x1 → x2 whose x1 may fail (settle: all), and a later reader of x2
    steps: dict[str, Any] = {
        "fan": {"type": "parallel", "branches": ["x1"], "on_success": "t0"},
        "x1": {**TOOL, "on_success": "x2"},
        "x2": dict(TOOL),
    }
    for i in range(12):
        steps[f"t{i}"] = {"type": "transform", "mapping": {"v": i}, "on_success": f"t{i + 1}"}
    steps["t11"]["on_success"] = "last"
    steps["last"] = {"type": "code", "code": "result = steps.get('x2') is None"}
    fail_fast = Driver(workflow(steps), CompileOptions()).liveness
    steps["fan"]["settle"] = "all"
    settled = Driver(workflow(steps), CompileOptions()).liveness
    # Then fail-fast drops may name x2 (it is there whenever the run gets past the parallel)
    assert any("x2" in keep for keep in fail_fast.folds.values())
    # but after a settling parallel no drop names it: naming an absent key fails the run
    assert not any("x2" in keep for keep in settled.folds.values())
    assert not any("x2" in keep for key, keep in settled.prunes.items() if key.startswith("t"))
