"""Output liveness: what the analysis finds live, and where the compiled machine drops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from workflow_shapes import nested_parallels

from relayflow.compiler import compile_workflow
from relayflow.compiler.driver import Driver
from relayflow.compiler.liveness import PRUNE_BATCH, LivenessPlan, code_reads, step_reads
from relayflow.compiler.options import CompileOptions
from relayflow.validation import validate_data


def _workflow(steps: dict[str, Any], **extra: Any) -> Any:
    workflow, problems = validate_data(
        {"id": "wf", "start": next(iter(steps)), "steps": steps, **extra}
    )
    assert workflow is not None, problems
    return workflow


def _plan(steps: dict[str, Any], **extra: Any) -> LivenessPlan:
    return Driver(_workflow(steps, **extra), CompileOptions()).liveness


def _chain(n: int, *, read_previous: bool, lambda_steps: bool = False) -> dict[str, Any]:
    steps = {}
    for i in range(n):
        value = (
            "{{ trigger.x }}"
            if i == 0 or not read_previous
            else f"{{{{ steps.s{i - 1}.output.v }}}}"
        )
        step: dict[str, Any] = {"type": "transform", "mapping": {"v": value}}
        if lambda_steps:
            step["retry"] = {"max_attempts": 2}  # a retry policy puts a transform in its Lambda
        if i + 1 < n:
            step["on_success"] = f"s{i + 1}"
        steps[f"s{i}"] = step
    return steps


# --------------------------------------------------------------------------- what a step reads


def test_templates_and_expressions_name_the_outputs_they_read():
    workflow = _workflow(
        {
            "a": {"type": "noop", "on_success": "b"},
            "b": {"type": "noop", "on_success": "c"},
            "c": {
                "type": "condition",
                "expression": "steps.a.output.ok && size(trigger.items) > 0",
                "on_true": "d",
            },
            "d": {
                "type": "webhook_out",
                "url": "https://example.com/{{ steps.b.output.id }}",
                "body": {"n": "{{ steps['a'].status }}"},
            },
        }
    )
    assert step_reads("c", workflow.steps["c"], workflow) == {"a"}
    assert step_reads("d", workflow.steps["d"], workflow) == {"a", "b"}


def test_a_wait_for_event_match_keeps_the_outputs_it_reads_live():
    # Given a wait whose match reads an earlier output, after an unrelated step
    steps = {
        "order": {"type": "transform", "mapping": {"id": "{{ trigger.id }}"}, "on_success": "b"},
        "b": {"type": "transform", "mapping": {"v": 1}, "on_success": "paid"},
        "paid": {
            "type": "wait_for_event",
            "event": "payment.received",
            "match": "event.detail.order_id == steps.order.output.id",
            "timeout_seconds": 60,
        },
    }
    workflow = _workflow(steps)
    # Then the match counts as a read, so the order's output is live up to the wait
    assert step_reads("paid", workflow.steps["paid"], workflow) == {"order"}
    assert "order" in _plan(steps).live_in["paid"]


def test_a_whole_steps_reference_or_a_custom_step_reads_every_output():
    workflow = _workflow(
        {
            "a": {"type": "transform", "mapping": {"all": "{{ steps }}"}, "on_success": "b"},
            "b": {"type": "custom", "url": "https://example.com/hook"},
        }
    )
    assert step_reads("a", workflow.steps["a"], workflow) is None
    assert step_reads("b", workflow.steps["b"], workflow) is None


@pytest.mark.parametrize(
    ("code", "reads"),
    [
        ("return steps['fetch']['output'] + steps.get('other', {})", {"fetch", "other"}),
        ("return input", set()),
        ("return len(steps)", None),
        ("for k in steps:\n    pass\nreturn 1", None),
        ("x = locals()\nreturn x", None),
        ("import sys\nreturn sys._getframe(0).f_locals", None),
        ("key = 'a'\nreturn steps[key]", None),
    ],
)
def test_code_reads_only_literal_keys(code: str, reads: set[str] | None):
    assert code_reads(code) == reads


# --------------------------------------------------------------------------- liveness


def test_in_a_chain_only_the_previous_output_is_live():
    plan = _plan(_chain(6, read_previous=True))
    assert plan.live_in["s3"] == {"s2"}
    assert plan.live_out["s3"] == {"s3"}
    # The end keeps the output of the step the run ended on.
    assert plan.live_out["s5"] == {"s5"}


def test_workflow_outputs_stay_live_to_the_end():
    plan = _plan(_chain(6, read_previous=True), outputs=["s1"])
    assert all("s1" in plan.live_out[f"s{i}"] for i in range(1, 6))


def test_an_output_read_in_a_loop_stays_live_around_it():
    plan = _plan(
        {
            "seed": {"type": "noop", "on_success": "work"},
            "work": {
                "type": "transform",
                "mapping": {"n": "{{ steps.seed.output }}"},
                "on_success": "check",
            },
            "check": {
                "type": "condition",
                "expression": "trigger.stop",
                "on_true": "done",
                "on_false": "work",
            },
            "done": {"type": "noop"},
        }
    )
    # seed is read on every pass through the loop, so it is live at every step of it.
    for key in ("work", "check"):
        assert "seed" in plan.live_in[key]
    assert "seed" in plan.live_out["check"]
    assert "seed" not in plan.live_out["done"]


def test_parallel_branches_keep_what_is_read_after_the_join():
    plan = _plan(
        {
            "first": {"type": "noop", "on_success": "fork"},
            "fork": {"type": "parallel", "branches": ["left", "right"], "on_success": "join"},
            "left": {"type": "transform", "mapping": {"v": 1}},
            "right": {"type": "transform", "mapping": {"v": "{{ steps.first.output }}"}},
            "join": {"type": "transform", "mapping": {"l": "{{ steps.left.output.v }}"}},
        }
    )
    assert "first" in plan.live_in["right"]
    assert "left" in plan.live_out["left"]  # read after the parallel
    assert "right" not in plan.live_out["right"]
    assert plan.live_in["join"] == {"left"}


def test_for_each_item_reads_are_the_for_each_steps_reads():
    plan = _plan(
        {
            "config": {"type": "noop", "on_success": "each"},
            "each": {"type": "for_each", "items": "{{ trigger.items }}", "step": "item"},
            "item": {
                "type": "transform",
                "mapping": {"c": "{{ steps.config.output }}", "i": "{{ item }}"},
            },
        }
    )
    assert "config" in plan.live_in["each"]


# --------------------------------------------------------------------------- drop points


def test_native_steps_fold_their_drops_into_their_own_pass():
    plan = _plan(_chain(20, read_previous=True))
    # Every native step after the first drops the output it read: no extra state.
    assert set(plan.folds) == {f"s{i}" for i in range(1, 20)}
    assert plan.folds["s7"] == ()
    assert plan.prunes == {}


def test_lambda_steps_drop_through_their_own_result_selector():
    # Each step reads only the one before: after it, only its own output is live.
    plan = _plan(_chain(45, read_previous=True, lambda_steps=True))
    assert plan.folds == {}
    assert plan.own_results == {f"s{i}" for i in range(1, 45)}
    assert plan.prunes["s44"] == ("s44",)


def test_lambda_steps_that_keep_other_outputs_drop_in_batches():
    # Every step reads s0 and the one before it: s0 stays live, so a Pass must rebuild.
    steps = _chain(45, read_previous=True, lambda_steps=True)
    for i in range(2, 45):
        steps[f"s{i}"]["mapping"]["first"] = "{{ steps.s0.output }}"
    plan = _plan(steps)
    # One prune Pass after every PRUNE_BATCH dead outputs; the last step's own
    # ResultSelector drops s0 where the run ends.
    assert plan.own_results == {"s44"}
    batched = sorted(set(plan.prunes) - plan.own_results, key=lambda k: int(k[1:]))
    # (s1 kills nothing; s2 … s11 kill the ten outputs before them)
    assert [int(k[1:]) for k in batched] == list(range(PRUNE_BATCH + 1, 44, PRUNE_BATCH))
    assert all(plan.prunes[key] == ("s0", key) for key in batched)


def test_no_drop_where_a_live_output_may_be_absent():
    # b runs on one route only; d reads it, so between the join and d nothing is rebuilt.
    plan = _plan(
        {
            "a": {"type": "noop", "on_success": "c"},
            "c": {"type": "condition", "expression": "trigger.x", "on_true": "b", "on_false": "j"},
            "b": {"type": "noop", "on_success": "j"},
            "j": {"type": "noop", "on_success": "d"},
            "d": {"type": "transform", "mapping": {"b": "{{ has(steps.b) }}"}, "on_success": "e"},
            "e": {"type": "noop"},
        }
    )
    assert plan.live_in["d"] == {"b"}
    assert "j" not in plan.folds
    # d (in its Lambda: has() is not native) is the last reader of b; the noop after it
    # drops everything but its own output.
    assert plan.folds["e"] == ()


# --------------------------------------------------------------------------- compiled form


def test_compiled_chain_carries_only_live_outputs():
    asl = compile_workflow(_workflow(_chain(3, read_previous=True))).asl
    assert asl["States"]["s1"]["ResultPath"] == "$.steps"
    assert asl["States"]["s1"]["Parameters"] == {
        "s1": {"output": {"v.$": "$.steps.s0.output.v"}, "status": "succeeded"}
    }


def test_compiled_lambda_step_keeps_only_its_own_record():
    steps = _chain(2, read_previous=True, lambda_steps=True)
    asl = compile_workflow(_workflow(steps)).asl
    assert asl["States"]["s1"]["End"] is True
    assert asl["States"]["s1"]["ResultPath"] == "$.steps"
    assert asl["States"]["s1"]["ResultSelector"] == {
        "s1": {"output.$": "$.Payload.output", "status": "succeeded"}
    }
    assert "s1.prune" not in asl["States"]


def test_compiled_prune_state_rebuilds_the_live_outputs():
    steps = _chain(3, read_previous=True, lambda_steps=True)
    steps["s2"]["mapping"]["first"] = "{{ steps.s0.output }}"
    asl = compile_workflow(_workflow(steps, outputs=["s0"])).asl
    assert asl["States"]["s2"]["Next"] == "s2.prune"
    assert asl["States"]["s2.prune"] == {
        "Type": "Pass",
        "End": True,
        "Parameters": {"s0.$": "$.steps.s0", "s2.$": "$.steps.s2"},
        "ResultPath": "$.steps",
    }


# --------------------------------------------------------------------------- document size


def _estimate(steps: dict[str, Any], **extra: Any) -> list[Any]:
    from relayflow.compiler.docsize import document_size_problems

    return document_size_problems(_workflow(steps, **extra))


def test_a_long_chain_has_a_small_live_document():
    # 2,700 steps with long keys outgrew 256 KB when every output travelled to the end.
    steps = {}
    for i in range(2700):
        key = f"step_with_a_rather_long_descriptive_key_{i:05d}"
        prev = f"step_with_a_rather_long_descriptive_key_{i - 1:05d}"
        value = "{{ trigger.x }}" if i == 0 else f"{{{{ steps.{prev}.output.v }}}}"
        steps[key] = {"type": "transform", "mapping": {"v": value}}
        if i:
            steps[prev]["on_success"] = key
    assert _estimate(steps) == []


def test_native_copies_of_large_outputs_can_pass_the_limit():
    fetch = {"type": "tool", "tool": "aws.dynamodb.get_item", "args": {"table": "t", "key": {}}}
    steps = {
        "a": {**fetch, "on_success": "b"},
        "b": {**fetch, "on_success": "both"},
        "both": {
            "type": "transform",
            "mapping": {"a": "{{ steps.a.output }}", "b": "{{ steps.b.output }}"},
        },
    }
    (problem,) = _estimate(steps)
    assert (problem.path, problem.rule) == ("steps.both", "document-size")
    assert "both (" in problem.message and "256 KB" in problem.message


def test_a_for_each_collects_max_items_records():
    steps = {
        "each": {
            "type": "for_each",
            "items": "{{ trigger.items }}",
            "step": "call",
            "max_items": 1000,
        },
        "call": {"type": "webhook_out", "url": "https://example.com/x"},
    }
    (problem,) = _estimate(steps)
    assert problem.path == "steps.each"
    steps["each"]["max_items"] = 100
    assert _estimate(steps) == []


def test_validate_warns_and_strict_refuses(tmp_path, capsys):
    from relayflow.cli.main import main
    from relayflow.cli.output import EXIT_INVALID, EXIT_OK

    path = tmp_path / "fanout.yaml"
    path.write_text(
        "id: fanout\nstart: each\nsteps:\n"
        "  each: {type: for_each, items: '{{ trigger.items }}', step: call}\n"
        "  call: {type: webhook_out, url: 'https://example.com/x'}\n"
    )
    assert main(["validate", str(path)]) == EXIT_OK
    assert "warning: steps.each: after 'each'" in capsys.readouterr().out
    assert main(["validate", "--strict", str(path)]) == EXIT_INVALID
    assert "[document-size]" in capsys.readouterr().err


def test_a_parallel_that_ends_the_run_keeps_its_branches_last_outputs():
    plan = _plan(
        {
            "first": {"type": "noop", "on_success": "fork"},
            "fork": {"type": "parallel", "branches": ["left", "right"]},
            "left": {"type": "transform", "mapping": {"v": 1}, "on_success": "left_tail"},
            "left_tail": {"type": "transform", "mapping": {"v": 2}},
            "right": {"type": "transform", "mapping": {"v": "{{ steps.first.output }}"}},
        }
    )
    # The drop after the parallel names only outputs its branches wrote on every path.
    assert plan.prunes["fork"] == ("left_tail", "right")


def test_a_known_childs_own_size_bounds_its_sub_workflow_output():
    from relayflow.compiler.docsize import document_size_problems
    from relayflow.validation import load_workflow

    # Given the example parent that collects one child output per parcel
    examples = Path(__file__).parents[2] / "workflows" / "examples"
    parent = load_workflow(examples / "order_shipping.yaml")
    child = load_workflow(examples / "shipping_quote.yaml")
    # Unknown child: each output may reach the offload threshold, so it warns
    assert [p.rule for p in document_size_problems(parent)] == ["document-size"]
    # With the child's definition at hand, its own worst document bounds each output
    assert document_size_problems(parent, {"shipping-quote": child}) == []


def test_nested_parallels_solve_each_scope_a_fixed_number_of_times(monkeypatch):
    # Given parallels nested 12 deep (the analysis used to double its work per level), and
    # a count of the liveness fixed points the analysis solves
    from relayflow.compiler import liveness

    solved: list[str] = []
    real = liveness._Analysis._liveness

    def counting(self, scope, end_live, is_main):
        solved.append(scope.entry)
        return real(self, scope, end_live, is_main)

    monkeypatch.setattr(liveness._Analysis, "_liveness", counting)
    workflow = _workflow(nested_parallels(12))
    solved.clear()

    # When the plan is made
    plan = Driver(workflow, CompileOptions()).liveness

    # Then each scope was solved at most twice (1 main + 2 × 24 branches)
    assert len(solved) <= 1 + 2 * 24
    # And the facts are the same as ever: the seed's output stays live down to the deepest
    # branch and is gone after the parallel; leaf0's output lives until ``after`` reads it
    assert all("seed" in plan.live_in[f"p{d}"] for d in range(12))
    assert "seed" in plan.live_in["deepest"]
    assert "seed" not in plan.live_out["p0"]
    assert plan.live_in["after"] == {"leaf0"}


def test_parallels_nested_thirty_deep_compile():
    # Given parallels nested 30 deep / When validated and compiled
    workflow = _workflow(nested_parallels(30))
    compiled = compile_workflow(workflow)

    # Then the innermost branch is in the machine, 30 Parallel states down
    states = compiled.asl["States"]
    for d in range(30):
        inner = f"p{d + 1}" if d + 1 < 30 else "deepest"
        (branch,) = [b for b in states[f"p{d}"]["Branches"] if b["StartAt"] == inner]
        states = branch["States"]
    assert "deepest" in states
