"""Circuit breaker decisions without a table: ids, settings, which errors count, run verdicts,
what callers see, and which write each outcome asks the store for (a recording fake store)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest

from relayflow.dal.breakers import BreakerItem, iso_time
from relayflow.dal.errors import DataAccessError
from relayflow.errors import (
    CircuitOpen,
    CodeError,
    ExpressionError,
    HttpError,
    InvalidArgsError,
    SsrfBlocked,
    Throttled,
    ToolNotFound,
    TransientError,
)
from relayflow.reliability.breakers import (
    BREAKER_ID_PATTERN,
    Admission,
    BreakerInfo,
    BreakerPolicy,
    Breakers,
    counts_as_failure,
    effective_state,
    guard_tool_call,
    is_breaker_id,
    run_error,
    run_outcome,
    tool_breaker_id,
    workflow_breaker_id,
)

NOW = 1_900_000_000.0


class FakeStore:
    """Answers reads with ``item`` and records every write; ``fail`` makes each call raise."""

    def __init__(self, item: BreakerItem | None = None, *, fail: bool = False) -> None:
        self.item = item
        self.fail = fail
        self.writes: list[tuple[str, dict[str, Any]]] = []

    def _called(self, name: str, **kwargs: Any) -> None:
        if self.fail:
            raise DataAccessError(f"{name}: ResourceNotFoundException")
        if name != "get":
            self.writes.append((name, kwargs))

    def get(self, tenant: str, breaker_id: str) -> BreakerItem | None:
        self._called("get")
        return self.item

    def add_failure(self, tenant: str, breaker_id: str, **kwargs: Any) -> BreakerItem | None:
        self._called("add_failure", **kwargs)
        if self.item is not None and self.item.state != "closed":
            return None
        failures = (self.item.consecutive_failures if self.item else 0) + 1
        self.item = item(state="closed", consecutive_failures=failures)
        return self.item

    def trip(self, item: BreakerItem, **kwargs: Any) -> bool:
        self._called("trip", **kwargs)
        return True

    def take_trial(self, tenant: str, breaker_id: str, **kwargs: Any) -> BreakerItem | None:
        self._called("take_trial", **kwargs)
        return item(state="half_open", trial_token=kwargs["token"])

    def close(self, tenant: str, breaker_id: str, **kwargs: Any) -> bool:
        self._called("close", **kwargs)
        return True

    def release_trial(self, tenant: str, breaker_id: str, **kwargs: Any) -> bool:
        self._called("release_trial", **kwargs)
        return True


def item(**values: Any) -> BreakerItem:
    return BreakerItem(
        tenant="acme",
        breaker_id="tool:http.billing",
        breaker_kind="tool",
        **{"failure_threshold": 3, "cooldown_seconds": 60, **values},
    )


def breakers(store: FakeStore) -> Breakers:
    return Breakers(store, clock=lambda: NOW)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- ids, settings


def test_breaker_ids_name_a_catalogue_tool_or_a_workflow():
    assert tool_breaker_id("http.billing.create_invoice") == "tool:http.billing.create_invoice"
    assert workflow_breaker_id("nightly-report") == "workflow:nightly-report"
    for valid in ("tool:aws.dynamodb.put_item", "tool:http.billing", "workflow:a_b-c"):
        assert is_breaker_id(valid), valid
    for invalid in ("tool:gcp.x", "workflow:", "workflow:UPPER", "tool:http.a#b", "other:x", 3):
        assert not is_breaker_id(invalid), invalid


def test_every_tool_name_a_definition_accepts_has_a_breaker_id():
    from relayflow.definition.models import ToolStep

    tool_pattern = ToolStep.model_fields["tool"].metadata[0].pattern
    for name in ("aws.sqs.send_message", "http.billing", "http.pay-ments.charge_card"):
        assert re.match(tool_pattern, name)
        assert re.match(BREAKER_ID_PATTERN, tool_breaker_id(name)), name


def test_the_policy_reads_a_step_config_with_the_definitions_defaults():
    from relayflow.definition.models import BreakerSettings

    defaults = BreakerSettings()
    assert BreakerPolicy.from_config({}) == BreakerPolicy(
        defaults.failure_threshold, defaults.cooldown_seconds
    )
    assert BreakerPolicy.from_config({"failure_threshold": 2, "cooldown_seconds": 5}) == (
        BreakerPolicy(2, 5)
    )
    for off in (None, "on", [], {"failure_threshold": 0}, {"cooldown_seconds": True}):
        assert BreakerPolicy.from_config(off) is None, off


# ----------------------------------------------------------------------------- what counts


@pytest.mark.parametrize(
    ("error", "counts"),
    [
        (HttpError("HTTP 500", status=500), True),
        (HttpError("HTTP 401", status=401), True),
        (CodeError("boom"), True),
        (RuntimeError("unexpected"), True),
        (TransientError("timed out"), False),
        (TransientError("HTTP 429", status=429), False),
        (Throttled("slot"), False),
        (CircuitOpen("open"), False),
        (InvalidArgsError("bad"), False),
        (ExpressionError("bad template"), False),
        (ToolNotFound("nope"), False),
        (SsrfBlocked("private address"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
def test_only_errors_about_the_tools_health_count(error, counts):
    assert counts_as_failure(error) is counts


@pytest.mark.parametrize(
    ("status", "error", "outcome"),
    [
        ("succeeded", None, "success"),
        ("failed", "Relayflow.HttpError", "failure"),
        ("failed", "States.TaskFailed", "failure"),
        ("timed_out", "States.Timeout", "failure"),
        ("failed", "Relayflow.Transient", "neutral"),
        ("failed", "Relayflow.CircuitOpen", "neutral"),
        ("aborted", "Relayflow.Cancelled", "neutral"),
        ("aborted", None, "neutral"),
    ],
)
def test_a_finished_runs_verdict(status, error, outcome):
    assert run_outcome(status, error) == outcome


def test_a_runs_error_keeps_the_message_and_drops_the_stack_trace():
    cause = json.dumps(
        {
            "errorMessage": "HTTP 500 from billing, token=abc123",
            "errorType": "Relayflow.HttpError",
            "stackTrace": ["  File x.py, line 1"],
        }
    )
    text = run_error("failed", "Relayflow.HttpError", cause)
    assert text == "Relayflow.HttpError: HTTP 500 from billing, token=***"
    assert run_error("timed_out", "States.Timeout", None) == "States.Timeout"
    assert run_error("failed", None, "plain words") == "failed: plain words"


# ----------------------------------------------------------------------------- views


def test_an_open_breaker_is_half_open_once_its_cooldown_is_over():
    tripped = item(state="open", opened_at=NOW - 10, reopens_at=NOW + 50, consecutive_failures=3)
    assert effective_state(None, NOW) == "closed"
    assert effective_state(tripped, NOW) == "open"
    assert effective_state(tripped, NOW + 50) == "half_open"
    info = BreakerInfo.from_item(tripped, NOW)
    assert (info.state, info.kind, info.consecutive_failures) == ("open", "tool", 3)
    assert (info.opened_at, info.reopens_at) == (iso_time(NOW - 10), iso_time(NOW + 50))
    trial = item(state="half_open", reopens_at=NOW - 1, trial_lease_until=NOW + 120)
    assert BreakerInfo.from_item(trial, NOW).reopens_at == iso_time(NOW + 120)
    closed = BreakerInfo.from_item(item(state="closed", opened_at=NOW - 99), NOW)
    assert (closed.opened_at, closed.reopens_at, closed.trial_until) == (None, None, None)


# ----------------------------------------------------------------------------- decisions


def test_a_closed_breaker_admits_and_a_clean_success_writes_nothing():
    store = FakeStore()
    subject = breakers(store)
    assert subject.guard("acme", "tool:http.billing", BreakerPolicy(), lambda: 42) == 42
    assert store.writes == []


def test_a_success_after_failures_forgets_them():
    store = FakeStore(item(state="closed", consecutive_failures=2))
    breakers(store).guard("acme", "tool:http.billing", BreakerPolicy(), lambda: "ok")
    assert store.writes == [("close", {"token": None, "now": NOW})]


def test_an_open_breaker_refuses_before_the_call():
    store = FakeStore(item(state="open", reopens_at=NOW + 30))
    calls: list[int] = []
    with pytest.raises(CircuitOpen) as refused:
        breakers(store).guard("acme", "tool:http.billing", BreakerPolicy(), lambda: calls.append(1))
    assert calls == []
    assert refused.value.details["reopens_at"] == iso_time(NOW + 30)
    assert store.writes == []


def test_the_failure_that_reaches_the_threshold_trips_it():
    store = FakeStore(item(state="closed", consecutive_failures=2))
    policy = BreakerPolicy(failure_threshold=3, cooldown_seconds=60)
    assert breakers(store).failed(Admission("acme", "tool:http.billing"), policy, "boom") is True
    assert [name for name, _ in store.writes] == ["add_failure", "trip"]
    assert store.writes[1][1]["from_state"] == "closed"


def test_a_cooled_down_breaker_admits_a_trial_whose_neutral_end_hands_it_on():
    store = FakeStore(item(state="open", reopens_at=NOW - 1))
    subject = breakers(store)
    with pytest.raises(TransientError):
        subject.guard(
            "acme",
            "tool:http.billing",
            BreakerPolicy(),
            lambda: (_ for _ in ()).throw(TransientError("timeout")),
        )
    (take, release) = store.writes
    assert take[0] == "take_trial" and take[1]["lease_until"] == NOW + 120
    assert release == ("release_trial", {"token": take[1]["token"], "now": NOW})


def test_an_unreachable_table_never_holds_a_call_back_or_changes_its_outcome():
    store = FakeStore(fail=True)
    subject = breakers(store)
    assert subject.guard("acme", "tool:http.billing", BreakerPolicy(), lambda: "ok") == "ok"
    with pytest.raises(HttpError):
        subject.guard(
            "acme",
            "tool:http.billing",
            BreakerPolicy(),
            lambda: (_ for _ in ()).throw(HttpError("HTTP 500", status=500)),
        )


def test_a_step_without_a_tenant_or_a_breaker_calls_straight_through(monkeypatch):
    def unreachable() -> Breakers:
        raise AssertionError("no breaker may be consulted")

    monkeypatch.setattr("relayflow.reliability.breakers.get_breakers", unreachable)
    doc = {"run": {"tenant": "acme"}}
    assert guard_tool_call(doc, "http.billing", None, lambda: 1) == 1
    assert guard_tool_call({"run": {}}, "http.billing", {"failure_threshold": 1}, lambda: 2) == 2
    assert guard_tool_call({"run": {"tenant": "a#b"}}, "http.billing", {}, lambda: 3) == 3


def test_a_tool_step_without_a_breaker_loads_no_breaker_code():
    code = (
        "import sys\n"
        "from relayflow.errors import ToolNotFound\n"
        "from relayflow.steps import tool\n"
        "from relayflow.steps.boundary import REAL\n"
        "event = {'step': {'key': 's', 'type': 'tool', 'config': {'tool': 'gcp.x'}},\n"
        "         'doc': {'run': {'id': 'r', 'workflow_id': 'w', 'tenant': 'acme'}}}\n"
        "try:\n"
        "    tool.run(event, REAL)\n"
        "except ToolNotFound:\n"
        "    pass\n"
        "print('relayflow.reliability.breakers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
