"""A failed for_each item is named wherever its error is read: the step's reported error
carries ``details.item_index`` (relayflow.observability.step_handler), the timeline marks
the items a failed Map stopped as failed (relayflow.executions.history), and a park says
which item parked the run (``relayflow run``'s note, the console's run summary)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from relayflow.causes import public_error
from relayflow.errors import HttpError
from relayflow.executions.history import build_state_runs
from relayflow.observability import step_handler


def payload(index: int | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"run": {"id": "r1", "tenant": "acme", "workflow_id": "w"}}
    if index is not None:
        doc.update(item={"sku": "A"}, index=index)
    return {"step": {"key": "call", "type": "webhook_out"}, "doc": doc, "context": {}}


def lambda_cause(exc: BaseException) -> str:
    """The Cause Step Functions records for a Lambda that raised ``exc``."""
    return json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)})


@step_handler
def failing(event: dict[str, Any], context: Any) -> Any:
    raise HttpError("the shop said no", status=409)


@pytest.mark.parametrize(
    ("index", "details"), [(2, {"status": 409, "item_index": 2}), (None, {"status": 409})]
)
def test_a_step_error_names_the_for_each_item_it_failed_for(index, details):
    with pytest.raises(HttpError) as raised:
        failing(payload(index), None)
    seen = public_error({"Error": "Relayflow.HttpError", "Cause": lambda_cause(raised.value)})
    assert seen["details"] == details
    assert seen["Cause"] == "the shop said no"


def event(event_id: int, previous: int, kind: str, **details: Any) -> dict[str, Any]:
    field = {
        "StateEntered": "stateEnteredEventDetails",
        "StateExited": "stateExitedEventDetails",
        "IterationStarted": "mapIterationStartedEventDetails",
        "IterationFailed": "mapIterationFailedEventDetails",
    }
    own = f"{kind[0].lower()}{kind[1:]}EventDetails"  # taskFailedEventDetails…
    key = next((v for k, v in field.items() if kind.endswith(k)), own)
    return {"id": event_id, "previousEventId": previous, "type": kind, key: details}


def test_the_items_a_failed_map_stopped_are_failed_not_running():
    # Given a Map whose item 1 failed (item 0 was still running) and whose Catch parked the run
    events = [
        event(1, 0, "ExecutionStarted"),
        event(2, 1, "MapStateEntered", name="each", input="{}"),
        event(3, 2, "MapStateStarted"),
        event(4, 3, "MapIterationStarted", name="each", index=0),
        event(5, 4, "TaskStateEntered", name="call", input="{}"),
        event(6, 3, "MapIterationStarted", name="each", index=1),
        event(7, 6, "TaskStateEntered", name="call", input="{}"),
        event(8, 7, "TaskScheduled"),
        event(9, 8, "TaskFailed", error="Relayflow.HttpError", cause="no"),
        event(10, 9, "MapIterationFailed", name="each", index=1),
        event(11, 10, "MapStateFailed"),
        event(12, 11, "MapStateExited", name="each", output="{}"),
        event(13, 12, "TaskStateEntered", name="each.park", input="{}"),
    ]
    # When the history is folded while the run waits at its park
    runs = {(r.name, r.iteration): r for r in build_state_runs(events, "RUNNING")}
    # Then the failed item failed, the one the Map stopped was stopped, the park waits
    assert runs[("call", 1)].status == "failed"
    assert runs[("call", 1)].error == "Relayflow.HttpError"
    assert runs[("call", 0)].status == "aborted"
    assert runs[("each", None)].status == "caught"
    assert runs[("each.park", None)].status == "running"


def park_entered(index: int | None) -> dict[str, Any]:
    with pytest.raises(HttpError) as raised:
        failing(payload(index), None)
    error = {"Error": "Relayflow.HttpError", "Cause": lambda_cause(raised.value)}
    return {
        "type": "TaskStateEntered",
        "stateEnteredEventDetails": {"name": "each.park", "input": json.dumps({"error": error})},
    }


def test_the_run_note_and_the_console_name_the_item_that_parked_the_run(capsys):
    from relayflow.cli.run_waits import waiting_progress
    from relayflow.console.pages import summary
    from relayflow.runner import RunWaiting
    from relayflow.validation import load_workflow_text

    workflow = load_workflow_text(
        "id: w\nstart: each\nsteps:\n"
        "  each: {type: for_each, items: '{{ trigger.orders }}', step: call,"
        " on_error: {action: park}}\n"
        "  call: {type: transform, mapping: {n: '{{ index }}'}}\n",
        "w.yaml",
    )
    on_event = waiting_progress(workflow, lambda e: None, timeout=60, ask=None)
    with pytest.raises(RunWaiting) as parked_run:
        on_event(park_entered(3))
    assert "step 'each' failed at item 3 and parked the run" in parked_run.value.waiting["message"]

    error = public_error(json.loads(park_entered(3)["stateEnteredEventDetails"]["input"])["error"])
    parked = {"park_id": "p", "step": "each", "error": error, "parked_at": "2026-12-03T09:00:00Z"}
    page = summary({"run_id": "r1", "workflow_id": "w", "status": "parked", "parked": parked})
    assert "Parked at <b>each</b> (item 3) since" in page
    # and outside a for_each nothing is said of items
    on_event = waiting_progress(workflow, lambda e: None, timeout=60, ask=None)
    with pytest.raises(RunWaiting) as parked_run:
        on_event(park_entered(None))
    assert "step 'each' failed and parked the run" in parked_run.value.waiting["message"]


def test_serve_drops_the_interpreters_report_of_a_state_failure_but_not_of_a_fault():
    import logging

    from relayflow.local.serve import INTERPRETER_LOGGER, StateFailuresFilter

    def record(first: str) -> logging.LogRecord:
        return logging.LogRecord(
            INTERPRETER_LOGGER, logging.ERROR, __file__, 1, "%s at '%s'", (first, "…"), None
        )

    quiet = StateFailuresFilter()
    assert not quiet.filter(record("Exception=FailureEventException, Error=Relayflow.HttpError"))
    assert quiet.filter(record("Exception=KeyError, Details=['x']"))
