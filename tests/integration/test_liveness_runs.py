"""Only live data travels, on the local runtime: outputs nobody reads leave the state
document, referenced outputs survive loops, parallel branches and for_each items, and every
output stays in the run's timeline. (Resumes from the DLQ: tests/integration/test_dlq.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from relayflow.local import LocalRuntime
from relayflow.runner import RunResult, run_workflow
from relayflow.validation import load_workflow, load_workflow_text

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
pytestmark = pytest.mark.integration
BARE_RUNTIME = True


def run(runtime: LocalRuntime, definition: str, trigger: Any) -> RunResult:
    result = run_workflow(load_workflow_text(definition, "test.yaml"), trigger, runtime=runtime)
    assert result.succeeded, (result.error, result.cause)
    return result


def document_steps(result: RunResult) -> dict[str, Any]:
    """The step records the final state document still carries."""
    return result.output["steps"]


def timeline(result: RunResult) -> dict[str, Any]:
    return {step.key: step.output for step in result.steps}


def test_unreferenced_middle_outputs_leave_the_document_but_stay_in_the_timeline(runtime):
    # Given the golden workflow whose middle steps nobody reads (tests/golden/liveness.yaml)
    workflow = load_workflow(GOLDEN / "liveness.yaml")
    # (its events go to the account's default bus, which the run's tenant must own)
    events = runtime.events_client
    default_bus = events.describe_event_bus(Name="default")["Arn"]
    events.tag_resource(
        ResourceARN=default_bus, Tags=[{"Key": "relayflow-tenant", "Value": "local"}]
    )
    # When it runs
    result = run_workflow(workflow, {"order": "o-7", "total": 12}, runtime=runtime)
    assert result.succeeded, (result.error, result.cause)
    # Then the final document keeps only the step the run ended on
    assert set(document_steps(result)) == {"publish"}
    # And report read load's output two steps after it was written
    assert timeline(result)["report"] == {"order": "o-7", "total": 12}
    # And every step's output is still in the timeline
    assert set(timeline(result)) == {"load", "audit", "stamp", "note", "report", "publish"}
    assert timeline(result)["note"] == {"seen": True}
    # And each state carried only what was live: report's input held load but not audit
    report_input = next(s for s in result_states(runtime, result) if s.name == "report").input
    assert set(report_input["steps"]) == {"load", "note"}


def result_states(runtime: LocalRuntime, result: RunResult) -> list[Any]:
    arn = next(a for a in runtime.list_executions() if a.endswith(f":{result.run_id}"))
    return runtime.describe(arn).states


def test_a_referenced_output_survives_every_pass_of_a_loop(runtime):
    # Given a loop of 15 passes that reads the output written before it on every pass
    definition = """
id: loop
start: seed
steps:
  seed: {type: transform, mapping: {base: "{{ trigger.base }}"}, on_success: work}
  work:
    type: transform
    mapping: {base: "{{ steps.seed.output.base }}"}
    on_success: filler
  filler: {type: noop, on_success: count}
  count:
    type: code
    code: |
      n = (steps.get("count") or {}).get("output") or 0
      return n + 1
    on_success: check
  check:
    type: condition
    expression: steps.count.output >= 15
    on_true: done
    on_false: work
  done:
    type: transform
    mapping: {base: "{{ steps.seed.output.base }}", passes: "{{ steps.count.output }}"}
"""
    result = run(runtime, definition, {"base": "b-1"})
    # Then the last step still read seed's output, after 15 passes
    assert document_steps(result)["done"]["output"] == {"base": "b-1", "passes": 15}
    assert [s.output for s in result.steps if s.key == "work"] == [{"base": "b-1"}] * 15
    # And the dead filler output did not travel to the end
    assert "filler" not in document_steps(result)


def test_a_referenced_output_survives_parallel_branches_and_their_merge(runtime):
    # Given a fork whose branches read an output from before it, with outputs read after it
    # and others nobody reads
    definition = """
id: fork
start: first
steps:
  first: {type: transform, mapping: {id: "{{ trigger.id }}"}, on_success: fork}
  fork: {type: parallel, branches: [left, right], on_success: join}
  left: {type: transform, mapping: {l: "{{ steps.first.output.id }}"}, on_success: left_tail}
  left_tail: {type: noop}
  right: {type: transform, mapping: {r: "{{ steps.first.output.id }}-r"}}
  join:
    type: transform
    mapping: "{{ steps.left.output.l }}/{{ steps.right.output.r }}/{{ steps.first.output.id }}"
"""
    result = run(runtime, definition, {"id": "x9"})
    # Then the join read both branches' outputs and the one from before the fork
    assert document_steps(result)["join"]["output"] == "x9/x9-r/x9"
    # And the final document holds the step the run ended on only
    assert set(document_steps(result)) == {"join"}
    assert timeline(result)["left_tail"] is None and "left_tail" in timeline(result)


def test_a_referenced_output_reaches_every_for_each_item(runtime):
    # Given outputs written before a for_each, one read by every item, one read by nobody
    definition = """
