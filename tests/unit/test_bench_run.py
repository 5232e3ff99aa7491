"""bench/run.py, the driver of ``make bench``: every bench runs to its end whatever another
did, its logs go to a file and not to the screen, and the exit status says whether any failed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from relayflow_testing import ROOT


def load_driver() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module
    spec.loader.exec_module(module)
    return module


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text("import os, sys, time\n" + body)
    return str(path)


@pytest.fixture
def driver() -> ModuleType:
    return load_driver()


def test_a_failing_bench_does_not_stop_the_next_and_the_run_fails_at_the_end(
    driver: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a bench that fails with a traceback, then one that logs JSON and prints a table
    failing = script(tmp_path, "failing", "raise RuntimeError('ReadTimeout: timed out')\n")
    chatty = script(
        tmp_path,
        "chatty",
        'print(\'{"level": "INFO", "message": "step done"}\', file=sys.stderr)\n'
        "print('size  cpu s')\n"
        "print('log level', os.environ['POWERTOOLS_LOG_LEVEL'])\n",
    )
    monkeypatch.setattr(driver, "BENCHES", [driver.Bench(failing), driver.Bench(chatty)])
    out = tmp_path / "out"
    # When the driver runs them all
    status = driver.main([], out)
    shown = capsys.readouterr().out
    # Then both ran, the second's table is shown with its logs quieted, and the run failed
    assert status == 1
    assert "size  cpu s" in shown and "log level WARNING" in shown
    assert (out / "chatty.out").read_text().startswith("size  cpu s")
    # And the logs and the traceback are in the benches' log files, not on the screen
    assert "step done" in (out / "chatty.log").read_text()
    assert "Traceback" in (out / "failing.log").read_text()
    assert "step done" not in shown and "Traceback" not in shown
    # And the summary names the failure, why and where its log is
    assert "failing          FAILED: exit 1" in shown
    assert "RuntimeError: ReadTimeout: timed out" in shown
    assert "chatty           ok" in shown
    assert "1 of 2 benches ran to their end" in shown


def test_benches_that_all_pass_exit_0(
    driver: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok = script(tmp_path, "fine", "print('ok')\n")
    monkeypatch.setattr(driver, "BENCHES", [driver.Bench(ok)])
    assert driver.main([], tmp_path / "out") == 0


def test_a_hung_bench_is_ended_at_its_limit_and_counts_as_failed(
    driver: ModuleType, tmp_path: Path
) -> None:
    # Given a bench that would sleep far past its limit
    hung = driver.Bench(
        script(tmp_path, "hung", "print('started', flush=True)\ntime.sleep(600)\n"), limit_seconds=1
    )
    # When it runs
    outcome = driver.run_one(hung, tmp_path)
    # Then it was ended and counts as failed
    assert outcome.timed_out and not outcome.ok
    assert "FAILED: still running after 1 s" in driver.summary([outcome], tmp_path)


def test_make_bench_runs_every_bench_of_the_folder(driver: ModuleType) -> None:
    # Every bench script but the driver and the cost bench's helper is in the list
    scripts = {p.name for p in (ROOT / "bench").glob("*.py")} - {"run.py", "cost_engines.py"}
    listed = {bench.script for bench in driver.BENCHES}
    assert listed <= scripts
    assert {
        "compile_bench.py",
        "cost_bench.py",
        "serve_bench.py",
        "chain_bench.py",
        "scaling_bench.py",
        "cold_start.py",
    } <= listed
    assert "bench/run.py" in (ROOT / "Makefile").read_text()
