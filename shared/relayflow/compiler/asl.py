"""Constants of the compiled ASL and the small state builders every step kind shares."""

from __future__ import annotations

from typing import Any

from relayflow.compiler.states import Choice
from relayflow.errors import Throttled, TransientError
from relayflow.expressions import expression_jsonpath

LAMBDA_INVOKE = "arn:aws:states:::lambda:invoke"
#: A sub_workflow step: start the child execution and wait for it (output as JSON).
START_EXECUTION_SYNC = "arn:aws:states:::states:startExecution.sync:2"
#: Deepest nesting of sub_workflow runs: a run at this depth cannot start a child.
MAX_SUB_WORKFLOW_DEPTH = 5
#: The alias a sub_workflow without a pinned version starts (executions/stepfunctions.LIVE_ALIAS).
LIVE_ALIAS = "live"
#: Errors of the Lambda service itself (not of the step's code), retried on every Task as AWS
#: recommends; they do not use up the step's own retry policy.
LAMBDA_SERVICE_ERRORS = [
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
]
SUCCEEDED = "succeeded"
#: How a flow-controlled step waits for a slot: up to about ten minutes, jittered.
THROTTLED_RETRY: dict[str, Any] = {
    "ErrorEquals": [Throttled.error_name],
    "IntervalSeconds": 1,
    "MaxAttempts": 25,
    "BackoffRate": 1.5,
    "MaxDelaySeconds": 30,
    "JitterStrategy": "FULL",
}
#: A callback Task's retrier for its function's own transient failures (each attempt gets a
#: new token), after the Lambda service errors' one.
TRANSIENT_RETRY: dict[str, Any] = {
    "ErrorEquals": [TransientError.error_name],
    "IntervalSeconds": 1,
    "MaxAttempts": 3,
    "BackoffRate": 2.0,
    "JitterStrategy": "FULL",
}
#: The record of a Lambda that answers with a branch name besides its output (a custom step,
#: an agent whose tool call waits): the Choice after it routes on ``branch``.
BRANCH_RESULT: dict[str, Any] = {
    "output.$": "$.Payload.output",
    "branch.$": "$.Payload.branch",
    "status": SUCCEEDED,
}


def child_run_input(
    key: str, run_id: str, workflow: dict[str, Any], version: int | None, trigger: dict[str, Any]
) -> dict[str, Any]:
    """The ``Input`` of a ``startExecution`` that runs a child of step ``key`` (a sub_workflow,
    an agent's workflow tool): a standard state document whose run has id ``run_id`` (a
    JSONPath), the ``workflow`` id field and ``version`` given, ``depth`` one more and
    ``parent`` set; ``trigger`` holds its ``trigger`` field."""
    return {
        "run": {
            "id.$": run_id,
            **workflow,
            "version": version,
            "tenant.$": "$.run.tenant",
            "dry_run.$": "$.run.dry_run",
            "started_at.$": "$$.State.EnteredTime",
            "depth.$": "States.MathAdd($.run.depth, 1)",
            "parent": {"run_id.$": "$.run.id", "workflow_id.$": "$.run.workflow_id", "step": key},
        },
        **trigger,
        "steps": {},
        "AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID.$": "$$.Execution.Id",
    }


def json_path_of_placeholder(text: str) -> str | None:
    """The JSONPath of a template that is one ``{{ path }}`` placeholder, else None."""
    stripped = text.strip()
    if stripped.startswith("{{") and stripped.endswith("}}"):
        return expression_jsonpath(stripped[2:-2].strip())
    return None


def over_limit(variable: str, limit: int, then: str, otherwise: str) -> Choice:
    """A Choice that goes to ``then`` when the number at ``variable`` exceeds ``limit``."""
    return Choice(
        choices=[{"Variable": variable, "NumericGreaterThan": limit, "Next": then}],
        default=otherwise,
    )