id: items
start: config
steps:
  config: {type: transform, mapping: {rate: "{{ trigger.rate }}"}, on_success: unused}
  unused: {type: transform, mapping: {blob: "{{ trigger.blob }}"}, on_success: each}
  each:
    type: for_each
    items: "{{ trigger.items }}"
    step: price
    on_success: total
  price:
    type: transform
    mapping: {item: "{{ item }}", rate: "{{ steps.config.output.rate }}"}
  total: {type: transform, mapping: "{{ steps.each.output }}"}
"""
    result = run(runtime, definition, {"rate": 3, "items": [1, 2, 3], "blob": "z" * 1000})
    # Then every item read the rate written before the Map
    assert [r["output"] for r in document_steps(result)["total"]["output"]] == [
        {"item": 1, "rate": 3},
        {"item": 2, "rate": 3},
        {"item": 3, "rate": 3},
    ]
    # And the unread output did not reach the end
    assert set(document_steps(result)) == {"total"}


def test_workflow_outputs_keep_named_outputs_to_the_end(runtime):
    definition = """
id: kept
start: a
outputs: [a]
steps:
  a: {type: transform, mapping: {v: 1}, on_success: b}
  b: {type: transform, mapping: {v: 2}, on_success: c}
  c: {type: transform, mapping: {v: 3}}
"""
    result = run(runtime, definition, {})
    assert set(document_steps(result)) == {"a", "c"}
    assert document_steps(result)["a"]["output"] == {"v": 1}


def test_a_parallel_that_ends_the_run_keeps_its_branches_last_outputs(runtime):
    definition = """
id: fork-end
start: first
steps:
  first: {type: transform, mapping: {id: "{{ trigger.id }}"}, on_success: fork}
  fork: {type: parallel, branches: [left, right]}
  left: {type: transform, mapping: {l: 1}, on_success: left_tail}
  left_tail: {type: transform, mapping: {l: 2}}
  right: {type: transform, mapping: {r: "{{ steps.first.output.id }}"}}
"""
    result = run(runtime, definition, {"id": "q"})
    # Then the run's output holds each branch's last output, and nothing from before the fork
    assert {k: v["output"] for k, v in document_steps(result).items()} == {
        "left_tail": {"l": 2},
        "right": {"r": "q"},
    }


def _generated(seed: int) -> dict[str, Any]:
    """A small random workflow: a chain with condition shortcuts, native and Lambda
    transforms, noops and code steps reading earlier outputs (some of them maybe absent)."""
    import random

    rng = random.Random(seed)
    keys = [f"k{i}" for i in range(rng.randint(5, 10))]
    steps: dict[str, Any] = {}
    for i, key in enumerate(keys):
        later, earlier = keys[i + 1 :], keys[:i]
        ref = rng.choice(earlier) if earlier and rng.random() < 0.7 else None
        kinds = ["native", "native", "lambda", "noop", "condition", "code"]
        kind = rng.choice(kinds if later else kinds[:4])
        if kind == "native":
            step: dict[str, Any] = {
                "type": "transform",
                "mapping": {"v": f"{{{{ steps.{ref}.output }}}}" if ref else "{{ trigger.x }}"},
            }
        elif kind == "lambda":
            presence = f"has(steps.{ref})" if ref else "has(trigger.x)"
            step = {"type": "transform", "mapping": {"v": f"{{{{ {presence} }}}}"}}
        elif kind == "code":
            step = {"type": "code", "code": f"return steps.get({ref!r})" if ref else "return 1"}
        elif kind == "condition":
            step = {
                "type": "condition",
                "expression": rng.choice(
                    ["trigger.flag", f"has(steps.{ref})" if ref else "has(trigger.x)"]
                ),
                "on_true": later[0],
                "on_false": rng.choice(later),
            }
        else:
            step = {"type": "noop"}
        if kind != "condition" and later:
            step["on_success"] = later[0]
        steps[key] = step
    return {"id": f"generated-{seed}", "start": "k0", "steps": steps}


def test_dropping_dead_outputs_changes_no_step_and_no_route(runtime, monkeypatch):
    # Given generated workflows, each run once as compiled and once keeping every output
    from relayflow.compiler import plan
    from relayflow.compiler.liveness import LivenessPlan, analyse
    from relayflow.validation import validate_data

    succeeded = dropped_any = 0
    for seed in range(10):
        workflow, problems = validate_data(_generated(seed))
        assert workflow is not None, problems
        trigger = {"x": seed, "flag": seed % 2 == 0}
        monkeypatch.setattr(plan, "analyse", analyse)
        dropped = run_workflow(workflow, trigger, runtime=runtime)
        monkeypatch.setattr(plan, "analyse", lambda *args, **kwargs: LivenessPlan())
        kept = run_workflow(workflow, trigger, runtime=runtime)
        # Then every step ran the same way with the same output, and the run ended the same
        # (a native read of an output a route skipped fails both runs alike)
        assert (dropped.status, dropped.error) == (kept.status, kept.error), seed
        assert [(s.key, s.status, s.output) for s in dropped.steps] == [
            (s.key, s.status, s.output) for s in kept.steps
        ], seed
        if dropped.succeeded:
            # And the final document is the still-live part of the full one
            final, full = document_steps(dropped), document_steps(kept)
            assert all(full[key] == record for key, record in final.items()), seed
            succeeded += 1
            dropped_any += len(final) < len(full)
    assert succeeded >= 4 and dropped_any >= 3
