"""``on_error`` compiled into native states (:mod:`relayflow.definition.errors_model`).

The step's failure (after its retries) is caught into ``$.error`` and goes to the entry this
module returns instead of the step's failure route.

Park (``<key>.park…``)::

    <key>.park          callback Task on the waitpoint function (step type ``park``): stores
                        the park with the error and marks the run ``parked``;
                        TimeoutSeconds = park_timeout; the resume's answer lands at $.park
    <key>.park.resumed  Choice: fail → <key>.park.failed; a context → <key>.park.merge
    <key>.park.merge    Pass: JsonMerge($.trigger, $.park.context) …
    <key>.park.apply    Pass: … written over $.trigger
    <key>.park.decide   Choice: retry → the step again; skip → <key>.park.skip; else failed
    <key>.park.skip     Pass: {output: $.park.output, status: skipped} → the success route
    <key>.park.timeout  Pass: $.error = Relayflow.ParkTimeout → <key>.park.failed
    <key>.park.failed   Pass: the one place a parked step gives up; it goes on to the step's
                        failure route (on_failure, else errors.on_failure), else fails the run
                        with the error at $.error. Compensation hooks in here.

Continue (``<key>.fallback…``)::

    <key>.fallback      Pass (or the transform function for a template that does not compile
                        to Parameters): {output: <fallback>, status: fallback, error}
    <key>.fallback.flag Pass: $.run_flags = {fallbacks: true} → the success route

``$.run_flags.fallbacks`` travels in the state document to the run's output, where the
recorder reads it for the run's outcome (:mod:`relayflow.control.outcome`). A Parallel
rebuilds the document, so a machine with a parallel starts by setting ``$.run_flags`` empty
(``_flags``) and its Parallels carry it (the driver's ``compile``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from relayflow.compiler.asl import LAMBDA_INVOKE, TRANSIENT_RETRY
from relayflow.compiler.emitter import Emitter
from relayflow.compiler.states import Choice, Pass, Task
from relayflow.document import StepRef, task_parameters
from relayflow.errors import ParkTimeout
from relayflow.expressions import template_to_parameters

if TYPE_CHECKING:
    from relayflow.definition.errors_model import ContinueOnError, ParkOnError

#: The step type the waitpoint function serves as a park (:mod:`relayflow.steps.park`).
PARK = "park"
#: Where the resume's answer ``{action, output, context}`` lands in the state document.
PARK_RESULT = "$.park"
#: The run's flags: ``fallbacks`` once a step continued with its fallback.
RUN_FLAGS = "$.run_flags"
FALLBACK = "fallback"
SKIPPED = "skipped"


def on_error_entry(ctx: Emitter, key: str, on_error: Any) -> str:
    """The state a failure of step ``key`` enters (its states are added on first use)."""
    if on_error.action == "park":
        name = f"{key}.park"
        if name not in ctx.machine.states:
            _emit_park(ctx, key, on_error)
        return name
    name = f"{key}.fallback"
    if name not in ctx.machine.states:
        _emit_fallback(ctx, key, on_error)
    return name


def _success_route(ctx: Emitter, key: str) -> str | None:
    return getattr(ctx.c.wf.steps[key], "on_success", None)


def _failed(ctx: Emitter, key: str) -> str:
    """``<key>.park.failed``: on to the step's failure route, else re-raise ``$.error``."""
    name = f"{key}.park.failed"
    if name not in ctx.machine.states:
        target = ctx.route(key, ctx.c.graph.failure_route(key)) or ctx.reraise_state(key)
        ctx.machine.add(
            name,
            Pass(comment="The parked step gives up: compensation hooks in here.", next=target),
        )
    return name


