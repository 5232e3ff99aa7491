"""Compile a validated workflow into an ASL state machine (JSONPath query language).

Pure: a :class:`Workflow` in, a :class:`CompiledWorkflow` out (the ASL dict, the IAM
statements the state machine's role needs, and which steps run natively). No I/O, and the
output is deterministic: the same definition always gives the same JSON, key order included.

State names: every step's main state is named by the step key. Auxiliary states are named
``<key>.<suffix>`` (step keys cannot contain ``.``, so the names never clash) and
``_init`` sets up the cycle counter. Timelines map states back to steps through this rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
    SubWorkflowStep,
    TransformStep,
    Workflow,
)
from relayflow.document import StepRef, task_parameters
from relayflow.errors import (
    NON_RETRYABLE_ERRORS,
    MaxStepsExceeded,
    SubWorkflowDepth,
    SubWorkflowFailed,
    Throttled,
    TooManyItems,
)
from relayflow.expressions import condition_to_choice, expression_jsonpath, template_to_parameters

LAMBDA_INVOKE = "arn:aws:states:::lambda:invoke"
#: A sub_workflow step: start the child execution and wait for it (output as JSON).
START_EXECUTION_SYNC = "arn:aws:states:::states:startExecution.sync:2"
#: Deepest nesting of sub_workflow runs: a run at this depth cannot start a child.
MAX_SUB_WORKFLOW_DEPTH = 5
#: The alias a sub_workflow without a pinned version starts (control/stepfunctions.LIVE_ALIAS).
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


def local_state_machine_name(workflow_id: str) -> str:
    """The state machine the local runner (``relayflow run``) creates for a workflow."""
    return f"relayflow-{workflow_id}"


@dataclass(frozen=True)
class CompileOptions:
    """Deployment facts the compiler needs. ``function_arns`` maps a function kind
    (``condition``, ``transform``…) to its ARN; missing kinds follow :mod:`relayflow.naming`.
    ``state_machine_name`` maps a workflow id to its state machine's name (the target of a
    sub_workflow step): the control plane passes its per-stage, per-tenant naming."""

    function_arns: Mapping[str, str] = field(default_factory=dict)
    region: str = naming.LOCAL_REGION
    account: str = naming.LOCAL_ACCOUNT
    state_machine_name: Callable[[str], str] = local_state_machine_name

    def arn(self, kind: str) -> str:
        return self.function_arns.get(kind) or naming.function_arn(kind, self.region, self.account)

    def state_machine_arn(self, workflow_id: str) -> str:
        name = self.state_machine_name(workflow_id)
        return f"arn:aws:states:{self.region}:{self.account}:stateMachine:{name}"


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
        #: Workflow ids the sub_workflow steps start (for the IAM statements).
        self.children: set[str] = set()
        self.has_cycles = any(self.graph.cycles(s) for s in self.scopes)

    def entry_state(self, key: str) -> str:
        """The state a route into step ``key`` enters: its main state, or the item-count
        check in front of a for_each's Map, or the depth guard in front of a sub_workflow."""
        step_type = self.wf.steps[key].type
        if step_type == "for_each":
            return f"{key}.size"
        if step_type == "sub_workflow":
            return f"{key}.depth"
        return key

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

    def catchers(
        self, key: str, policy: RetryPolicy | None, *, failure_state: str | None = None
    ) -> list[dict[str, Any]]:
        """``failure_state``: where a failure goes (after retries) instead of the step's
        failure route, e.g. a state that renames the error first."""
        catch: list[dict[str, Any]] = []
        failure = failure_state or self.failure_target(key)
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
            if "States.ALL" in (policy.retry_on or ["States.ALL"]):
                # Nothing reaches a later catcher (and ASL wants States.ALL last and alone).
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

    def callback_task(
        self, key: str, step: Any, config: dict[str, Any], result_selector: dict[str, Any]
    ) -> Task:
        """A ``lambda:invoke.waitForTaskToken`` Task: the step's function stores the request
        with ``$$.Task.Token``; the control API's ``SendTaskSuccess`` is the Task's result.
        Only the function's own transient failures are retried (each attempt gets a new
        token); the step's ``timeout_seconds`` is the expiry."""
        from relayflow.errors import TransientError

        self.c.runners[key] = step.type
        ref = StepRef(key=key, type=step.type, config=config)
        transient = {
            "ErrorEquals": [TransientError.error_name],
            "IntervalSeconds": 1,
            "MaxAttempts": 3,
            "BackoffRate": 2.0,
            "JitterStrategy": "FULL",
        }
        return Task(
            resource=f"{LAMBDA_INVOKE}.waitForTaskToken",
            parameters=task_parameters(self.c.options.arn(step.type), ref, task_token=True),
            result_selector=result_selector,
            result_path=f"$.steps.{key}",
            timeout_seconds=step.timeout_seconds,
            retry=[*self.retriers(None), transient],
            catch=self.catchers(key, None),
        )

    def emit_approval(self, key: str, step: Any) -> None:
        """The decision ``{approved, option, data, responder, responded_at, timed_out}`` lands
        at ``$.steps.<key>.output``; a Choice routes on the option (``branches``), then on
        ``approved`` (``on_approve`` / ``on_reject``). Expiry (``States.Timeout``): ``fail``
        takes the failure route; ``approve`` / ``reject`` write that decision with
        ``timed_out: true`` and route like one; ``route`` takes ``on_timeout``."""
        config = step.model_dump(
            mode="json",
            include={
                "title",
                "description",
                "prompt",
                "options",
                "form_schema",
                "assigned_to",
                "assigned_role",
                "timeout_action",
                "timeout_seconds",
                "notification_channels",
            },
            exclude_none=True,
        )
        task = self.callback_task(key, step, config, {"output.$": "$", "status": SUCCEEDED})
        route = f"{key}.route"
        output = f"$.steps.{key}.output"
        choices: list[dict[str, Any]] = [
            {
                "And": [
                    {"Variable": f"{output}.option", "IsString": True},
                    {"Variable": f"{output}.option", "StringEquals": name},
                ],
                "Next": self.route(key, target),
            }
            for name, target in sorted((step.branches or {}).items())
        ]
        for decided, target in ((True, step.on_approve), (False, step.on_reject)):
            if target:
                choices.append(
                    {
                        "Variable": f"{output}.approved",
                        "BooleanEquals": decided,
                        "Next": self.route(key, target),
                    }
                )
        timeout_catch: dict[str, Any] | None = None
        if step.timeout_action in ("approve", "reject"):
            timed_out = f"{key}.timed_out"
            decision = {
                "approved": step.timeout_action == "approve",
                "option": step.timeout_action if step.timeout_action in step.options else None,
                "data": None,
                "responder": None,
                "responded_at": None,
                "timed_out": True,
            }
            self.machine.add(
                timed_out,
                Pass(
                    result={"output": decision, "status": SUCCEEDED},
                    result_path=f"$.steps.{key}",
                    next=route if choices else None,
                    end=not choices,
                ),
            )
            timeout_catch = {"ErrorEquals": ["States.Timeout"], "ResultPath": None}
            timeout_catch["Next"] = timed_out
        elif step.timeout_action == "route" and step.on_timeout:
            timeout_catch = {
                "ErrorEquals": ["States.Timeout"],
                "ResultPath": "$.error",
                "Next": self.route(key, step.on_timeout),
            }
        if timeout_catch is not None:
            task.catch = [timeout_catch, *task.catch]
        if not choices:
            self.machine.add(key, self.flow(task, key, None))
            return
        task.next = route
        self.machine.add(key, task)
        self.machine.add(route, Choice(choices=choices, default=self.end_state(key)))

    def emit_waitpoint(self, key: str, step: Any) -> None:
        """The completion data is the output; ``/fail`` fails the step with
        ``Relayflow.WaitpointFailed`` (routed like any failure); expiry takes ``on_timeout``
        when set, else fails the step with ``States.Timeout``."""
        config = step.model_dump(
            mode="json", include={"label", "idempotency_key", "timeout_seconds"}, exclude_none=True
        )
        task = self.callback_task(key, step, config, {"output.$": "$.data", "status": SUCCEEDED})
        if step.on_timeout:
            timeout_catch = {
                "ErrorEquals": ["States.Timeout"],
                "ResultPath": "$.error",
                "Next": self.route(key, step.on_timeout),
            }
            task.catch = [timeout_catch, *task.catch]
        self.machine.add(key, self.flow(task, key, step.on_success))

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

    def emit_sub_workflow(self, key: str, step: SubWorkflowStep) -> None:
        """Start the child workflow's state machine (a pinned version, or the ``live`` alias)
        with ``startExecution.sync:2`` and wait for it.

        ``<key>.depth`` refuses to go deeper than :data:`MAX_SUB_WORKFLOW_DEPTH`;
        ``<key>.prepare`` draws the child's run id (``$.steps.<key>.run_id``), and each attempt
        runs as ``md5(<run id>-<retry count>)`` (32 hex digits, an API run id) so a retried step
        starts a fresh child. The child's
        input is a standard state document (``run.depth`` one more, ``run.parent`` set). The
        step output is ``{"run_id", "steps"}``: the child's run id and its final ``steps``.
        A child failure (``States.TaskFailed``, whose Cause is the child's DescribeExecution)
        is re-raised as ``Relayflow.SubWorkflowFailed`` with a JSON Cause
        ``{child_run_id, status, error, cause}``, after the step's retries.
        """
        self.c.runners[key] = "native"
        self.c.children.add(step.workflow_id)
        failure = self.failure_target(key)
        guard, too_deep, prepare = f"{key}.depth", f"{key}.too_deep", f"{key}.prepare"
        self.machine.add(
            guard,
            Choice(
                choices=[
                    {
                        "Variable": "$.run.depth",
                        "NumericGreaterThanEquals": MAX_SUB_WORKFLOW_DEPTH,
                        "Next": too_deep,
                    }
                ],
                default=prepare,
            ),
        )
        self.raise_error(
            too_deep,
            SubWorkflowDepth.error_name,
            f"sub_workflow '{key}' would start '{step.workflow_id}' deeper than "
            f"{MAX_SUB_WORKFLOW_DEPTH} levels of nesting",
            failure,
        )
        self.machine.add(
            prepare,
            Pass(
                parameters={"run_id.$": "States.UUID()", "status": "started"},
                result_path=f"$.steps.{key}",
                next=key,
            ),
        )
        target = self.c.options.state_machine_arn(step.workflow_id)
        target += f":{step.version}" if step.version is not None else f":{LIVE_ALIAS}"
        # 32 hex digits, like every run id the API accepts: a hash of the attempt's own UUID
        # and retry count, so each attempt (and each for_each item or loop pass) is new.
        child_run_id = (
            f"States.Hash(States.Format('{{}}-{{}}', $.steps.{key}.run_id, "
            "$$.State.RetryCount), 'MD5')"
        )
        trigger = template_to_parameters({"trigger": step.input})
        assert trigger is not None  # validation refuses an input that is not native
        policy = step.retry
        if policy is not None and policy.retry_on:
            # The child's failure reaches Retry as States.TaskFailed; it is renamed after.
            renamed = [
                "States.TaskFailed" if name == SubWorkflowFailed.error_name else name
                for name in policy.retry_on
            ]
            policy = policy.model_copy(update={"retry_on": renamed})
        failed = self.emit_sub_workflow_failure(key, failure)
        task = Task(
            resource=START_EXECUTION_SYNC,
            parameters={
                "StateMachineArn": target,
                "Name.$": child_run_id,
                "Input": {
                    "run": {
                        "id.$": child_run_id,
                        "workflow_id": step.workflow_id,
                        "version": step.version,
                        "tenant.$": "$.run.tenant",
                        "dry_run.$": "$.run.dry_run",
                        "started_at.$": "$$.State.EnteredTime",
                        "depth.$": "States.MathAdd($.run.depth, 1)",
                        "parent": {
                            "run_id.$": "$.run.id",
                            "workflow_id.$": "$.run.workflow_id",
                            "step": key,
                        },
                    },
                    **trigger,
                    "steps": {},
                    "AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID.$": "$$.Execution.Id",
                },
            },
            result_selector={
                "output": {"run_id.$": "$.Name", "steps.$": "$.Output.steps"},
                "status": SUCCEEDED,
            },
            result_path=f"$.steps.{key}",
            timeout_seconds=step.timeout_seconds,
            retry=[
                rule
                for rule in self.retriers(policy)
                if rule["ErrorEquals"] != LAMBDA_SERVICE_ERRORS
            ],
            catch=self.catchers(key, policy, failure_state=failed),
        )
        wait = self.machine.states.get(f"{key}.retry_wait")
        if isinstance(wait, Wait):
            # A linear retry starts a fresh child (a new run id), like an ASL retry does.
            wait.next = prepare
        self.machine.add(key, self.flow(task, key, step.on_success))

    def emit_sub_workflow_failure(self, key: str, failure: str | None) -> str:
        """States that turn a child's failure into ``Relayflow.SubWorkflowFailed`` and take the
        step's failure route (or fail the run). Any other error (a timeout, a refused start)
        passes unchanged."""
        check, parse, merge, pick, raise_ = (
            f"{key}.child_failed",
            f"{key}.child_parse",
            f"{key}.child_merge",
            f"{key}.child_pick",
            f"{key}.child_raise",
        )
        onward = failure or self.reraise_state(key)
        self.machine.add(
            check,
            Choice(
                choices=[
                    {
                        "And": [
                            {"Variable": "$.error.Error", "StringEquals": "States.TaskFailed"},
                            {"Variable": "$.error.Cause", "StringMatches": "{*}"},
                        ],
                        "Next": parse,
                    }
                ],
                default=onward,
            ),
        )
        # Error and Cause are absent from a DescribeExecution that has none: default to null.
        self.machine.add(
            parse,
            Pass(
                parameters={
                    "defaults": {"Error": None, "Cause": None},
                    "child.$": "States.StringToJson($.error.Cause)",
                },
                result_path="$.error",
                next=merge,
            ),
        )
        self.machine.add(
            merge,
            Pass(
                parameters={"child.$": "States.JsonMerge($.error.defaults, $.error.child, false)"},
                result_path="$.error",
                next=pick,
            ),
        )
        self.machine.add(
            pick,
            Pass(
                parameters={
                    "child_run_id.$": "$.error.child.Name",
                    "status.$": "$.error.child.Status",
                    "error.$": "$.error.child.Error",
                    "cause.$": "$.error.child.Cause",
                },
                result_path="$.error",
                next=raise_,
            ),
        )
        self.machine.add(
            raise_,
            Pass(
                parameters={
                    "Error": SubWorkflowFailed.error_name,
                    "Cause.$": "States.JsonToString($.error)",
                },
                result_path="$.error",
                next=onward,
            ),
        )
        return check

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


def compile_workflow(workflow: Workflow, options: CompileOptions | None = None) -> CompiledWorkflow:
    """Compile a validated workflow. Call :func:`relayflow.definition.validate_data` (or
    ``load_workflow``) first: the compiler assumes references and scopes are sound."""
    options = options or CompileOptions()
    compiler = _Compiler(workflow, options)
    asl = compiler.compile()
    runners = dict(sorted(compiler.runners.items()))
    functions = sorted({r for r in runners.values() if r != "native"})
    return CompiledWorkflow(
        asl=asl,
        iam_statements=_iam_statements(options, functions, sorted(compiler.children)),
        step_runners=runners,
    )
