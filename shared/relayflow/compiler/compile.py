"""Compile a validated workflow into an ASL state machine (JSONPath query language).

Pure: a :class:`Workflow` in, a :class:`CompiledWorkflow` out (the ASL dict, the IAM
statements the state machine's role needs, and which steps run natively). No I/O, and the
output is deterministic: the same definition always gives the same JSON, key order included.

State names: every step's main state is named by the step key. Auxiliary states are named
``<key>.<suffix>`` (step keys cannot contain ``.``, so the names never clash) and
``_init`` sets up the cycle counter. Timelines map states back to steps through this rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from relayflow import naming
from relayflow.compiler.states import (
    Choice,
    Fail,
    Map,
    Parallel,
    Pass,
    ScopeMachine,
    State,
    Succeed,
    Task,
    Wait,
)
from relayflow.definition.graph import Scope, StepGraph
from relayflow.definition.models import (
    ConditionStep,
    CustomStep,
    DelayStep,
    ForEachStep,
    NoopStep,
    ParallelStep,
    RetryPolicy,
    TransformStep,
    Workflow,
)
from relayflow.document import StepRef, task_parameters
from relayflow.errors import NON_RETRYABLE_ERRORS, MaxStepsExceeded, Throttled, TooManyItems
from relayflow.expressions import condition_to_choice, expression_jsonpath, template_to_parameters

LAMBDA_INVOKE = "arn:aws:states:::lambda:invoke"
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
#: Fields of a step model that are routing or policy, not the config a step Lambda needs.
_NOT_CONFIG = {
    "type",
    "name",
    "description",
    "on_success",
    "on_failure",
    "retry",
    "timeout_seconds",
    "on_true",
    "on_false",
}


@dataclass(frozen=True)
class CompileOptions:
    """Deployment facts the compiler needs. ``function_arns`` maps a function kind
    (``condition``, ``transform``…) to its ARN; missing kinds follow :mod:`relayflow.naming`."""

    function_arns: Mapping[str, str] = field(default_factory=dict)
    region: str = naming.LOCAL_REGION
    account: str = naming.LOCAL_ACCOUNT

    def arn(self, kind: str) -> str:
        return self.function_arns.get(kind) or naming.function_arn(kind, self.region, self.account)


@dataclass
class CompiledWorkflow:
    asl: dict[str, Any]
    #: IAM policy statements the state machine's execution role needs.
    iam_statements: list[dict[str, Any]]
    #: step key → "native" (no Lambda) or the function kind that runs it.
    step_runners: dict[str, str]

    @property
    def iam_actions(self) -> list[str]:
        return sorted({a for s in self.iam_statements for a in s["Action"]})

    @property
    def functions(self) -> list[str]:
        return sorted({r for r in self.step_runners.values() if r != "native"})


def _json_path_of_placeholder(text: str) -> str | None:
    stripped = text.strip()
    if stripped.startswith("{{") and stripped.endswith("}}"):
        return expression_jsonpath(stripped[2:-2].strip())
    return None


class _Compiler:
    def __init__(self, workflow: Workflow, options: CompileOptions) -> None:
        self.wf = workflow
        self.options = options
        raw = {k: s.model_dump(mode="json", exclude_none=True) for k, s in workflow.steps.items()}
        self.graph = StepGraph(raw, workflow.start, workflow.errors.on_failure)
        self.scopes, _ = self.graph.scopes()
        self.runners: dict[str, str] = {}
        self.has_cycles = any(self.graph.cycles(s) for s in self.scopes)

    def entry_state(self, key: str) -> str:
        """The state a route into step ``key`` enters: its main state, or the item-count
        check in front of a for_each's Map."""
        return f"{key}.size" if self.wf.steps[key].type == "for_each" else key

    # ------------------------------------------------------------------ scopes

    def compile(self) -> dict[str, Any]:
        main = self.compile_scope(self.scopes[0], mode="main")
        if self.has_cycles:
            init = Pass(result={"steps": 0}, result_path="$.counters", next=main.start_at)
            states = {"_init": init, **main.states}
            main = ScopeMachine("_init", states)
        asl: dict[str, Any] = {
            "Comment": self.wf.name or self.wf.id,
            "QueryLanguage": "JSONPath",
            **main.to_dict(),
            "TimeoutSeconds": self.wf.run_timeout_seconds,
        }
        return asl

    def scope_for(self, entry: str, owner: str) -> Scope:
        for scope in self.scopes:
            if scope.entry == entry and scope.owner == owner:
                return scope
        raise KeyError(f"no scope {owner}/{entry}")  # validation guarantees it exists

    def compile_scope(self, scope: Scope, mode: str) -> ScopeMachine:
        """``mode``: ``main`` (the state machine), ``branch`` (a Parallel branch) or ``item``
        (a for_each item processor, whose single step ends with its own record as output)."""
        machine = ScopeMachine(self.entry_state(scope.entry))
        back_edges = self.graph.back_edges(scope)
        cycle_size = {k: len(c) for c in self.graph.cycles(scope) for k in c}
        ctx = _ScopeContext(self, machine, mode, back_edges)
        ctx.in_cycle = set(cycle_size)
        for key in scope.steps:
            ctx.emit(key, self.wf.steps[key])
        for header in sorted({target for _, target in back_edges}):
            ctx.emit_loop_guard(header, cycle_size.get(header, 1))
        return machine


