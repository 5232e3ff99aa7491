"""The code function's handler, invoked with the events/code/ samples `sam local invoke` uses."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from relayflow_testing import moto_table

from relayflow.errors import CodeError, CodeLimitExceeded

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = SimpleNamespace(function_name="relayflow-code", aws_request_id="req-1")


@pytest.fixture(autouse=True)
def step_results_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The code function records its step's result (relayflow.steps.idempotency): moto, in
    process, answers for the table; each test's samples act afresh."""
    with moto_table(monkeypatch):
        yield


def load_handler() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fn_code", ROOT / "functions/code/app.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_event(case: str) -> dict[str, Any]:
    return json.loads((ROOT / "events" / "code" / f"{case}.json").read_text())


def test_the_handler_returns_what_the_code_returns():
    # Given an order with two lines, a 10% customer discount and a threshold of 300
    event = load_event("score_order")
    # When the code function runs the step
    result = load_handler().handler(event, CONTEXT)
    # Then its output is the code's return value: 2*120 + 3*25 = 315, less 10%
    assert result["output"] == {"total": 315.0, "net": 283.5, "big": False, "run": "run-0042"}


def test_the_handler_raises_a_code_error_at_the_users_line():
    with pytest.raises(CodeError) as info:
        load_handler().handler(load_event("error_line"), CONTEXT)
    assert type(info.value).__name__ == "Relayflow.CodeError"
    assert info.value.message == "KeyError at line 3: 'discount'"
    # What Lambda reports (str) is the message, then the details a Catch keeps
    from relayflow.errors import split_details

    assert split_details(str(info.value)) == (info.value.message, info.value.details)


def test_the_handler_reports_a_syntax_error_at_the_users_line():
    with pytest.raises(CodeError) as info:
        load_handler().handler(load_event("syntax_error"), CONTEXT)
    assert info.value.details["kind"] == "syntax"
    assert info.value.details["line"] == 2


def test_the_handler_stops_a_runaway_loop_at_the_steps_cpu_limit():
    with pytest.raises(CodeLimitExceeded) as info:
        load_handler().handler(load_event("runaway_loop"), CONTEXT)
    assert type(info.value).__name__ == "Relayflow.CodeLimitExceeded"
    assert info.value.details == {"limit": "cpu", "value": 1, "unit": "s"}
