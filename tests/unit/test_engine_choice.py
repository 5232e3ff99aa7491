"""The engine choice (``relayflow.compiler.engine``): golden per example and per step type,
the rules one by one, and ``engine: express`` refused with the reason."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from relayflow.compiler import CompileOptions, compile_workflow
from relayflow.compiler.check import assert_valid_machine
from relayflow.compiler.engine import (
    ACTING_STEP_TYPES,
    EXPRESS_MAX_SECONDS,
    FUNCTION_TIMEOUT_SECONDS,
    choose_engine,
    retry_waits,
)
from relayflow.compiler.recording import (
    DYNAMODB_UPDATE_ITEM,
    RECORD_FAILED,
    RECORD_SUCCEEDED,
    RUN_ITEMS,
)
from relayflow.dal import access
from relayflow.definition.policies import RetryPolicy
from relayflow.validation import load_workflow, validate_data

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
EXAMPLES = sorted((ROOT / "workflows" / "examples").glob("*.yaml"))
CASES = sorted(GOLDEN.glob("*.yaml"))
CHOICES = GOLDEN / "engines.json"


def _choices() -> dict[str, Any]:
    return {
        str(path.relative_to(ROOT)): choose_engine(load_workflow(path)).to_dict()
        for path in [*EXAMPLES, *CASES]
    }


def test_the_auto_choice_of_every_example_and_step_type_matches_the_golden_file():
    # Given every example and every per-step-type golden definition / When the engine is chosen
    got = json.dumps(_choices(), indent=2, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        CHOICES.write_text(got)
    # Then each choice, reason and blocking step is the reviewed one
    assert got == CHOICES.read_text()
    choices = json.loads(got)
    assert {c["engine"] for c in choices.values()} == {"standard", "express"}


def _workflow(steps: dict[str, Any], **extra: Any) -> Any:
    data = {"id": "wf", "start": next(iter(steps)), "steps": steps, **extra}
    workflow, problems = validate_data(data)
    assert not problems, problems
    return workflow


def test_a_short_workflow_of_idempotent_steps_runs_on_express():
    # Given a webhook-style workflow: a tool call, then a webhook out
    workflow = _workflow(
        {
            "fetch": {"type": "tool", "tool": "http.api.get", "on_success": "tell"},
            "tell": {"type": "webhook_out", "url": "https://example.com/x"},
        },
        http_tools={"api": {"base_url": "https://example.com", "operations": {"get": {}}}},
    )
    # When chosen / Then Express, bounded per step by the seed's defaults (3 attempts of the
    # default timeout, 35 s above a 30 s HTTP limit, 10 s and 20 s apart) plus service-error
    # waits
    choice = choose_engine(workflow)
    assert choice.engine == "express"
    assert choice.bound_seconds == 2 * (3 * 35 + 10 + 20 + 7)
    assert choice.blocking_step is None


@pytest.mark.parametrize(
    ("step", "fragment"),
    [
        ({"type": "approval", "title": "ok?"}, "waits for a decision"),
        ({"type": "waitpoint"}, "waits for a callback"),
        ({"type": "wait_for_event", "event": "paid"}, "waits for an event"),
        ({"type": "delay", "seconds": 300}, "a run may last 300 s"),
        ({"type": "delay", "seconds": "{{ trigger.wait }}"}, "as long as the run's data says"),
        (
            {
                "type": "code",
                "code": "result = 1",
                "timeout_seconds": 200,
                "retry": {"max_attempts": 2},
            },
            "a run may last 409 s",
        ),
    ],
)
def test_a_step_that_express_cannot_run_unchanged_keeps_standard_and_is_named(step, fragment):
    # Given a one-step workflow whose step Express would change
    workflow = _workflow({"only": step})
    # When chosen / Then Standard, naming the step and why
    choice = choose_engine(workflow)
    assert choice.engine == "standard"
    assert choice.blocking_step == "only"
    assert fragment in choice.reason


def test_a_short_run_timeout_bounds_a_delay_the_data_decides():
    # Given a data-driven delay, but a run timeout of two minutes
    workflow = _workflow(
        {"only": {"type": "delay", "seconds": "{{ trigger.wait }}"}}, run_timeout_seconds=120
    )
    # Then the run cannot outlast 120 s either way: Express
    assert choose_engine(workflow).engine == "express"
    assert choose_engine(workflow).bound_seconds == 120


def test_a_cycle_counts_max_steps_per_run_passes_of_its_longest_step():
    # Given a loop of a 1 s delay, bounded by max_steps_per_run
    steps = {
        "tick": {"type": "delay", "seconds": 1, "on_success": "again"},
        "again": {
            "type": "condition",
            "expression": "trigger.n > 0",
            "on_true": "tick",
            "on_false": "done",
        },
        "done": {"type": "noop"},
    }
    # Then 400 passes pass the limit and 100 do not
    assert choose_engine(_workflow(steps, max_steps_per_run=400)).engine == "standard"
    assert choose_engine(_workflow(steps, max_steps_per_run=100)).bound_seconds == 100


def test_a_for_each_counts_one_item_step_per_round_of_its_concurrency():
    # Given 10 items of a 20 s code step, 2 at a time: 5 rounds
    steps = {
        "each": {
            "type": "for_each",
            "items": "{{ trigger.xs }}",
            "step": "work",
            "max_items": 10,
            "max_concurrency": 2,
        },
        "work": {"type": "code", "code": "result = 1", "timeout_seconds": 20},
    }
    # With the default retries: 3 attempts of 20 s, 10 s and 20 s apart, per round
    assert choose_engine(_workflow(steps)).bound_seconds == 5 * (3 * 20 + 10 + 20 + 7)
    # Without them: one attempt per round
    steps["work"]["retry"] = "none"
    assert choose_engine(_workflow(steps)).bound_seconds == 5 * 27


def test_workflow_settings_that_need_the_recorder_keep_standard():
    steps = {"only": {"type": "noop"}}
    singleton = _workflow(steps, singleton={"key": "{{ trigger.id }}"})
    assert choose_engine(singleton).engine == "standard"
    assert "singleton" in choose_engine(singleton).reason
    notified = _workflow(steps, notifications={"webhook": {"url": "https://hooks.example.com/x"}})
    assert choose_engine(notified).engine == "standard"
    assert "notifications" in choose_engine(notified).reason
    # And engine: express with one of them is refused at the setting's path
    _, problems = validate_data(
        {
            "id": "wf",
            "engine": "express",
            "start": "only",
            "steps": steps,
            "cancel_on": [{"event": "order.cancelled"}],
        }
    )
    assert [(p.path, p.rule) for p in problems] == [("engine", "engine")]


def test_a_callback_task_in_the_compiled_machine_refuses_express_whatever_emitted_it():
    # Given a short workflow whose compiled machine (as a future step kind might) holds a
    # callback Task
    workflow = _workflow({"only": {"type": "noop"}})
    compiled = compile_workflow(workflow)
    compiled.asl["States"]["only"] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "End": True,
    }
    # Then the machine decides: Standard, naming the step
    choice = choose_engine(workflow, compiled)
    assert (choice.engine, choice.blocking_step) == ("standard", "only")


def test_engine_standard_is_always_honoured_and_engine_express_when_safe():
    steps = {"only": {"type": "noop"}}
    assert choose_engine(_workflow(steps, engine="standard")).engine == "standard"
    assert choose_engine(_workflow(steps, engine="express")).engine == "express"


def test_engine_express_on_an_unsafe_workflow_is_refused_naming_the_step_and_reason():
    # Given engine: express and an approval step
    data = {
        "id": "wf",
        "engine": "express",
        "start": "ask",
        "steps": {"ask": {"type": "approval", "title": "ok?"}},
    }
    # When validated
    workflow, problems = validate_data(data)
    # Then one problem at the step's path, with the reason
    assert workflow is None
    assert [(p.path, p.rule) for p in problems] == [("steps.ask", "engine")]
    assert "waits for a decision" in problems[0].message


def test_an_unknown_engine_is_refused():
    _, problems = validate_data(
        {"id": "wf", "engine": "fast", "start": "a", "steps": {"a": {"type": "noop"}}}
    )
    assert [p.path for p in problems] == ["engine"]


def test_retry_waits_follow_the_backoff_and_its_cap():
    assert retry_waits(RetryPolicy(max_attempts=4, backoff="fixed", base_seconds=3)) == 9
    assert retry_waits(RetryPolicy(max_attempts=4, backoff="linear", base_seconds=3)) == 18
    assert retry_waits(RetryPolicy(max_attempts=4, backoff="exponential", base_seconds=3)) == 21
    capped = RetryPolicy(max_attempts=4, backoff="exponential", base_seconds=3, max_delay_seconds=5)
    assert retry_waits(capped) == 3 + 5 + 5


def test_function_timeouts_agree_with_the_template():
    # Given template.yaml's functions (Globals give the default timeout)
    text = (ROOT / "template.yaml").read_text()
    default = int(re.search(r"Globals:\n  Function:\n(?:    .*\n)*?    Timeout: (\d+)", text)[1])
    for kind, seconds in FUNCTION_TIMEOUT_SECONDS.items():
        block = re.search(
            rf"FunctionName: !Sub relayflow-\${{Stage}}-{kind}\n((?:      .*\n)*)", text
        )
        if block is None:
            continue  # no function of its own (wait_for_event registers through another)
        found = re.search(r"^      Timeout: (\d+)$", block[1], re.M)
        assert (int(found[1]) if found else default) == seconds, kind


def test_every_acting_step_type_records_its_result_under_its_step_identity():
    # Given the registry's acting types that claim idempotency / Then their code records it
    for kind, recorded in ACTING_STEP_TYPES.items():
        assert recorded
        handler = (ROOT / "functions" / kind / "app.py").read_text()
        logic = (ROOT / "shared" / "relayflow" / "steps" / f"{kind}.py").read_text()
        assert "recorded=True" in handler or "run_recorded(" in logic, kind


def test_an_express_machine_records_its_end_natively_and_passes_the_checks():
    # Given a workflow Express runs, compiled for a target that runs Express
    options = CompileOptions(express=True, table_name="relayflow-dev")
    compiled = compile_workflow(load_workflow(GOLDEN / "tool_http.yaml"), options)
    asl = compiled.asl
    # Then it records success and failure with UpdateItem on run items, and nothing else
    assert compiled.engine is not None and compiled.engine.engine == "express"
    for name in (RECORD_SUCCEEDED, RECORD_FAILED):
        task = asl["States"][name]
        assert task["Resource"] == DYNAMODB_UPDATE_ITEM
        assert task["Parameters"]["TableName"] == "relayflow-dev"
    assert asl["TimeoutSeconds"] <= EXPRESS_MAX_SECONDS
    statement = next(s for s in compiled.iam_statements if "dynamodb:UpdateItem" in s["Action"])
    assert statement["Action"] == ["dynamodb:UpdateItem"]
    assert statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == [
        access.RUNS
    ]
    assert RUN_ITEMS == access.RUNS
    assert_valid_machine(asl)


@pytest.mark.parametrize("path", [*EXAMPLES, *CASES], ids=lambda p: p.stem)
def test_every_machine_compiled_for_express_targets_passes_the_compiler_check(path):
    compiled = compile_workflow(load_workflow(path), CompileOptions(express=True))
    assert_valid_machine(compiled.asl)
    wrapped = compiled.engine is not None and compiled.engine.engine == "express"
    assert (compiled.asl["StartAt"] == "_run") == wrapped


def test_the_definition_schema_offers_the_engine_setting():
    from relayflow.definition.models import Workflow

    schema = Workflow.model_json_schema()
    assert schema["properties"]["engine"]["enum"] == ["auto", "standard", "express"]
    assert yaml.safe_dump({"engine": "auto"})  # the setting is plain YAML


def test_the_service_error_waits_are_those_of_the_compiled_lambda_retrier():
    from relayflow.compiler.engine import SERVICE_ERROR_WAITS

    compiled = compile_workflow(_workflow({"only": {"type": "code", "code": "result = 1"}}))
    first = compiled.asl["States"]["only"]["Retry"][0]
    waits = [
        first["IntervalSeconds"] * first["BackoffRate"] ** n for n in range(first["MaxAttempts"])
    ]
    assert sum(waits) == SERVICE_ERROR_WAITS
