"""AWS's ASL validators from Python: ``amazon-states-language-service`` (the language service
behind the AWS Toolkit) and ``asl-validator``, both run by ``tools/asl/validate.mjs`` in ONE
node process for any number of documents.

``make asl-tools`` installs them (versions pinned by ``tools/asl/package-lock.json``) into
``.venv/tools/asl``. Known false positives of a validator are dropped in exactly one place,
:mod:`asl_validator_exceptions`, never by skipping a document.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asl_validator_exceptions import KnownFalsePositive, known_false_positive

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tools" / "asl" / "validate.mjs"
LOCKFILE = ROOT / "tools" / "asl" / "package-lock.json"
#: Where ``make asl-tools`` installs the validators (``RELAYFLOW_ASL_TOOLS`` overrides it).
TOOLS_DIR = Path(os.environ.get("RELAYFLOW_ASL_TOOLS", ROOT / ".venv" / "tools" / "asl"))
#: Set by ``make test``: a missing tool folder fails the tests instead of skipping them.
REQUIRE_ENV = "RELAYFLOW_REQUIRE_ASL_TOOLS"


@dataclass(frozen=True)
class Diagnostic:
    validator: str  # "language_service" or "asl_validator"
    message: str
    code: str | None = None
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = f" at line {self.line}:{self.column}" if self.line is not None else ""
        code = f" [{self.code}]" if self.code else ""
        return f"{self.validator}{code}{where}: {self.message}"


@dataclass
class Report:
    """What both validators said about one document."""

    name: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: Diagnostics dropped as known validator bugs, with the exception that explains each.
    excused: list[tuple[Diagnostic, KnownFalsePositive]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.diagnostics


def missing_tools() -> str | None:
    """Why the validators cannot run here (``None`` when they can)."""
    if shutil.which("node") is None:
        return "node is not on PATH (Node 20 runs the ASL validators)"
    installed = TOOLS_DIR / "package-lock.json"
    if not (TOOLS_DIR / "node_modules").is_dir() or not installed.is_file():
        return f"the ASL validators are not installed in {TOOLS_DIR}: run `make asl-tools`"
    if installed.read_bytes() != LOCKFILE.read_bytes():
        return f"{TOOLS_DIR} was installed from another lockfile: run `make asl-tools`"
    return None


def _run_driver(args: Sequence[str], stdin: str | None) -> list[dict[str, Any]]:
    completed = subprocess.run(
        ["node", str(DRIVER), "--tools", str(TOOLS_DIR), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"the ASL validator driver failed: {completed.stderr.strip()}")
    return json.loads(completed.stdout)


def _reports(raw: list[dict[str, Any]], documents: Mapping[str, Any]) -> dict[str, Report]:
    reports: dict[str, Report] = {}
    for entry in raw:
        report = Report(entry["name"])
        for validator in ("language_service", "asl_validator"):
            for item in entry[validator]:
                diagnostic = Diagnostic(
                    validator,
                    item["message"],
                    None if item.get("code") is None else str(item["code"]),
                    item.get("line"),
                    item.get("column"),
                )
                excuse = known_false_positive(diagnostic, documents.get(report.name))
                if excuse is None:
                    report.diagnostics.append(diagnostic)
                else:
                    report.excused.append((diagnostic, excuse))
        reports[report.name] = report
    return reports


def validate_definitions(
    definitions: Mapping[str, Mapping[str, Any]], *, fresh_ajv: bool = False
) -> dict[str, Report]:
    """Validate ASL definitions (name → ASL dict) with both validators in one node process.

    Each definition is sent as strict JSON: a non-finite number (``NaN``, ``Infinity``) is
    not JSON, so it is reported as a diagnostic of the document rather than sent as is.
    ``fresh_ajv`` lets asl-validator compile its schemas per document, as the library does
    by itself (the driver otherwise compiles them once; see validate.mjs)."""
    documents: list[dict[str, Any]] = []
    refused: dict[str, Report] = {}
    for name, definition in definitions.items():
        try:
            json.dumps(definition, allow_nan=False)
        except ValueError as exc:
            refused[name] = Report(
                name, [Diagnostic("json", f"the definition is not JSON: {exc}", "NON_FINITE")]
            )
            continue
        documents.append({"name": name, "definition": definition})
    args = ["--fresh-ajv"] if fresh_ajv else []
    raw = _run_driver(args, json.dumps(documents)) if documents else []
    return {**_reports(raw, definitions), **refused}


def validate_files(paths: Sequence[Path]) -> dict[str, Report]:
    """Validate ASL files as written (line numbers are the file's), in one node process."""
    if not paths:
        return {}
    raw = _run_driver([str(p) for p in paths], None)
    documents = {str(p): json.loads(Path(p).read_text(encoding="utf-8")) for p in paths}
    return _reports(raw, documents)
