"""The step limit ends a run whose cycle header's error route leads back into the cycle
(a compiler bug the generated corpus found: the run used to loop forever through
``a.exceeded`` → ``b`` → ``a.loop`` → ``a.guard`` → ``a.exceeded``)."""

from __future__ import annotations

import pytest
from workflow_shapes import LOOPING_ROUTE

from relayflow.runner import run_workflow
from relayflow.validation import validate_data

pytestmark = pytest.mark.integration

#: A run that does not end is stopped after this long and reported (it used to hang).
WAIT_SECONDS = 30


def test_a_cycle_whose_error_route_loops_back_stops_at_the_step_limit(rt):
    # Given a cycle a → b → a whose header a fails (a string times two) into b, in the cycle
    workflow, problems = validate_data(LOOPING_ROUTE)
    assert workflow is not None, problems

    # When it runs with b always looping back
    result = run_workflow(workflow, {"count": "x", "flag": True}, runtime=rt, timeout=WAIT_SECONDS)

    # Then the run ends, failed with the step-limit error, after a few passes only
    assert result.status == "failed"
    assert result.error == "Relayflow.MaxStepsExceeded"
    assert result.cause == "the run exceeded max_steps_per_run (3) in the cycle through 'a'"
    passes = [(step.status, step.error) for step in result.steps if step.key == "a"]
    assert passes[0] == ("caught", "Relayflow.ExpressionError")
    assert passes[-1] == ("failed", "Relayflow.MaxStepsExceeded")
    assert len(passes) <= 3