def _emit_park(ctx: Emitter, key: str, on_error: ParkOnError) -> None:
    step = ctx.c.wf.steps[key]
    ctx.c.functions.add("waitpoint")
    failed = _failed(ctx, key)
    park, resumed, merge, apply, decide, skip, timeout = (
        f"{key}.park",
        f"{key}.park.resumed",
        f"{key}.park.merge",
        f"{key}.park.apply",
        f"{key}.park.decide",
        f"{key}.park.skip",
        f"{key}.park.timeout",
    )
    config = {"park_timeout": on_error.park_timeout, "step_type": step.type}
    ctx.machine.add(
        park,
        Task(
            resource=f"{LAMBDA_INVOKE}.waitForTaskToken",
            parameters=task_parameters(
                ctx.c.options.arn("waitpoint"),
                StepRef(key=key, type=PARK, config=config),
                task_token=True,
            ),
            result_selector={
                "action.$": "$.action",
                "output.$": "$.output",
                "context.$": "$.context",
            },
            result_path=PARK_RESULT,
            timeout_seconds=on_error.park_timeout,
            retry=[
                *ctx.retriers(None),
                dict(TRANSIENT_RETRY),
            ],
            catch=[
                {"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": timeout},
                {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": failed},
            ],
            next=resumed,
        ),
    )
    ctx.machine.add(
        resumed,
        Choice(
            choices=[
                {"Variable": f"{PARK_RESULT}.action", "StringEquals": "fail", "Next": failed},
                {"Variable": f"{PARK_RESULT}.context", "IsNull": True, "Next": decide},
            ],
            default=merge,
        ),
    )
    ctx.machine.add(
        merge,
        Pass.intrinsic(
            "trigger",
            f"States.JsonMerge($.trigger, {PARK_RESULT}.context, false)",
            f"{PARK_RESULT}.merged",
            apply,
        ),
    )
    ctx.machine.add(
        apply,
        Pass(input_path=f"{PARK_RESULT}.merged.trigger", result_path="$.trigger", next=decide),
    )
    ctx.machine.add(
        decide,
        Choice(
            choices=[
                {
                    "Variable": f"{PARK_RESULT}.action",
                    "StringEquals": "retry",
                    "Next": ctx.c.entry_state(key),
                },
                {"Variable": f"{PARK_RESULT}.action", "StringEquals": "skip", "Next": skip},
            ],
            default=failed,
        ),
    )
    record = {"output.$": f"{PARK_RESULT}.output", "status": SKIPPED}
    skip_state = Pass(parameters=record, result_path=ctx.step_result_path(key))
    ctx.machine.add(skip, ctx.flow(skip_state, key, _success_route(ctx, key)))
    ctx.machine.add(
        timeout,
        Pass(
            result={
                "Error": ParkTimeout.error_name,
                "Cause": f"step '{key}' stayed parked longer than its park_timeout "
                f"({on_error.park_timeout} s)",
            },
            result_path="$.error",
            next=failed,
        ),
    )


def _emit_fallback(ctx: Emitter, key: str, on_error: ContinueOnError) -> None:
    name, flag = f"{key}.fallback", f"{key}.fallback.flag"
    params = template_to_parameters({"output": on_error.output})
    if params is not None:
        state: Pass | Task = Pass(
            parameters={**params, "status": FALLBACK, "error.$": "$.error"},
            result_path=ctx.step_result_path(key),
            next=flag,
        )
    else:
        # An expression ASL cannot evaluate: the transform function renders it (the error
        # is at $.error, which templates read as `error`).
        ctx.c.functions.add("transform")
        failure = ctx.route(key, ctx.c.graph.failure_route(key))
        state = Task(
            resource=LAMBDA_INVOKE,
            parameters=task_parameters(
                ctx.c.options.arn("transform"),
                StepRef(key=key, type="transform", config={"mapping": on_error.output}),
            ),
            # ResultSelector reads the Lambda's answer only; the error stays at $.error.
            result_selector={"output.$": "$.Payload.output", "status": FALLBACK},
            result_path=ctx.step_result_path(key),
            retry=ctx.retriers(None),
            catch=(
                [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": failure}]
                if failure
                else []
            ),
            next=flag,
        )
    ctx.machine.add(name, state)
    flag_state = Pass(result={"fallbacks": True}, result_path=RUN_FLAGS)
    ctx.machine.add(flag, ctx.flow(flag_state, key, _success_route(ctx, key)))
