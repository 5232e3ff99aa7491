"""An Express run's verdict is never shown apart from its status (issue 27, item 4).

An Express machine records its own end on the run item (``_record.failed`` /
``_record.succeeded``: status, error, cause, output); the maintenance sweep settles the run
minutes later and stores its ``outcome``. In between, a saga run that compensated read
``failed/failed``, and a run that continued with a fallback ``succeeded/succeeded``. Every
write to the run item is observed here (moto's DynamoDB requests, the machine's own UpdateItem
included), and after each one the run is read as ``GET /runs/{id}`` shows it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from relayflow_testing import Server, fresh_allowed_server

from relayflow.control.express_sweep import sweep_express_runs
from relayflow.control.service import ControlPlane
from relayflow.local import LocalRuntime

pytestmark = pytest.mark.integration

WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")


server = pytest.fixture(fresh_allowed_server, name="server")


@pytest.fixture
def item_writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[], Any]], list]]:
    """``watch(view)``: after every DynamoDB write moto serves from then on, ``view()`` is
    called and its result appended to the list returned."""
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action
    seen: list[Any] = []
    views: list[Callable[[], Any]] = []

    def observed(self: Any) -> Any:
        answer = original(self)
        if views and self._get_action().split(".")[-1] in WRITES:
            seen.append(views[0]())
        return answer

    def watch(view: Callable[[], Any]) -> list[Any]:
        views.append(view)
        return seen

    monkeypatch.setattr(DynamoHandler, "call_action", observed)
    yield watch
    views.clear()


def saga(server: Server) -> dict[str, Any]:
    """Reserve (compensated by a release), then a step that fails: the run compensates."""
    return {
        "id": "order",
        "engine": "express",
        "start": "reserve",
        "steps": {
            "reserve": {
                "type": "webhook_out",
                "url": f"{server.url}/reserve",
                "body": {},
                "timeout_seconds": 5,
                "retry": "none",
                "compensate": {
                    "type": "webhook_out",
                    "url": f"{server.url}/release",
                    "body": {},
                    "timeout_seconds": 5,
                },
                "on_success": "charge",
            },
            "charge": {
                "type": "code",
                "code": "raise ValueError('card declined')",
                "timeout_seconds": 5,
                "retry": "none",
            },
        },
    }


def with_fallback() -> dict[str, Any]:
    return {
        "id": "soft",
        "engine": "express",
        "start": "boom",
        "steps": {
            "boom": {
                "type": "code",
                "code": "raise ValueError('no stock')",
                "timeout_seconds": 5,
                "retry": "none",
                "on_error": {"action": "continue", "output": {"price": 0}},
            },
        },
    }


def observed_run(
    runtime: LocalRuntime,
    plane: ControlPlane,
    tenant: str,
    definition: dict[str, Any],
    watch: Callable[[Callable[[], Any]], list],
) -> tuple[list[tuple[str, str | None, Any]], Any]:
    """Run ``definition`` to its end and settle it by the sweep, reading the run after every
    item write: ``(status, outcome shown, outcome stored)`` per write, and the settled run."""
    plane.put_workflow(tenant, definition["id"], definition)
    started = plane.start_run(tenant, definition["id"], {})
    run_id = started.run_id

    def view() -> tuple[str, str | None, Any]:
        item = plane.dal.get_run(tenant, run_id)
        shown = plane.get_run(tenant, run_id)
        return shown.status, shown.outcome, item.outcome

    seen = watch(view)
    runtime.wait(plane.dal.get_run(tenant, run_id).execution_arn, timeout=60)
    assert plane.dal.get_run(tenant, run_id).native_status is not None  # the machine recorded
    assert (
        run_id
        in sweep_express_runs(plane, now=datetime.now(UTC) + timedelta(minutes=10))["settled"]
    )
    return list(seen), plane.get_run(tenant, run_id)


def test_a_compensated_express_run_never_reads_failed_as_its_verdict(
    runtime, plane, tenant, server, item_writes
):
    # Given an Express saga run that compensated its one step after the next one failed
    seen, settled = observed_run(runtime, plane, tenant, saga(server), item_writes)
    assert [r.path for r in server.requests] == ["/reserve", "/release"]
    assert (settled.status, settled.outcome) == ("failed", "compensated")
    # Then from the machine's own record of its end on, every read shows it compensated, with
    # the compensation and the original cause (not the report the machine failed with)
    ended = [entry for entry in seen if entry[0] != "running"]
    assert ended, seen
    assert {(status, shown) for status, shown, _ in ended} == {("failed", "compensated")}
    # And no write ever stored a failed verdict on the item
    assert "failed" not in {stored for _, _, stored in seen}
    assert settled.compensation is not None and settled.compensation.steps == ["reserve"]
    assert settled.cause is not None and "compensation" not in settled.cause


def test_an_unsettled_compensated_run_shows_its_compensation_and_cause(
    runtime, plane, tenant, server
):
    # Given an Express saga run its machine recorded, before the sweep settled it
    plane.put_workflow(tenant, "order", saga(server))
    run_id = plane.start_run(tenant, "order", {}).run_id
    runtime.wait(plane.dal.get_run(tenant, run_id).execution_arn, timeout=60)
    item = plane.dal.get_run(tenant, run_id)
    assert (item.status, item.recorded_status, item.outcome) == ("failed", None, None)
    # When it is read, alone and in the workflow's list
    detail = plane.get_run(tenant, run_id)
    (listed,) = plane.list_runs(tenant, "order").items
    # Then both show the verdict the sweep will store
    for shown in (detail, listed):
        assert (shown.status, shown.outcome) == ("failed", "compensated")
        assert shown.compensation is not None and shown.compensation.status == "compensated"
    assert detail.error == "Relayflow.CodeError"
    assert detail.cause is not None and not detail.cause.startswith('{"cause"')
    assert json.loads(item.cause)["compensation"]  # the item keeps the machine's report


def test_an_express_run_that_used_a_fallback_never_reads_plain_succeeded(
    runtime, plane, tenant, item_writes
):
    seen, settled = observed_run(runtime, plane, tenant, with_fallback(), item_writes)
    assert (settled.status, settled.outcome) == ("succeeded", "succeeded_with_fallbacks")
    ended = [entry for entry in seen if entry[0] != "running"]
    assert ended and {(s, o) for s, o, _ in ended} == {("succeeded", "succeeded_with_fallbacks")}
    assert "succeeded" not in {stored for _, _, stored in seen}