def _over_limit(variable: str, limit: int, then: str, otherwise: str) -> Choice:
    """A Choice that goes to ``then`` when the number at ``variable`` exceeds ``limit``."""
    return Choice(
        choices=[{"Variable": variable, "NumericGreaterThan": limit, "Next": then}],
        default=otherwise,
    )


class _ScopeContext:
    def __init__(
        self,
        compiler: _Compiler,
        machine: ScopeMachine,
        mode: str,
        back_edges: set[tuple[str, str]],
    ) -> None:
        self.c = compiler
        self.machine = machine
        self.mode = mode
        self.back_edges = back_edges
        #: In an item scope: record a failed item and go on (for_each on_item_failure).
        self.item_continue = False
        #: Steps of this scope that sit on a cycle.
        self.in_cycle: set[str] = set()

    # ------------------------------------------------------------------ wiring helpers

    def route(self, source: str, target: str | None) -> str | None:
        if target is None:
            return None
        if (source, target) in self.back_edges:
            return f"{target}.loop"
        return self.c.entry_state(target)

    def end_state(self, key: str) -> str:
        """A Succeed state for routes that end the run (or branch) early."""
        name = f"{key}.done"
        if name not in self.machine.states:
            self.machine.add(name, Succeed())
        return name

    def flow(self, state: State, key: str, target: str | None) -> State:
        next_name = self.route(key, target)
        if next_name is not None:
            state.next = next_name  # type: ignore[attr-defined]
        else:
            state.end = True  # type: ignore[attr-defined]
            if self.mode == "item":
                state.output_path = f"$.steps.{key}"  # type: ignore[attr-defined]
        return state

    def failure_target(self, key: str) -> str | None:
        return self.route(key, self.c.graph.failure_route(key))

    def must_catch(self, step: Any) -> bool:
        """Native Pass and Choice states cannot retry, catch or time out: a step that asks
        for any of these runs in its Lambda instead. The workflow-wide error route does not
        count: a native state can only fail with States.Runtime, which no Catch matches on
        AWS, so a Lambda would add cost without changing where the run goes."""
        return bool(
            step.retry
            or step.timeout_seconds
            or step.on_failure
            or getattr(step, "concurrency", None)
            or getattr(step, "rate_limit", None)
            or (self.mode == "item" and self.item_continue)
        )

    # ------------------------------------------------------------------ retry / catch

    def retriers(
        self, policy: RetryPolicy | None, *, flow_controlled: bool = False
    ) -> list[dict[str, Any]]:
        retry: list[dict[str, Any]] = [
            {
                "ErrorEquals": list(LAMBDA_SERVICE_ERRORS),
                "IntervalSeconds": 1,
                "MaxAttempts": 3,
                "BackoffRate": 2.0,
                "JitterStrategy": "FULL",
            }
        ]
        if flow_controlled:
            # Its own retrier, so waiting for a concurrency slot or a rate window never uses
            # up the step's retry policy (ASL counts attempts per retrier).
            retry.append(dict(THROTTLED_RETRY))
        if policy is None or policy.max_attempts <= 1 or policy.backoff == "linear":
            return retry
        if policy.retry_on is None:
            retry.append({"ErrorEquals": list(NON_RETRYABLE_ERRORS), "MaxAttempts": 0})
        rule: dict[str, Any] = {
            "ErrorEquals": list(policy.retry_on or ["States.ALL"]),
            "IntervalSeconds": policy.base_seconds,
            "MaxAttempts": policy.max_attempts - 1,
            "BackoffRate": 1.0 if policy.backoff == "fixed" else 2.0,
        }
        if policy.max_delay_seconds is not None:
            rule["MaxDelaySeconds"] = policy.max_delay_seconds
        if policy.jitter:
            rule["JitterStrategy"] = "FULL"
        retry.append(rule)
        return retry

    def catchers(self, key: str, policy: RetryPolicy | None) -> list[dict[str, Any]]:
        catch: list[dict[str, Any]] = []
        failure = self.failure_target(key)
        linear = policy is not None and policy.backoff == "linear" and policy.max_attempts > 1
        if linear:
            assert policy is not None
            if policy.retry_on is None:
                catch.append(
                    {
                        "ErrorEquals": list(NON_RETRYABLE_ERRORS),
                        "ResultPath": "$.error",
                        "Next": failure or self.reraise_state(key),
                    }
                )
            catch.append(
                {
                    "ErrorEquals": list(policy.retry_on or ["States.ALL"]),
                    "ResultPath": "$.error",
                    "Next": self.emit_linear_retry(key, policy, failure),
                }
            )
            if policy.retry_on and "States.ALL" in policy.retry_on:
                return catch
        if self.mode == "item" and self.item_continue:
            name = f"{key}.item_failed"
            self.machine.add(
                name,
                Pass(parameters={"status": "failed", "error.$": "$.error"}, end=True),
            )
            catch.append({"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": name})
        elif failure:
            catch.append({"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": failure})
        return catch

    def raise_error(self, name: str, error: str, cause: str, failure: str | None) -> None:
        """A compiled failure: with an error route, put ``{Error, Cause}`` at ``$.error`` and
        take it (as a Catch would); without one, fail the run."""
        if failure:
            self.machine.add(
                name,
                Pass(result={"Error": error, "Cause": cause}, result_path="$.error", next=failure),
            )
        else:
            self.machine.add(name, Fail(error=error, cause=cause))

    def reraise_state(self, key: str) -> str:
        """A Fail state that re-raises the error held at ``$.error`` (name and cause kept)."""
        name = f"{key}.failed"
        if name not in self.machine.states:
            self.machine.add(name, Fail(error_path="$.error.Error", cause_path="$.error.Cause"))
        return name

    def emit_linear_retry(self, key: str, policy: RetryPolicy, failure: str | None) -> str:
        """ASL has no linear backoff, so it is compiled: Catch → count → Wait → the step.

        The attempt counter and the next delay live at ``$.retry_<key>``; delay n is
        ``base × n`` (capped), kept as a running sum because ASL can add but not multiply.
        """
        counter = f"$.retry_{key}"
        base = policy.base_seconds
        exhausted = failure or self.reraise_state(key)
        check, first, nxt, wait = (
            f"{key}.retry",
            f"{key}.retry_first",
            f"{key}.retry_next",
            f"{key}.retry_wait",
        )
        self.machine.add(
            check,
            Choice(
                choices=[
                    {"Not": {"Variable": counter, "IsPresent": True}, "Next": first},
                    {
                        "Variable": f"{counter}.attempt",
                        "NumericGreaterThanEquals": policy.max_attempts - 1,
                        "Next": exhausted,
                    },
                ],
                default=nxt,
            ),
        )
        self.machine.add(
            first, Pass(result={"attempt": 1, "delay": base}, result_path=counter, next=wait)
        )
        after_next = wait
        if policy.max_delay_seconds is not None:
            cap, capped = f"{key}.retry_cap", f"{key}.retry_capped"
            after_next = cap
            self.machine.add(
                cap, _over_limit(f"{counter}.delay", policy.max_delay_seconds, capped, wait)
            )
            self.machine.add(
                capped,
                Pass(
                    parameters={
                        "attempt.$": f"{counter}.attempt",
                        "delay": policy.max_delay_seconds,
                    },
                    result_path=counter,
                    next=wait,
                ),
            )
        self.machine.add(
            nxt,
            Pass(
                parameters={
                    "attempt.$": f"States.MathAdd({counter}.attempt, 1)",
                    "delay.$": f"States.MathAdd({counter}.delay, {base})",
                },
                result_path=counter,
                next=after_next,
            ),
        )
        self.machine.add(wait, Wait(seconds_path=f"{counter}.delay", next=key))
        return check

    # ------------------------------------------------------------------ steps

    def step_config(self, step: Any) -> dict[str, Any]:
        """What the step's Lambda needs from the definition (routing and policy stay in ASL).
        A tool step calling ``http.<name>`` carries that HTTP tool's declaration; a custom
        step carries its branch names (their targets are routing)."""
        config = step.model_dump(mode="json", exclude=_NOT_CONFIG, exclude_none=True)
        if step.type == "tool" and step.tool.startswith("http."):
            name = step.tool.split(".")[1]
            config["http_tool"] = self.c.wf.http_tools[name].model_dump(
                mode="json", exclude_none=True
            )
        if step.type == "custom":
            config["branches"] = sorted(step.branches)
        return config

    def lambda_task(self, key: str, step: Any, kind: str, next_target: str | None) -> Task:
        self.c.runners[key] = kind
        config = self.step_config(step)
        task = Task(
            resource=LAMBDA_INVOKE,
            parameters=task_parameters(
                self.c.options.arn(kind), StepRef(key=key, type=step.type, config=config)
            ),
            result_selector={"output.$": "$.Payload.output", "status": SUCCEEDED},
            result_path=f"$.steps.{key}",
            timeout_seconds=step.timeout_seconds,
            retry=self.retriers(
                step.retry, flow_controlled=bool(step.concurrency or step.rate_limit)
            ),
            catch=self.catchers(key, step.retry),
        )
        policy = step.retry
        if policy is not None and policy.backoff == "linear" and key in self.in_cycle:
            # On a cycle the step runs again: start its next failure from attempt one.
            reset = f"{key}.retry_reset"
            state = Pass(result={"attempt": 0, "delay": 0}, result_path=f"$.retry_{key}")
            self.machine.add(reset, self.flow(state, key, next_target))
            task.next = reset
            return task
        return self.flow(task, key, next_target)  # type: ignore[return-value]

    def emit(self, key: str, step: Any) -> None:
        handler = getattr(self, f"emit_{step.type}")
        handler(key, step)

    def emit_noop(self, key: str, step: NoopStep) -> None:
        self.c.runners[key] = "native"
        state = Pass(result={"output": None, "status": SUCCEEDED}, result_path=f"$.steps.{key}")
        self.machine.add(key, self.flow(state, key, step.on_success))

    def emit_transform(self, key: str, step: TransformStep) -> None:
        params = template_to_parameters({"output": step.mapping})
        if params is not None and not self.must_catch(step):
            self.c.runners[key] = "native"
            state = Pass(parameters={**params, "status": SUCCEEDED}, result_path=f"$.steps.{key}")
            self.machine.add(key, self.flow(state, key, step.on_success))
            return
        self.machine.add(key, self.lambda_task(key, step, "transform", step.on_success))

    def emit_tool(self, key: str, step: Any) -> None:
        self.machine.add(key, self.lambda_task(key, step, step.type, step.on_success))

    emit_webhook_out = emit_tool
    emit_code = emit_tool

    def emit_custom(self, key: str, step: CustomStep) -> None:
        """The custom Lambda answers with a branch name (or null); a Choice routes on it and
        falls back to on_success (or the end) for no branch or an undeclared one."""
        task = self.lambda_task(key, step, "custom", None)
        if not step.branches:
            self.machine.add(key, self.flow(task, key, step.on_success))
            return
        route = f"{key}.route"
        task.end, task.next, task.output_path = False, route, None
        task.result_selector = {
            "output.$": "$.Payload.output",
            "branch.$": "$.Payload.branch",
            "status": SUCCEEDED,
        }
        self.machine.add(key, task)
        default = self.route(key, step.on_success) or self.end_state(key)
        choices = [
            {
                "And": [
                    {"Variable": f"$.steps.{key}.branch", "IsString": True},
                    {"Variable": f"$.steps.{key}.branch", "StringEquals": name},
                ],
                "Next": self.route(key, target),
            }
            for name, target in sorted(step.branches.items())
        ]
        self.machine.add(route, Choice(choices=choices, default=default))

    def emit_condition(self, key: str, step: ConditionStep) -> None:
        on_true = self.route(key, step.on_true) or self.end_state(key)
        on_false = self.route(key, step.on_false) or self.end_state(key)
        rule = condition_to_choice(step.expression)
        if rule is not None and not self.must_catch(step):
            self.c.runners[key] = "native"
            self.machine.add(key, Choice(choices=[{**rule, "Next": on_true}], default=on_false))
            return
        route = f"{key}.route"
        task = self.lambda_task(key, step, "condition", None)
        task.end, task.next = False, route
        self.machine.add(key, task)
        self.machine.add(
            route,
            Choice(
                choices=[
                    {
                        "Variable": f"$.steps.{key}.output.result",
                        "BooleanEquals": True,
                        "Next": on_true,
                    }
                ],
                default=on_false,
            ),
        )

    def emit_delay(self, key: str, step: DelayStep) -> None:
        self.c.runners[key] = "native"
        state = Wait()
        if isinstance(step.seconds, int):
            state.seconds = step.seconds
        elif isinstance(step.seconds, str):
            state.seconds_path = _json_path_of_placeholder(step.seconds)
        elif step.until is not None:
            path = _json_path_of_placeholder(step.until)
            if path is not None:
                state.timestamp_path = path
            else:
                state.timestamp = step.until.strip()
        self.machine.add(key, self.flow(state, key, step.on_success))

    def document_selector(self, prefix: str) -> dict[str, Any]:
        """The state document's fields, read from ``prefix`` (``$`` or ``$[0]``)."""
        selector = {"run.$": f"{prefix}.run", "trigger.$": f"{prefix}.trigger"}
        if self.c.has_cycles:
            selector["counters.$"] = f"{prefix}.counters"
        return selector

    def emit_parallel(self, key: str, step: ParallelStep) -> None:
        self.c.runners[key] = "native"
        branches = [
            self.c.compile_scope(self.c.scope_for(root, key), mode="branch")
            for root in step.branches
        ]
        merged = "$[0].steps"
        for i in range(1, len(branches)):
            merged = f"States.JsonMerge({merged}, $[{i}].steps, false)"
        if len(branches) == 1:
            merged = "States.JsonMerge($[0].steps, $[0].steps, false)"
        # Each branch returns the whole document with its steps added; the branches share the
        # steps from before the fork, so a shallow merge of their `steps` joins them.
        state = Parallel(
            branches=branches,
            result_selector={**self.document_selector("$[0]"), "steps.$": merged},
            result_path="$",
            retry=self.retriers(step.retry) if step.retry else [],
            catch=self.catchers(key, None),
        )
        self.machine.add(key, self.flow(state, key, step.on_success))

    def emit_for_each(self, key: str, step: ForEachStep) -> None:
        self.c.runners[key] = "native"
        items_path = _json_path_of_placeholder(step.items)
        size, check, too_many = f"{key}.size", f"{key}.check", f"{key}.too_many"
        self.machine.add(
            size,
            Pass(
                parameters={"count.$": f"States.ArrayLength({items_path})"},
                result_path=f"$.steps.{key}",
                next=check,
            ),
        )
        self.machine.add(check, _over_limit(f"$.steps.{key}.count", step.max_items, too_many, key))
        self.raise_error(
            too_many,
            TooManyItems.error_name,
            f"for_each '{key}' allows at most {step.max_items} items",
            self.failure_target(key),
        )
        item_scope = self.c.scope_for(step.step, key)
        item_machine = ScopeMachine(self.c.entry_state(item_scope.entry))
        item_ctx = _ScopeContext(self.c, item_machine, "item", set())
        item_ctx.item_continue = step.on_item_failure == "continue"
        item_ctx.emit(step.step, self.c.wf.steps[step.step])
        state = Map(
            items_path=items_path,
            item_selector={
                **self.document_selector("$"),
                "steps.$": "$.steps",
                "item.$": "$$.Map.Item.Value",
                "index.$": "$$.Map.Item.Index",
            },
            max_concurrency=step.max_concurrency or None,
            item_processor=item_machine,
            result_selector={"output.$": "$", "status": SUCCEEDED},
            result_path=f"$.steps.{key}",
            retry=self.retriers(step.retry) if step.retry else [],
            catch=self.catchers(key, None),
        )
        self.machine.add(key, self.flow(state, key, step.on_success))

    def emit_loop_guard(self, header: str, size: int) -> None:
        """On every edge that closes a cycle: count the cycle's steps, stop past the limit."""
        loop, guard, exceeded = f"{header}.loop", f"{header}.guard", f"{header}.exceeded"
        self.machine.add(
            loop,
            Pass(
                parameters={"steps.$": f"States.MathAdd($.counters.steps, {size})"},
                result_path="$.counters",
                next=guard,
            ),
        )
        self.machine.add(
            guard,
            _over_limit(
                "$.counters.steps",
                self.c.wf.max_steps_per_run,
                exceeded,
                self.c.entry_state(header),
            ),
        )
        self.raise_error(
            exceeded,
            MaxStepsExceeded.error_name,
            f"the run exceeded max_steps_per_run ({self.c.wf.max_steps_per_run}) "
            f"in the cycle through '{header}'",
            self.failure_target(header),
        )


def _iam_statements(options: CompileOptions, functions: list[str]) -> list[dict[str, Any]]:
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


def compile_workflow(workflow: Workflow, options: CompileOptions | None = None) -> CompiledWorkflow:
    """Compile a validated workflow. Call :func:`relayflow.definition.validate_data` (or
    ``load_workflow``) first: the compiler assumes references and scopes are sound."""
    options = options or CompileOptions()
    compiler = _Compiler(workflow, options)
    asl = compiler.compile()
    runners = dict(sorted(compiler.runners.items()))
    functions = sorted({r for r in runners.values() if r != "native"})
    return CompiledWorkflow(
        asl=asl, iam_statements=_iam_statements(options, functions), step_runners=runners
    )
