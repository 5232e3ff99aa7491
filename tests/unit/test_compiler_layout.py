"""The compiler's modules depend downward only: a step kind, ``on_error`` and
``compensation`` compile through the emitter protocol (``relayflow.compiler.emitter``) and
never import the driver, the scope context, the registry or the compile entry point; the
engine choice and the size estimate read a ``WorkflowPlan`` without the driver; nothing in
the compiler imports ``relayflow.ai`` (the compiler sits below it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from relayflow.compiler.registry import EMITTERS
from relayflow.definition.models import STEP_TYPES

COMPILER = Path(__file__).resolve().parents[2] / "shared" / "relayflow" / "compiler"
#: The modules above the emitter protocol: only the driver side may import them.
UPPER = {
    "relayflow.compiler",
    "relayflow.compiler.compile",
    "relayflow.compiler.driver",
    "relayflow.compiler.scope",
    "relayflow.compiler.registry",
    "relayflow.compiler.kinds",
}
#: Module → what it must not import (besides the upper modules above).
BELOW_THE_DRIVER = {
    **{f"kinds/{p.name}": () for p in (COMPILER / "kinds").glob("*.py")},
    "on_error.py": (),
    "compensation.py": (),
    "options.py": (),
    "engine.py": ("relayflow.compiler.options",),
    "plan.py": (),
    "emitter.py": (),
    "docsize.py": (),
}


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level, lazily or under TYPE_CHECKING."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("name", sorted(BELOW_THE_DRIVER))
def test_modules_below_the_driver_import_nothing_above_it(name):
    imported = imported_modules(COMPILER / name)
    forbidden = UPPER | set(BELOW_THE_DRIVER[name])
    assert not imported & forbidden, f"{name} imports {sorted(imported & forbidden)}"


def test_the_compiler_imports_nothing_of_relayflow_ai():
    for path in COMPILER.rglob("*.py"):
        imported = imported_modules(path)
        assert not {m for m in imported if m.startswith("relayflow.ai")}, path


def test_the_registry_has_a_kind_for_every_step_type():
    assert set(EMITTERS) == set(STEP_TYPES)
