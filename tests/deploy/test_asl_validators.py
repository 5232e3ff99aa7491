"""AWS's own ASL validators over every compiled machine the project knows: the golden files,
the examples, and a generated corpus of at least 500 valid definitions.

Both validators run in one node process per call (``tools/asl/validate.mjs``): the language
service behind the AWS Toolkit (``amazon-states-language-service``) and ``asl-validator``.
``make test`` sets RELAYFLOW_REQUIRE_ASL_TOOLS=1, so a missing tool folder fails here instead
of skipping. Known validator bugs are excused only in tests/support/asl_validator_exceptions.py.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from asl_validators import (
    REQUIRE_ENV,
    Report,
    missing_tools,
    validate_definitions,
    validate_files,
)
from corpus import draw_corpus
from relayflow_testing import EXAMPLE_WORKFLOWS, GOLDEN_MACHINES
from workflow_strategies import LONG_DELAY, workflow_definitions

from relayflow.compiler import compile_workflow
from relayflow.compiler.check import assert_valid_machine
from relayflow.definition import AVAILABLE_STEP_TYPES
from relayflow.validation import load_workflow, validate_data

#: Definitions drawn; every one that validation accepts is compiled and validated. Some
#: headroom: validation refuses the rare edge values the generator draws on purpose (a
#: delay past Step Functions' limit, a timestamp that only matches the pattern, .inf/.nan),
#: about one definition in eight, and at least MIN_ACCEPTED must remain. (Which definitions
#: Hypothesis draws varies a little between processes, so the headroom is generous.)
CORPUS_SIZE = 640
MIN_ACCEPTED = 500


@pytest.fixture(scope="module")
def asl_tools() -> None:
    reason = missing_tools()
    if reason is None:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
    pytest.skip(reason)


def _failures(reports: dict[str, Report], limit: int = 12) -> str:
    """The failing documents, each with its diagnostics (a readable assertion message)."""
    lines: list[str] = []
    failing = [r for r in reports.values() if not r.ok]
    for report in failing[:limit]:
        lines.append(f"{report.name}:")
        lines.extend(f"    {d}" for d in report.diagnostics[:5])
    if len(failing) > limit:
        lines.append(f"… and {len(failing) - limit} more documents")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the driver


BROKEN: dict[str, dict[str, Any]] = {
    # Next and End together (what a custom step without branches used to compile to).
    "next-and-end": {
        "StartAt": "A",
        "States": {"A": {"Type": "Pass", "Next": "B", "End": True}, "B": {"Type": "Succeed"}},
    },
    # A user key ending in .$ copied into Parameters: its value is not a path.
    "user-key-as-path": {
        "StartAt": "A",
        "States": {"A": {"Type": "Pass", "Parameters": {"note.$": "hello"}, "End": True}},
    },
    # A state nothing reaches.
    "unreachable": {
        "StartAt": "A",
        "States": {"A": {"Type": "Succeed"}, "B": {"Type": "Succeed"}},
    },
    # A Wait past Step Functions' 99,999,999 seconds.
    "wait-too-long": {
        "StartAt": "A",
        "States": {"A": {"Type": "Wait", "Seconds": 100_000_000, "End": True}},
    },
}


def test_validators_report_broken_machines_and_pass_the_golden_files(asl_tools):
    # Given machines that AWS refuses, one per rule, and the golden files
    definitions = dict(BROKEN)
    for path in GOLDEN_MACHINES:
        definitions[path.name] = json.loads(path.read_text(encoding="utf-8"))

    # When both validators read them, with asl-validator's schemas compiled once (the
    # driver's default) and compiled per document (as the library does by itself)
    shared = validate_definitions(definitions)
    fresh = validate_definitions(definitions, fresh_ajv=True)

    # Then every broken machine gets a diagnostic from AWS's language service…
    for name in BROKEN:
        assert any(d.validator == "language_service" for d in shared[name].diagnostics), name
    # …asl-validator agrees where its schema covers the rule
    for name in ("next-and-end", "user-key-as-path", "unreachable"):
        assert any(d.validator == "asl_validator" for d in shared[name].diagnostics), name
    # and sharing the compiled schemas changes no diagnostic
    assert {n: r.diagnostics for n, r in shared.items()} == {
        n: r.diagnostics for n, r in fresh.items()
    }
    # and a definition that is not strict JSON is reported, never sent as NaN or Infinity
    nan = validate_definitions(
        {
            "nan": {
                "StartAt": "A",
                "States": {"A": {"Type": "Wait", "Seconds": float("inf"), "End": True}},
            }
        }
    )
    assert [d.code for d in nan["nan"].diagnostics] == ["NON_FINITE"]
    # and the golden files pass
    golden = {n: r for n, r in shared.items() if n not in BROKEN}
    assert all(r.ok for r in golden.values()), _failures(golden)


# --------------------------------------------------------------------------- golden, examples


def test_golden_files_and_compiled_examples_have_no_diagnostics(asl_tools):
    # Given every golden ASL file as written and every example workflow, compiled
    examples = {
        f"workflows/examples/{path.name}": compile_workflow(load_workflow(path)).asl
        for path in EXAMPLE_WORKFLOWS
    }
    assert len(GOLDEN_MACHINES) >= 20 and len(EXAMPLE_WORKFLOWS) >= 5

    # When both validators read the golden files (one node call) and the examples (another)
    reports = {**validate_files(GOLDEN_MACHINES), **validate_definitions(examples)}

    # Then neither says anything about any of them
    assert set(reports) == {str(p) for p in GOLDEN_MACHINES} | set(examples)
    assert all(r.ok for r in reports.values()), _failures(reports)


def test_the_revival_variants_of_the_examples_have_no_diagnostics(asl_tools):
    # Given each example compiled, with a way in at every top-level state (what
    # `relayflow serve --state` publishes to carry on a run after a restart)
    from relayflow.local.revive import revival_variant

    variants = {}
    for path in EXAMPLE_WORKFLOWS:
        asl = compile_workflow(load_workflow(path)).asl
        variants[f"revival of {path.name}"] = revival_variant(asl, list(asl["States"]))
    # When both validators read them, then neither says anything
    reports = validate_definitions(variants)
    assert all(r.ok for r in reports.values()), _failures(reports)
    for variant in variants.values():
        assert_valid_machine(variant)


# --------------------------------------------------------------------------- generated corpus


@dataclass
class Corpus:
    definitions: dict[str, dict[str, Any]] = field(default_factory=dict)
    machines: dict[str, dict[str, Any]] = field(default_factory=dict)
    refused: dict[str, list[str]] = field(default_factory=dict)
    crashed: dict[str, str] = field(default_factory=dict)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    """CORPUS_SIZE generated definitions (the same ones on every run), validated and compiled."""
    built = Corpus()
    for index, definition in enumerate(draw_corpus(workflow_definitions(), CORPUS_SIZE)):
        name = f"generated-{index:03d}"
        workflow, problems = validate_data(definition)
        if workflow is None:
            built.refused[name] = [p.rule for p in problems]
            continue
        built.definitions[name] = definition
        try:
            built.machines[name] = compile_workflow(workflow).asl
        except Exception as exc:  # a compiler crash is a finding, reported below
            built.crashed[name] = f"{type(exc).__name__}: {exc}"
    return built


def _edges(definition: dict[str, Any]) -> set[str]:
    """Which edge inputs a definition holds (see the coverage test)."""
    found: set[str] = set()
    text = json.dumps(definition)
    if '.$"' in text:
        found.add("user-key-path")
    if "NaN" in text or "Infinity" in text:
        found.add("non-finite")
    if len(text) > 100_000:
        found.add("large")
    for step in definition["steps"].values():
        if isinstance(step.get("seconds"), int) and step["seconds"] >= LONG_DELAY:
            found.add("long-delay")  # longer than a run may last; valid up to 99,999,999
        if len(step.get("branches") or []) > 11 and step["type"] == "parallel":
            found.add("wide-parallel")
    return found


def _all_states(machine: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every state of a machine by name, inside Parallel branches and Map processors too."""
    found: dict[str, dict[str, Any]] = {}
    for name, state in machine["States"].items():
        found[name] = state
        for inner in [*state.get("Branches", []), state.get("ItemProcessor")]:
            if inner:
                found.update(_all_states(inner))
    return found


