"""A definition with a value of the wrong type anywhere gets problems, never a crash.

Every golden per-step-type definition and every example is mutated one node at a time: each
key's value (at any depth) is replaced by a mapping, a list, a number, null, a boolean or a
string. Validation must answer with its problems (or accept the definition), and a definition
it accepts must compile: an exception would be a 500 from ``PUT /workflows`` and a traceback
from ``relayflow validate``. Found this way: a ``for_each`` whose ``step`` is a mapping, a
``start`` that is a list, ``http_tools.<t>.operations`` that is a string, a ``type`` that is a
mapping (on a for_each target or a compensated step).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from relayflow.compiler.compile import compile_workflow
from relayflow.validation import validate_data

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "tests" / "golden").glob("*.yaml")) + sorted(
    (ROOT / "workflows" / "examples").glob("*.yaml")
)
WRONG: tuple[Any, ...] = ({"x": 1}, [1, {"y": 2}], 7, None, True, "zz", -1, 1.5)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        items: Any = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return
    for key, value in items:
        yield (*prefix, key)
        yield from _paths(value, (*prefix, key))


def _mutated(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    copied = copy.deepcopy(doc)
    node: Any = copied
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return copied


def test_the_sources_are_found():
    assert len(SOURCES) >= 20


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_a_mistyped_value_anywhere_gets_problems_or_compiles(source: Path):
    doc = yaml.safe_load(source.read_text())
    mutations = accepted = 0
    for path in _paths(doc):
        for value in WRONG:
            mutations += 1
            data = _mutated(doc, path, value)
            label = f"{'.'.join(map(str, path))} = {value!r}"
            try:
                workflow, problems = validate_data(data, source.name)
            except Exception as exc:  # pragma: no cover - the failure this test is for
                pytest.fail(f"validation raised {type(exc).__name__}: {exc} for {label}")
            if problems:
                assert workflow is None, label
                assert all(p.rule and p.message for p in problems), label
                continue
            assert workflow is not None, label
            accepted += 1
            try:
                compile_workflow(workflow)
            except Exception as exc:  # pragma: no cover - the failure this test is for
                pytest.fail(f"compiling raised {type(exc).__name__}: {exc} for {label}")
    # Most wrong values are refused; some (a string where any string is fine) are not.
    assert mutations > accepted
