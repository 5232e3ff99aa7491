"""The built layer ships bytecode the functions' runtime loads without writing or stat-checking.

Lambda mounts ``/opt`` read-only: a layer without ``.pyc`` makes every cold start compile each
module from source (and throw the result away). ``shared/Makefile`` compiles the layer with
python3.12 into hash-based, unchecked ``.pyc`` (PEP 552: flags ``0b01``), so the interpreter
takes them as they are. This checks the build, not the Makefile: each ``.py`` of the layer has
its ``cpython-312`` file, with python3.12's magic number, the unchecked-hash flags, and the path
the module has on Lambda (``/opt/python/...``) as its code's file name.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from import_graph import reachable
from sam_template import function_resources, load_template, python312

FUNCTIONS = function_resources(load_template())

# Run by python3.12 over the built layer: one line of JSON with what is wrong.
_INSPECT = r"""
import importlib.util, json, marshal, pathlib, sys
root = pathlib.Path(sys.argv[1])
magic = importlib.util.MAGIC_NUMBER
report = {"sources": 0, "missing": [], "magic": [], "flags": [], "paths": []}
for source in sorted(root.rglob("*.py")):
    report["sources"] += 1
    relative = source.relative_to(root)
    cached = pathlib.Path(importlib.util.cache_from_source(str(source)))
    if not cached.is_file():
        report["missing"].append(str(relative))
        continue
    data = cached.read_bytes()
    if data[:4] != magic:
        report["magic"].append(str(relative))
    if int.from_bytes(data[4:8], "little") != 0b01:
        report["flags"].append(str(relative))
    code = marshal.loads(data[16:])
    if code.co_filename != f"/opt/python/{relative}":
        report["paths"].append(f"{relative}: {code.co_filename}")
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def layer(sam_build: Path) -> Path:
    return sam_build / "RelayflowLayer" / "python"


@pytest.fixture(scope="module")
def bytecode_report(layer: Path) -> dict[str, object]:
    python = python312()
    if python is None:
        pytest.skip("no python3.12 found: the layer's bytecode is python3.12's")
    done = subprocess.run(
        [python, "-c", _INSPECT, str(layer)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_every_module_of_the_layer_has_unchecked_hash_bytecode_for_python312(bytecode_report):
    report = bytecode_report
    assert report["sources"] > 1000  # pydantic, Powertools, boto-free deps and relayflow
    # Each source has its .pyc, python3.12's, unchecked-hash, recorded at its Lambda path
    assert report["missing"] == []
    assert report["magic"] == []
    assert report["flags"] == []
    assert report["paths"] == []


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_every_relayflow_module_a_handler_imports_is_precompiled(kind, layer, sam_build):
    closure = reachable(
        sam_build / FUNCTIONS[kind] / "app.py", [sam_build / FUNCTIONS[kind], layer]
    )
    in_layer = [path for path in closure.modules.values() if layer in path.parents]
    assert in_layer
    for path in in_layer:
        cached = path.parent / "__pycache__" / f"{path.stem}.cpython-312.pyc"
        assert cached.is_file(), f"{kind}: {path.relative_to(layer)} has no bytecode"


def test_the_layer_leaves_out_the_cli_runner(layer):
    assert not (layer / "relayflow" / "runner.py").exists()
    assert not (layer / "relayflow" / "cli").exists()
    assert (layer / "relayflow" / "settings.py").is_file()
