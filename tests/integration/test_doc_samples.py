"""The refund-review sample at the top of docs/definitions.md: its YAML and JSON forms are the
same definition, and running it with the documented input on the local runtime ends with the
documented ``steps`` object."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from relayflow.local import LocalRuntime
from relayflow.runner import run_workflow
from relayflow.validation import load_workflow_text

pytestmark = pytest.mark.integration
DOC = Path(__file__).parents[2] / "docs" / "definitions.md"


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with LocalRuntime(time_scale=0.0001) as rt:
        yield rt


def sample() -> tuple[str, str, dict, dict]:
    """The YAML, the JSON, the documented input and the documented ``steps`` object."""
    text = DOC.read_text()
    head = text[text.index("id: refund-review") - len("```yaml\n") :]
    blocks = re.findall(r"```(yaml|json|console)\n(.*?)```", head, re.S)[:4]
    kinds = [kind for kind, _ in blocks]
    assert kinds == ["yaml", "json", "console", "json"], kinds
    (_, yaml_text), (_, json_text), (_, console), (_, steps_json) = blocks
    given = re.search(r"--input '(.*)'", console)
    assert given is not None
    return yaml_text, json_text, json.loads(given.group(1)), json.loads(steps_json)


def test_the_yaml_and_json_forms_are_one_definition():
    yaml_text, json_text, _, _ = sample()
    assert yaml.safe_load(yaml_text) == json.loads(json_text)


def test_the_documented_run_ends_with_the_documented_steps(runtime):
    yaml_text, _, given, documented = sample()
    # When the sample runs with the documented input
    result = run_workflow(
        load_workflow_text(yaml_text, "refund-review.yaml"), given, runtime=runtime, timeout=60
    )
    # Then it succeeds with exactly the documented steps object
    assert result.status == "succeeded", (result.error, result.cause)
    assert result.output["steps"] == documented
