"""One scope's compilation context: routing between states, retries and catches, the
compiled linear-retry loop, the cycle guard, and the Lambda / callback Tasks that several
step kinds share. Each step kind's own states come from :mod:`relayflow.compiler.kinds`."""

from __future__ import annotations

from typing import Any

from relayflow.compiler.asl import (
    LAMBDA_INVOKE,
    LAMBDA_SERVICE_ERRORS,
    SUCCEEDED,
    THROTTLED_RETRY,
    TRANSIENT_RETRY,
    over_limit,
)
from relayflow.compiler.emitter import Compilation
from relayflow.compiler.kinds.agent import agent_config
from relayflow.compiler.on_error import on_error_entry
from relayflow.compiler.plan import must_catch
from relayflow.compiler.registry import EMITTERS
from relayflow.compiler.states import Choice, Fail, Pass, ScopeMachine, State, Succeed, Task, Wait
from relayflow.definition.policies import RetryPolicy
from relayflow.document import StepRef, task_parameters
from relayflow.errors import MaxStepsExceeded

#: Fields of a step model that are routing or policy, not the config a step Lambda needs.
NOT_CONFIG = {
    "type",
    "name",
    "description",
    "on_success",
    "on_failure",
    "on_error",
    "retry",
    "timeout_seconds",
    "on_true",
    "on_false",
    "compensate",
}


def kept_steps(keep: tuple[str, ...]) -> dict[str, Any]:
    """``Pass`` fields that rebuild ``$.steps`` with only the outputs in ``keep`` (each of
    them present on every path here: the liveness plan guarantees it)."""
    if not keep:
        return {"result": {}, "result_path": "$.steps"}
    return {"parameters": {f"{k}.$": f"$.steps.{k}" for k in keep}, "result_path": "$.steps"}


def own_result(state: State, key: str) -> bool:
    """Make ``state`` (a Task or Map writing ``$.steps.<key>`` through a ``ResultSelector``)
    replace ``$.steps`` with its own record alone; ``False`` when it cannot."""
    selector = getattr(state, "result_selector", None)
    path = getattr(state, "result_path", None)
    if path == "$.steps" and isinstance(selector, dict) and list(selector) == [key]:
        return True  # already done by an earlier call
    if path != f"$.steps.{key}" or not isinstance(selector, dict):
        return False
    state.result_selector = {key: selector}  # type: ignore[attr-defined]
    state.result_path = "$.steps"  # type: ignore[attr-defined]
    return True