def _yaml(definition: dict[str, Any]) -> str:
    return yaml.safe_dump(definition, sort_keys=False, allow_unicode=True, width=100)


def test_corpus_definitions_are_valid_and_compile(corpus):
    # Then at least MIN_ACCEPTED generated definitions pass validation (the generator draws
    # valid ones; only its rare edge values may be refused)
    refusals = Counter(rule for rules in corpus.refused.values() for rule in rules)
    assert len(corpus.definitions) >= MIN_ACCEPTED, refusals.most_common(10)
    # and every one of them compiles
    assert not corpus.crashed, corpus.crashed


def test_corpus_covers_every_step_type_and_option(corpus):
    # Given the accepted definitions
    seen: Counter[str] = Counter()
    for definition in corpus.definitions.values():
        for step in definition["steps"].values():
            kind = step["type"]
            seen[kind] += 1
            retry = step.get("retry")
            if retry == "none":
                seen["retry:none"] += 1
            elif retry:
                seen[f"retry:{retry['backoff']}"] += 1
            for option in ("timeout_seconds", "on_failure", "concurrency", "rate_limit"):
                seen[option] += option in step
            if kind == "custom":
                seen["custom:branches" if step.get("branches") else "custom:plain"] += 1
            if kind == "tool":
                seen[f"tool:{step['tool'].split('.')[0]}"] += 1
            if kind == "delay":
                form = "seconds" if "seconds" in step else "until" if "until" in step else "default"
                seen[f"delay:{form}"] += 1
            if kind == "parallel":
                seen[f"settle:{step.get('settle', 'fail_fast')}"] += 1
                seen[f"fail_when:{step.get('fail_when', 'never')}"] += 1
        seen["errors.on_failure"] += "errors" in definition
        for setting in definition.get("defaults", {}):
            seen[f"defaults.{setting}"] += 1
        for edge in _edges(definition):
            seen[f"edge:{edge}"] += 1
    # Then every available step type and every option appears many times
    wanted = [
        *sorted(AVAILABLE_STEP_TYPES),
        "retry:fixed",
        "retry:linear",
        "retry:exponential",
        "retry:none",
        "timeout_seconds",
        "on_failure",
        "concurrency",
        "rate_limit",
        "custom:branches",
        "custom:plain",
        "tool:aws",
        "tool:http",
        "delay:seconds",
        "delay:until",
        "delay:default",
        "errors.on_failure",
        "settle:all",
        "settle:fail_fast",
        "fail_when:any",
        "defaults.retry",
        "defaults.timeout_seconds",
        "defaults.delay_seconds",
    ]
    assert {name: seen[name] for name in wanted if seen[name] < 10} == {}
    # and the inputs behind issue 12's bug classes keep occurring
    edges = ["user-key-path", "non-finite", "long-delay", "wide-parallel", "large"]
    assert {edge: seen[f"edge:{edge}"] for edge in edges if not seen[f"edge:{edge}"]} == {}
    # and the native and Lambda forms of condition and transform both occur
    runners: Counter[str] = Counter()
    for name, machine in corpus.machines.items():
        states = _all_states(machine)
        for key, step in corpus.definitions[name]["steps"].items():
            if key in states and step["type"] in ("condition", "transform"):
                runners[f"{step['type']}:{states[key]['Type']}"] += 1
    assert (
        min(
            runners[k]
            for k in ("condition:Choice", "condition:Task", "transform:Pass", "transform:Task")
        )
        >= 10
    ), runners


