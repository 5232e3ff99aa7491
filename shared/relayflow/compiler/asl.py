"""Constants of the compiled ASL and the small state builders every step kind shares."""

from __future__ import annotations

from typing import Any

from relayflow.compiler.states import Choice
from relayflow.errors import Throttled
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
