"""Static import analysis of built Lambda code (``ast`` over the files, nothing imported).

:func:`reachable` follows every import a handler can execute, from its ``app.py`` through the
layer's ``relayflow`` package: module-level imports and lazy ones (``import`` statements inside
functions, which run at call time), plus the targets of PEP 562 ``__getattr__`` maps (module
strings a package that calls ``importlib.import_module`` holds). ``if TYPE_CHECKING:`` blocks never
run and are skipped; an import guarded by ``except ImportError`` is optional. Third-party
packages are followed only to their top-level name: each must be in the layer or the runtime.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: What the Lambda python3.12 runtime provides besides the standard library (/var/runtime).
RUNTIME_PACKAGES = frozenset(
    {"boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six", "awslambdaric"}
)
#: Our own code, followed module by module; everything else is checked by its top-level name.
OWN_PACKAGES = ("relayflow",)


@dataclass(frozen=True)
class Import:
    """One import statement's target, where it is and whether it runs at import time."""

    module: str
    importer: str
    line: int
    lazy: bool
    optional: bool


@dataclass
class Closure:
    """What a handler can import: our modules reached, and the imports that resolve nowhere."""

    modules: dict[str, Path] = field(default_factory=dict)
    unresolved: list[Import] = field(default_factory=list)
    third_party: set[str] = field(default_factory=set)


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: list[Import] = []
        self.strings: list[str] = []
        self._depth = 0
        self._optional = 0
        self.uses_import_module = False

    # a function body runs at call time: its imports are lazy
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name == "TYPE_CHECKING":
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        catches = {getattr(h.type, "id", None) for h in node.handlers if h.type is not None} | {
            getattr(e, "id", None)
            for h in node.handlers
            if isinstance(h.type, ast.Tuple)
            for e in h.type.elts
        }
        optional = bool(catches & {"ImportError", "ModuleNotFoundError", "Exception"})
        self._optional += optional
        for child in node.body:
            self.visit(child)
        self._optional -= optional
        for child in [*node.handlers, *node.orelse, *node.finalbody]:
            self.visit(child)

    def _add(self, module: str, node: ast.stmt) -> None:
        self.found.append(
            Import(module, self.module, node.lineno, self._depth > 0, self._optional > 0)
        )

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            parts = self.package.split(".")
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        self._add(base, node)
        # ``from package import name`` imports the submodule ``package.name`` when it is one
        for alias in node.names:
            if alias.name != "*":
                self._add(f"{base}.{alias.name}?", node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and node.value.startswith(OWN_PACKAGES):
            self.strings.append(node.value)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "import_module":
            self.uses_import_module = True


def _find(module: str, roots: list[Path]) -> Path | None:
    relative = Path(*module.split("."))
    for root in roots:
        for candidate in (root / relative / "__init__.py", root.joinpath(f"{relative}.py")):
            if candidate.is_file():
                return candidate
        if (root / relative).is_dir():  # a namespace package
            return root / relative
    return None


def _top_level_exists(name: str, roots: list[Path]) -> bool:
    for root in roots:
        if (root / name).is_dir() or (root / f"{name}.py").is_file():
            return True
        if list(root.glob(f"{name}.*.so")) or list(root.glob(f"{name}.*.pyd")):
            return True
    return False


def reachable(handler: Path, roots: list[Path]) -> Closure:
    """Everything ``handler`` (a function's ``app.py``) can import, looked up in ``roots``
    (the function's folder, then the layer's ``python`` folder)."""
    closure = Closure()
    pending: list[tuple[str, Path]] = [(handler.stem, handler)]
    seen: set[str] = set()
    stdlib = set(sys.stdlib_module_names)
    while pending:
        name, path = pending.pop()
        if name in seen or path.is_dir():
            continue
        seen.add(name)
        closure.modules[name] = path
        collector = _Collector(name, path.name == "__init__.py")
        collector.visit(ast.parse(path.read_text(), str(path)))
        imports = list(collector.found)
        if collector.uses_import_module:
            # the module strings it may hand to import_module (other strings name no module)
            imports += [Import(s, name, 0, True, True) for s in collector.strings if " " not in s]
        for found in imports:
            module, maybe_submodule = found.module.rstrip("?"), found.module.endswith("?")
            top = module.split(".")[0]
            if not module.startswith(OWN_PACKAGES) and top != handler.stem:
                if maybe_submodule:
                    continue
                if top in stdlib or top in RUNTIME_PACKAGES or _top_level_exists(top, roots):
                    closure.third_party.add(top)
                elif not found.optional:
                    closure.unresolved.append(found)
                continue
            target = _find(module, roots)
            if target is None:
                if not maybe_submodule and not found.optional:
                    closure.unresolved.append(found)
                continue
            pending.append((module, target))
            # importing a.b.c runs a/__init__.py and a/b/__init__.py first
            parts = module.split(".")
            for i in range(1, len(parts)):
                parent = _find(".".join(parts[:i]), roots)
                if parent is not None:
                    pending.append((".".join(parts[:i]), parent))
    return closure
