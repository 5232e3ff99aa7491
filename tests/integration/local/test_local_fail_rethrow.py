"""Compat fix ``fail_state_states_errors``: a Fail state that rethrows a ``States.*`` error it
was handed (``ErrorPath``/``CausePath``) fails the execution with that error and cause."""

from __future__ import annotations

import pytest
from local_asl import machine, task

pytestmark = pytest.mark.integration


def rethrowing(path: str) -> dict:
    """A Task whose Parameters read ``path`` (absent: States.Runtime), caught and rethrown."""
    return machine(
        {
            "Read": task(
                "echo",
                payload={"value.$": path},
                Catch=[{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Fail"}],
            ),
            "Fail": {"Type": "Fail", "ErrorPath": "$.error.Error", "CausePath": "$.error.Cause"},
        }
    )


def test_a_fail_state_rethrows_a_states_error_under_its_own_name(rt):
    # Given a Task that fails with States.Runtime (a missing path), caught and rethrown
    # When it runs
    record = rt.run("rethrow-states-runtime", rethrowing("$.missing"), {"present": 1})
    # Then the execution fails with the caught error and its cause, not a re-wrap of it
    assert record.status == "FAILED"
    assert record.error == "States.Runtime"
    assert "$.missing" in (record.cause or "")
    assert "MUST NOT begin" not in (record.cause or "")


def test_a_fail_state_still_rethrows_a_custom_error(rt):
    asl = machine(
        {
            "Boom": {"Type": "Fail", "ErrorPath": "$.e", "CausePath": "$.c"},
        }
    )
    record = rt.run("rethrow-custom", asl, {"e": "Relayflow.Custom", "c": "because"})
    assert (record.status, record.error, record.cause) == ("FAILED", "Relayflow.Custom", "because")