class ScopeContext:
    """Compiles the steps of one scope (the state machine, a Parallel branch or a for_each
    item processor) into ``machine``: the :class:`~relayflow.compiler.emitter.Emitter` the
    step kinds receive."""

    def __init__(
        self,
        compiler: Compilation,
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
        #: A branch of a ``settle: all`` parallel: a failure nothing routes ends the branch
        #: with the failed step's record (``<key>.settled``) instead of failing the Parallel.
        self.settle = False

    def emit(self, key: str, step: Any) -> None:
        """Add the states of step ``key`` (its kind's emitter) to this scope."""
        EMITTERS[step.type](self, key, step)

    # ------------------------------------------------------------------ wiring helpers

    def step_result_path(self, key: str) -> str:
        """Where step ``key``'s result ``{output, status, …}`` lands in the state document."""
        return f"$.steps.{key}"

    def route(self, source: str, target: str | None) -> str | None:
        if target is None:
            return None
        if (source, target) in self.back_edges:
            return f"{target}.loop"
        return self.c.entry_state(target)

    def end_state(self, key: str) -> str:
        """A Succeed state for routes that end the run (or branch) early; a Pass that also
        drops the outputs the final output does not keep, where the liveness plan says so."""
        name = f"{key}.done"
        if name not in self.machine.states:
            keep = self.c.liveness.end_prunes.get(key) if self.mode == "main" else None
            if keep is None:
                self.machine.add(name, Succeed())
            else:
                self.machine.add(name, Pass(**kept_steps(keep), end=True))
        return name

    def fold(self, key: str, record: dict[str, Any]) -> dict[str, Any]:
        """``Pass`` fields that write step ``key``'s record (``record``: its ``Parameters``)
        and, where the liveness plan folds a drop into this step, rebuild ``$.steps`` with
        only the outputs still live: the drop costs no extra transition."""
        keep = self.c.liveness.folds.get(key) if self.mode != "item" else None
        if keep is None:
            return {"parameters": record, "result_path": self.step_result_path(key)}
        parameters = {f"{k}.$": f"$.steps.{k}" for k in keep}
        parameters[key] = record
        return {"parameters": parameters, "result_path": "$.steps"}

    def flow(self, state: State, key: str, target: str | None) -> State:
        next_name = self.route(key, target)
        keep = self.c.liveness.prunes.get(key) if self.mode != "item" else None
        if keep is not None and key in self.c.liveness.own_results and own_result(state, key):
            keep = None  # the state's own ResultSelector leaves only its record in $.steps
        if keep is not None:
            # Drop the outputs no later reader needs, on the way to the next step.
            name = f"{key}.prune"
            prune = self.machine.states.get(name)
            if not isinstance(prune, Pass):
                prune = Pass(**kept_steps(keep))
                self.machine.add(name, prune)
            prune.next, prune.end = next_name, next_name is None
            state.next, state.end = name, False  # type: ignore[attr-defined]
            return state
        if next_name is not None:
            state.next = next_name  # type: ignore[attr-defined]
        else:
            state.end = True  # type: ignore[attr-defined]
            if self.mode == "item":
                state.output_path = f"$.steps.{key}"  # type: ignore[attr-defined]
        return state

    def failure_target(self, key: str) -> str | None:
        """Where a failure of step ``key`` goes once its retries are spent: its error route,
        or in a for_each item that continues past failures, the state recording the failed
        item (so a step's own failure handling, such as a sub_workflow renaming its child's
        failure or a linear retry, runs before the item is recorded)."""
        if self.mode == "item" and self.item_continue:
            return self.item_failed(key)
        on_error = getattr(self.c.wf.steps.get(key), "on_error", None)
        if on_error is not None and self.mode == "main":
            return on_error_entry(self, key, on_error)
        target = self.route(key, self.c.graph.failure_route(key))
        if target is None and self.settle:
            return self.settled(key)
        return target

    def settled(self, key: str) -> str:
        """The end of a settling branch whose step ``key`` failed: the step's record becomes
        ``{"status": "failed", "error": {"Error", "Cause"}}`` and the branch ends there."""
        name = f"{key}.settled"
        if name not in self.machine.states:
            record = {"status": "failed", "error.$": "$.error"}
            self.machine.add(
                name, Pass(parameters=record, result_path=self.step_result_path(key), end=True)
            )
        return name

    def item_failed(self, key: str) -> str:
        """The end state of a for_each item whose step failed: ``{status, error}``."""
        name = f"{key}.item_failed"
        if name not in self.machine.states:
            self.machine.add(
                name,
                Pass(parameters={"status": "failed", "error.$": "$.error"}, end=True),
            )
        return name

    def must_catch(self, step: Any) -> bool:
        """Whether ``step`` needs its Lambda to retry, catch or time out here
        (:func:`relayflow.compiler.plan.must_catch`)."""
        return must_catch(step, item_continue=self.mode == "item" and self.item_continue)

    def document_selector(self, prefix: str) -> dict[str, Any]:
        """The state document's fields, read from ``prefix`` (``$`` or ``$[0]``)."""
        selector = {"run.$": f"{prefix}.run", "trigger.$": f"{prefix}.trigger"}
        if self.c.has_cycles:
            selector["counters.$"] = f"{prefix}.counters"
        return selector

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
            retry.append({"ErrorEquals": list(self.c.non_retryable), "MaxAttempts": 0})
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
                        "ErrorEquals": list(self.c.non_retryable),
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
        if failure:
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
                cap, over_limit(f"{counter}.delay", policy.max_delay_seconds, capped, wait)
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

    def emit_loop_guard(self, header: str, size: int) -> None:
        """On every edge that closes a cycle: count the cycle's steps, stop past the limit."""
        loop, guard, exceeded = f"{header}.loop", f"{header}.guard", f"{header}.exceeded"
        self.machine.add(
            loop,
            Pass.intrinsic(
                "steps", f"States.MathAdd($.counters.steps, {size})", "$.counters", guard
            ),
        )
        self.machine.add(
            guard,
            over_limit(
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
            self.step_limit_route(header),
        )

    def step_limit_route(self, header: str) -> str | None:
        """Where ``Relayflow.MaxStepsExceeded`` goes from the cycle through ``header``: its
        error route (own, else the workflow-wide one) when no step that route leads to sits
        on a cycle of this scope. Past the limit every route that closes a cycle fails again
        (the counter only grows), so a route that can re-enter a cycle would never end the
        run: then the run fails (``None``)."""
        candidates = [self.c.graph.failure_route(header)]
        handler = self.c.wf.errors.on_failure
        if self.mode == "main" and handler in self.c.scopes[0].steps:
            candidates.append(handler)
        for target in candidates:
            # Routes stay in their scope, so a cycle the route leads to is one of this scope.
            if target is not None and not self.c.reach.leads_to_cycle(target):
                return self.c.entry_state(target)
        return self.settled(header) if self.settle else None

    # ------------------------------------------------------------------ shared Tasks

    def step_config(self, step: Any) -> dict[str, Any]:
        """What the step's Lambda needs from the definition (routing and policy stay in ASL).
        A tool step calling ``http.<name>[.<operation>]`` carries that HTTP tool's declaration
        with only the operation it calls (none for a generic call): every step pays for its
        own call, not for the whole API. A custom step carries its branch names (their targets
        are routing)."""
        config = step.model_dump(mode="json", exclude=NOT_CONFIG, exclude_none=True)
        if step.type == "tool" and step.tool.startswith("http."):
            _, name, *operation = step.tool.split(".")
            config["http_tool"] = self.c.wf.http_tools[name].model_dump(
                mode="json", exclude_none=True
            )
            operations = config["http_tool"]["operations"]
            config["http_tool"]["operations"] = {op: operations[op] for op in operation}
        if step.type == "custom":
            config["branches"] = sorted(step.branches)
        if step.type == "agent":
            agent_config(config, step, self.c.wf.http_tools, self.c.options.workflow_input_schemas)
        return config

    def lambda_task(
        self, key: str, step: Any, kind: str, next_target: str | None, *, then: str | None = None
    ) -> Task:
        """A ``lambda:invoke`` Task running ``step`` in the ``kind`` function, with the step's
        retries and catches (and, on a cycle, the reset of its linear-retry counter).

        On success it goes to step ``next_target`` (or ends the scope), or, with ``then``, to
        that auxiliary state of this step (e.g. the Choice routing on its result). The Task
        and the reset state between it and its successor carry exactly one of Next / End."""
        self.c.runners[key] = kind
        config = self.step_config(step)
        task = Task(
            resource=LAMBDA_INVOKE,
            parameters=task_parameters(
                self.c.options.arn(kind), StepRef(key=key, type=step.type, config=config)
            ),
            result_selector={"output.$": "$.Payload.output", "status": SUCCEEDED},
            result_path=self.step_result_path(key),
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
            self.machine.add(reset, self.onward(state, key, next_target, then))
            task.next = reset
            return task
        return self.onward(task, key, next_target, then)  # type: ignore[return-value]

    def onward(self, state: State, key: str, target: str | None, then: str | None) -> State:
        """``state`` goes to the auxiliary state ``then`` when given, else flows to step
        ``target`` (see :meth:`flow`)."""
        if then is None:
            return self.flow(state, key, target)
        state.next = then  # type: ignore[attr-defined]
        return state

    def callback_task(
        self, key: str, step: Any, config: dict[str, Any], result_selector: dict[str, Any]
    ) -> Task:
        """A ``lambda:invoke.waitForTaskToken`` Task: the step's function stores the request
        with ``$$.Task.Token``; the control API's ``SendTaskSuccess`` is the Task's result.
        Only the function's own transient failures are retried (each attempt gets a new
        token); the step's ``timeout_seconds`` is the expiry."""
        self.c.runners[key] = step.type
        ref = StepRef(key=key, type=step.type, config=config)
        return Task(
            resource=f"{LAMBDA_INVOKE}.waitForTaskToken",
            parameters=task_parameters(self.c.options.arn(step.type), ref, task_token=True),
            result_selector=result_selector,
            result_path=self.step_result_path(key),
            timeout_seconds=step.timeout_seconds,
            retry=[*self.retriers(None), dict(TRANSIENT_RETRY)],
            catch=self.catchers(key, None),
        )
