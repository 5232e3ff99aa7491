"""Compile a validated workflow into an ASL state machine (JSONPath query language).

Pure: a :class:`Workflow` in, a :class:`CompiledWorkflow` out (the ASL dict, the IAM
statements the state machine's role needs, and which steps run natively). No I/O, and the
output is deterministic: the same definition always gives the same JSON, key order included.

State names: every step's main state is named by the step key. Auxiliary states are named
``<key>.<suffix>`` (step keys cannot contain ``.``, so the names never clash) and
``_init`` sets up the cycle counter. Timelines map states back to steps through this rule.
An Express machine wraps all of it in ``_run`` and records its end in ``_record.*`` before
``_succeeded`` / ``_failed`` (:mod:`~relayflow.compiler.recording`, docs/engines.md).

Layout (imports point down): :mod:`~relayflow.compiler.driver` walks the graph scope by
scope (its graph facts are a :class:`~relayflow.compiler.plan.WorkflowPlan`),
:mod:`~relayflow.compiler.scope` holds routing, retries, catches and the shared Tasks and looks
step kinds up in :mod:`~relayflow.compiler.registry`; each module of
:mod:`relayflow.compiler.kinds` (and ``on_error``, ``compensation``) compiles through the
:mod:`~relayflow.compiler.emitter` protocol only.
"""

from __future__ import annotations

from typing import Any

from relayflow.compiler.driver import Driver
from relayflow.compiler.engine import EXPRESS_MAX_SECONDS, EngineChoice, choose_engine
from relayflow.compiler.kinds.for_each_distributed import RESULTS_PREFIX
from relayflow.compiler.options import CompiledWorkflow, CompileOptions
from relayflow.compiler.recording import RUN_ITEMS, with_native_recording
from relayflow.definition.models import Workflow


def _iam_statements(
    options: CompileOptions, functions: list[str], children: list[str]
) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    if functions:
        arns = [options.arn(k) for k in functions]
        statements.append(
            {
                "Effect": "Allow",
                "Action": ["lambda:InvokeFunction"],
                "Resource": sorted({*arns, *(f"{a}:*" for a in arns)}),
            }
        )
    if children:
        machines = [options.state_machine_arn(c) for c in children]
        executions = [
            f"arn:aws:states:{options.region}:{options.account}:execution:"
            f"{options.state_machine_name(c)}:*"
            for c in children
        ]
        rule = (
            f"arn:aws:events:{options.region}:{options.account}:"
            "rule/StepFunctionsGetEventsForStepFunctionsExecutionRule"
        )
        statements += [
            {
                "Effect": "Allow",
                "Action": ["states:StartExecution"],
                "Resource": sorted({*machines, *(f"{m}:*" for m in machines)}),
            },
            {
                "Effect": "Allow",
                "Action": ["states:DescribeExecution", "states:StopExecution"],
                "Resource": sorted(executions),
            },
            {
                "Effect": "Allow",
                "Action": ["events:PutTargets", "events:PutRule", "events:DescribeRule"],
                "Resource": [rule],
            },
        ]
    statements.append(
        {
            "Effect": "Allow",
            "Action": [
                "xray:PutTraceSegments",
                "xray:PutTelemetryRecords",
                "xray:GetSamplingRules",
                "xray:GetSamplingTargets",
            ],
            "Resource": ["*"],
        }
    )
    return statements


def _distributed_statements(
    options: CompileOptions, workflow_id: str, item_buckets: list[str]
) -> list[dict[str, Any]]:
    """What a Distributed Map needs (Step Functions' documented policy for it): start, watch
    and stop its own child executions, read its items, write its results."""
    name = options.state_machine_name(workflow_id)
    machine = options.state_machine_arn(workflow_id)
    statements: list[dict[str, Any]] = [
        # A published version or alias runs its Map's children under its own qualified ARN.
        {
            "Effect": "Allow",
            "Action": ["states:StartExecution"],
            "Resource": [machine, f"{machine}:*"],
        },
        {
            "Effect": "Allow",
            "Action": ["states:DescribeExecution", "states:StopExecution"],
            "Resource": [f"arn:aws:states:{options.region}:{options.account}:execution:{name}/*"],
        },
        {
            "Effect": "Allow",
            "Action": [
                "s3:PutObject",
                "s3:GetObject",
                "s3:ListMultipartUploadParts",
                "s3:AbortMultipartUpload",
            ],
            "Resource": [f"arn:aws:s3:::{options.payload_bucket}/{RESULTS_PREFIX}/{name}/*"],
        },
    ]
    if item_buckets:
        statements.append(
            {
                "Effect": "Allow",
                "Action": ["s3:GetObject"],
                "Resource": [f"arn:aws:s3:::{b}/*" for b in item_buckets],
            }
        )
    return statements


def compile_workflow(workflow: Workflow, options: CompileOptions | None = None) -> CompiledWorkflow:
    """Compile a validated workflow. Call :func:`relayflow.validation.validate_data` (or
    ``load_workflow``) first: the compiler assumes references and scopes are sound."""
    options = options or CompileOptions()
    compiler = Driver(workflow, options)
    asl = compiler.compile()
    runners = dict(sorted(compiler.runners.items()))
    functions = sorted({r for r in runners.values() if r != "native"} | compiler.functions)
    statements = _iam_statements(options, functions, sorted(compiler.children))
    if compiler.distributed:
        buckets = sorted({b for b in compiler.distributed.values() if b})
        statements[-1:-1] = _distributed_statements(options, workflow.id, buckets)
    compiled = CompiledWorkflow(asl=asl, iam_statements=statements, step_runners=runners)
    compiled.engine = choose_engine(workflow, compiled, compiler)
    if compiled.engine.engine == "express" and not options.express:
        compiled.engine = EngineChoice(
            "standard",
            "compiled for a Standard state machine (a machine keeps its type; Express would "
            f"be possible: {compiled.engine.reason})",
            None,
            compiled.engine.bound_seconds,
        )
    if compiled.engine.engine == "express":
        timeout = min(workflow.run_timeout_seconds, EXPRESS_MAX_SECONDS)
        compiled.asl = with_native_recording(asl, options.table_name, timeout)
        compiled.iam_statements.insert(-1, _record_statement(options))
    return compiled


def _record_statement(options: CompileOptions) -> dict[str, Any]:
    """The one DynamoDB call an Express machine makes: UpdateItem on run items."""
    table = f"arn:aws:dynamodb:{options.region}:{options.account}:table/{options.table_name}"
    return {
        "Effect": "Allow",
        "Action": ["dynamodb:UpdateItem"],
        "Resource": [table],
        "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [RUN_ITEMS]}},
    }
