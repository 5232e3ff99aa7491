"""Helpers for tests that start runs through a :class:`ControlPlane` on the local runtime:
wait for a run's execution to end and record it, as EventBridge and the recorder do on AWS.

On pytest's ``pythonpath`` (pyproject.toml), so any test imports it by name.
"""

from __future__ import annotations

from typing import Any

from relayflow.control.recorder import record_status_change, status_change_event


def settle(runtime: Any, plane: Any, tenant: str, run_id: str, events: Any = None) -> Any:
    """Wait for the run's execution to end and let the recorder record it (what EventBridge
    does on AWS, with ``events`` as the recorder's event sink when given); returns the run as
    the control plane then reports it."""
    run = plane.dal.get_run(tenant, run_id)
    assert run is not None and run.execution_arn
    runtime.wait(run.execution_arn, timeout=30)
    described = runtime.sfn_client.describe_execution(executionArn=run.execution_arn)
    record_status_change(status_change_event(described), control=plane, events=events)
    return plane.get_run(tenant, run_id)


def entered_states(runtime: Any, plane: Any, tenant: str, run_id: str) -> list[str]:
    """The names of the states the run's execution has entered so far, in order."""
    run = plane.dal.get_run(tenant, run_id)
    assert run is not None and run.execution_arn
    events = runtime.sfn_client.get_execution_history(
        executionArn=run.execution_arn, maxResults=1000
    )["events"]
    return [
        e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e
    ]
