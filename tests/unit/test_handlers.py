"""Each function's handler, invoked with the same events/ files `sam local invoke` would use."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from relayflow_testing import load_event, load_handler

from relayflow.errors import ExpressionError, InvalidArgsError

ROOT = Path(__file__).resolve().parents[2]


CONTEXT = SimpleNamespace(function_name="relayflow-test", aws_request_id="req-1")


def test_every_function_has_events_and_a_handler():
    functions = sorted(p.name for p in (ROOT / "functions").iterdir() if p.is_dir())
    assert functions, "no functions found"
    for name in functions:
        assert callable(load_handler(name).handler), name
        assert list((ROOT / "events" / name).glob("*.json")), f"events/{name}/ has no sample"


def test_condition_handler_evaluates_cel_against_the_document():
    result = load_handler("condition").handler(load_event("condition", "native_fallback"), CONTEXT)
    assert result == {"output": {"result": True}, "branch": None}


def test_condition_handler_raises_a_named_error_for_a_missing_field():
    with pytest.raises(ExpressionError) as info:
        load_handler("condition").handler(load_event("condition", "error_missing_field"), CONTEXT)
    assert type(info.value).__name__ == "Relayflow.ExpressionError"


def test_transform_handler_renders_typed_and_interpolated_values():
    result = load_handler("transform").handler(load_event("transform", "price_line"), CONTEXT)
    assert result == {
        "output": {"sku": "KB-01", "position": 0, "subtotal": 240.0, "label": "KB-01 x2"},
        "branch": None,
    }


def test_transform_handler_refuses_a_malformed_payload_as_invalid_args():
    with pytest.raises(InvalidArgsError) as info:
        load_handler("transform").handler(load_event("transform", "malformed_payload"), CONTEXT)
    assert type(info.value).__name__ == "Relayflow.InvalidArgs"
