"""The CLI's quick answers: ``--version``, and ``--help`` without importing the definition
models, the compiler or boto3 (what made it slow), checked by module, not by the clock."""

from __future__ import annotations

import subprocess
import sys

import pytest

from relayflow import __version__
from relayflow.cli import main


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"relayflow {__version__}"


def test_help_imports_nothing_heavy():
    probe = (
        "import sys\n"
        "from relayflow.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ['relayflow.definition.models', 'relayflow.compiler', 'boto3', 'yaml']\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert "usage: relayflow" in done.stdout
    assert done.stderr.strip() == "[]"


def test_a_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["validate"])
    assert exited.value.code == 2
    assert "usage:" in capsys.readouterr().err
