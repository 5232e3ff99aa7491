"""Fuzz runs: generated definitions that need no external resources run on the local runtime.

The definitions come from the same generator as the ASL validator corpus
(tests/support/workflow_strategies.py, ``runnable=True``): noop, transform and condition
(native and in their Lambdas), code, delays, parallel and for_each steps, with retries,
timeouts, error routes, flow control and cycles. Every run must end (succeeded, failed, timed
out or aborted) without the runtime crashing; a run that fails must fail with a named error.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from corpus import draw_corpus
from workflow_strategies import RUNNABLE_TRIGGER, workflow_definitions

from relayflow.local import ExecutionRecord, ExecutionWaitTimeout
from relayflow.runner import run_workflow
from relayflow.validation import validate_data

pytestmark = pytest.mark.integration

#: Bounded so the module stays fast; the validator corpus covers the breadth.
RUNS = 50
#: A generated run takes well under a second at this time scale; one still running after
#: this long does not end (its cycle guard never fires) and is stopped.
WAIT_SECONDS = 30
TERMINAL = {"succeeded", "failed", "timed_out", "aborted"}


def _last_states(record: ExecutionRecord) -> list[str]:
    return [state.name for state in record.states[-8:]]


def test_generated_native_workflows_run_to_a_terminal_status(runtime):
    # Given RUNS generated definitions that need no external resources (the same on every run)
    definitions = draw_corpus(workflow_definitions(runnable=True), RUNS)
    previous = runtime.time_scale
    runtime.time_scale = 0.001
    outcomes: Counter[tuple[str, str | None]] = Counter()
    problems: dict[int, str] = {}
    try:
        for index, definition in enumerate(definitions):
            workflow, refused = validate_data(definition)
            assert workflow is not None, refused

            # When each runs on the local runtime
            try:
                result = run_workflow(
                    workflow, RUNNABLE_TRIGGER, runtime=runtime, timeout=WAIT_SECONDS
                )
            except ExecutionWaitTimeout as exc:  # a run that does not end: a finding
                problems[index] = f"{exc}; last states: {_last_states(exc.record)}"
                runtime.stop_execution(exc.record.execution_arn)
                continue
            except Exception as exc:  # a crash: a finding
                problems[index] = f"{type(exc).__name__}: {exc}"
                continue

            # Then it ends, and a failure carries an error name
            outcomes[(result.status, result.error)] += 1
            if result.status not in TERMINAL:
                problems[index] = f"status {result.status}"
            elif result.status == "failed" and not result.error:
                problems[index] = f"failed without an error name: {result.cause}"
    finally:
        runtime.time_scale = previous

    assert not problems, "\n".join(
        f"definition {i}: {problem}\n    {json.dumps(definitions[i])}"
        for i, problem in problems.items()
    )
    assert sum(outcomes.values()) == RUNS
    # and most runs succeed: the generator's runnable definitions read only the trigger
    assert outcomes[("succeeded", None)] >= RUNS // 2, outcomes