def test_corpus_passes_the_compiler_check(corpus):
    failures: dict[str, str] = {}
    for name, machine in corpus.machines.items():
        try:
            assert_valid_machine(machine)
        except Exception as exc:
            failures[name] = str(exc)
    if failures:
        smallest = min(failures, key=lambda n: len(json.dumps(corpus.definitions[n])))
        pytest.fail(
            f"{len(failures)} compiled machines break a rule; the smallest definition "
            f"({smallest}):\n{_yaml(corpus.definitions[smallest])}{failures[smallest]}"
        )


def test_corpus_passes_both_validators(asl_tools, corpus):
    # When both validators read every compiled machine of the corpus in one node call
    reports = validate_definitions(corpus.machines)

    # Then neither reports anything
    assert set(reports) == set(corpus.machines)
    failing = {n: r for n, r in reports.items() if not r.ok}
    if failing:
        smallest = min(failing, key=lambda n: len(json.dumps(corpus.definitions[n])))
        kinds = Counter(d.message for r in failing.values() for d in r.diagnostics)
        pytest.fail(
            f"{len(failing)} of {len(reports)} compiled machines have diagnostics.\n"
            f"Most common: {kinds.most_common(6)}\n"
            f"Smallest failing definition ({smallest}):\n{_yaml(corpus.definitions[smallest])}"
            f"{_failures({smallest: failing[smallest]})}"
        )
