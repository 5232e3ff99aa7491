"""The engine-version guard: ``requires:`` is a version specifier the engine must satisfy."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from relayflow import __version__
from relayflow.definition import DefinitionError
from relayflow.engine import ENGINE_VERSION, BadSpecifier, unmet_requirement
from relayflow.validation import load_workflow_text, validate_data

BASE: dict[str, Any] = {"id": "wf", "start": "a", "steps": {"a": {"type": "noop"}}}


def with_requires(spec: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["requires"] = spec
    return data


def test_the_engine_version_is_the_package_version():
    assert __version__ == ENGINE_VERSION


def test_a_definition_for_a_newer_engine_is_refused_naming_both_versions():
    # Given a definition that needs Relayflow 99 or later
    workflow, problems = validate_data(with_requires(">=99"), "wf.yaml")
    # Then it is refused at `requires`, and the message names what it needs and what runs
    assert workflow is None
    assert [(p.path, p.rule) for p in problems] == [("requires", "engine-version")]
    assert ">=99" in problems[0].message
    assert f"this engine is Relayflow {ENGINE_VERSION}" in problems[0].message


def test_a_satisfied_requirement_validates_and_is_kept_on_the_model():
    workflow, problems = validate_data(with_requires(f" >={ENGINE_VERSION} "))
    assert problems == []
    assert workflow is not None and workflow.requires == f">={ENGINE_VERSION}"


@pytest.mark.parametrize(
    ("spec", "engine", "satisfied"),
    [
        (">=0.3", "0.2.9", False),
        (">=0.3", "0.3.0", True),
        (">=0.3,<2", "2.0", False),
        ("~=1.4", "1.9.1", True),
        ("==1.*", "2.0.0", False),
        # A development build counts as a version (PEP 440 orders it before its release).
        (">=0.2", "0.3.0.dev4", True),
        (">=0.3", "0.3.0.dev4", False),
    ],
)
def test_the_guard_follows_pep_440(spec: str, engine: str, satisfied: bool):
    # When the same definition is checked against another engine version
    _, problems = validate_data(with_requires(spec), engine_version=engine)
    # Then it validates exactly when the engine satisfies the specifier
    assert (problems == []) is satisfied
    assert (unmet_requirement(spec, engine) is None) is satisfied


@pytest.mark.parametrize("spec", ["0.3", ">>1", "latest", ""])
def test_a_malformed_specifier_is_a_clear_problem(spec: str):
    _, problems = validate_data(with_requires(spec), "wf.yaml")
    assert [(p.path, p.rule) for p in problems] == [("requires", "version-specifier")]
    assert "is not a version specifier" in problems[0].message
    with pytest.raises(BadSpecifier):
        unmet_requirement(spec)


def test_loading_text_raises_with_the_guard_problem():
    with pytest.raises(DefinitionError) as info:
        load_workflow_text("id: wf\nrequires: '>=99'\nstart: a\nsteps: {a: {type: noop}}\n")
    assert [p.rule for p in info.value.problems] == ["engine-version"]
