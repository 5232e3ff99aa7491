"""The import rules of the house (docs/development.md#the-packages).

- import-linter's contracts in pyproject.toml ``[tool.importlinter]``: the layers (imports run
  down), the independent siblings (step kinds, CLI command groups, local compat families, AI
  providers) and the composition roots nothing below imports;
- no import circle between two modules of ``relayflow``, ``TYPE_CHECKING`` imports and imports
  inside functions included (a lazy import is still an edge);
- no module imports another module's private (underscored) name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest
from graphs import strongly_connected
from importlinter import api as importlinter  # configures import-linter's adapters
from importlinter.application import use_cases

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "shared" / "relayflow"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("relayflow", cache_dir=None)


def test_the_import_linter_contracts_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    kept = use_cases.lint_imports(
        config_filename=str(ROOT / "pyproject.toml"), cache_dir=None, no_logo=True
    )
    report = capsys.readouterr().out
    assert kept, report
    assert "0 broken" in report
    # Every contract of the configuration ran (none was skipped as unknown).
    assert "Contracts: 6 kept" in report


def test_the_layers_contract_names_every_top_level_package(graph: grimp.ImportGraph) -> None:
    """A new top-level package has to be given its layer, or it escapes the rules."""
    config = importlinter.read_configuration(str(ROOT / "pyproject.toml"))
    (layers,) = [c for c in config["contracts_options"] if c["id"] == "layers"]
    named = {
        name.strip()
        for layer in layers["layers"]
        for part in layer.replace(":", "|").split("|")
        if (name := part.strip())
    }
    top_level = {m.split(".")[1] for m in graph.modules if m.count(".") >= 1}
    assert top_level - named == set()


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    return [component for component in strongly_connected(edges) if len(component) > 1]


def test_no_two_modules_import_each_other_even_through_others(graph: grimp.ImportGraph) -> None:
    assert circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    """The finder above is what the previous test trusts: a graph with one loop has one."""
    loop = grimp.ImportGraph()
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")]:
        loop.add_import(importer=importer, imported=imported)
    assert circles(loop) == [["p.a", "p.b", "p.c"]]


def private_imports(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(
                "relayflow"
            ):
                continue
            for alias in node.names:
                name = alias.name
                if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{name}")
    return found


@pytest.mark.parametrize("folder", ["shared/relayflow", "functions"])
def test_no_module_imports_another_modules_private_name(folder: str) -> None:
    assert private_imports(ROOT / folder) == []
