"""Every module a deployed handler can import is in the built artifact (``sam build``).

The closure is computed statically (``import_graph.py``: ``ast`` over the built files, so the
answer does not depend on what happened to be imported first): from each function's ``app.py``
through the built layer's ``relayflow`` package, module-level and lazy imports (``import``
inside a function runs at call time, on the Lambda, where only the layer and the runtime are).

On the code before the history reading moved to ``relayflow.executions.history``, this failed:
``relayflow.control.timeline`` (``GET /runs/{id}``, the recorder's timeline) and
``relayflow.cost.counts`` (the recorder's cost counts on every Standard run end) imported
``relayflow.local.history`` lazily, and ``relayflow.cost.logs`` imported
``relayflow.local.step_logs``; the layer (rightly) leaves ``relayflow.local`` out, so on AWS
each was a ``ModuleNotFoundError`` at call time.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from import_graph import Closure, reachable
from sam_template import ROOT, function_resources, load_template

FUNCTIONS = function_resources(load_template())
#: Never on the deployed path: the local runtime, the CLI (and its runner), tests and test-only
#: packages.
NOT_DEPLOYED = (
    "relayflow.local",
    "relayflow.cli",
    "relayflow.runner",
    "tests",
    "moto",
    "pytest",
)


@pytest.fixture(scope="module")
def closures(sam_build: Path) -> dict[str, Closure]:
    layer = sam_build / "RelayflowLayer" / "python"
    return {
        kind: reachable(sam_build / logical_id / "app.py", [sam_build / logical_id, layer])
        for kind, logical_id in FUNCTIONS.items()
    }


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_every_import_a_handler_can_run_resolves_in_the_layer_or_the_runtime(kind, closures):
    closure = closures[kind]
    # Given the handler's import graph in the build, lazy imports included
    assert "app" in closure.modules and any(m.startswith("relayflow") for m in closure.modules)
    # Then each import resolves in the function's folder, the layer or Lambda's runtime
    missing = [f"{i.module.rstrip('?')} ({i.importer}:{i.line})" for i in closure.unresolved]
    assert not missing, missing
    # And none of them is the local runtime, the CLI or test code
    forbidden = sorted(
        m
        for m in [*closure.modules, *closure.third_party]
        if m == "moto" or m.startswith(NOT_DEPLOYED)
    )
    assert not forbidden, forbidden


def test_the_closure_follows_lazy_imports_and_reports_what_the_layer_lacks(tmp_path):
    # Given a handler whose module imports a module lazily that the layer does not hold
    (tmp_path / "fn").mkdir()
    (tmp_path / "fn" / "app.py").write_text("from relayflow import timeline\n")
    package = tmp_path / "layer" / "relayflow"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "timeline.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from relayflow.typing_only import X\n"
        "try:\n    import optional_thing\nexcept ImportError:\n    optional_thing = None\n"
        "def steps():\n    from relayflow.local.history import build_state_runs\n"
    )
    closure = reachable(tmp_path / "fn" / "app.py", [tmp_path / "fn", tmp_path / "layer"])
    # Then the lazy import is reported, with where it is; typing-only and optional ones are not
    assert [(i.module, i.importer, i.lazy) for i in closure.unresolved] == [
        ("relayflow.local.history", "relayflow.timeline", True)
    ]
    assert set(closure.modules) == {"app", "relayflow", "relayflow.timeline"}


def _mib(size: int) -> float:
    return size / 2**20


def test_the_layer_size_docs_operations_states_is_the_built_layers(sam_build: Path, tmp_path):
    import re
    import zipfile

    # Given the figures docs/operations.md states for the layer
    text = " ".join((ROOT / "docs" / "operations.md").read_text().split())
    found = re.search(
        r"([\d.]+) MiB unzipped, ([\d.]+) MiB zipped \(deflate level 9\); the relayflow "
        r"package is ([\d.]+) MiB of it and the bytecode \(\.pyc\) ([\d.]+) MiB",
        text,
    )
    assert found, "docs/operations.md states no layer size"
    stated = [float(v) for v in found.groups()]
    # When the built layer is measured (and zipped as sam deploy uploads it)
    root = sam_build / "RelayflowLayer"
    files = [p for p in sorted(root.rglob("*")) if p.is_file()]
    archive = tmp_path / "layer.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zipped:
        for path in files:
            zipped.write(path, path.relative_to(root))
    package = root / "python" / "relayflow"
    measured = [
        _mib(sum(p.stat().st_size for p in files)),
        _mib(archive.stat().st_size),
        _mib(sum(p.stat().st_size for p in package.rglob("*") if p.is_file())),
        _mib(sum(p.stat().st_size for p in files if p.suffix == ".pyc")),
    ]
    # Then each stated figure is within 10% of the build's
    for figure, actual in zip(stated, measured, strict=True):
        assert abs(figure - actual) <= 0.1 * actual, (stated, [round(m, 2) for m in measured])
