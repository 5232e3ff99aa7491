"""Which Step Functions engine runs a workflow: Standard or Express.

Express prices a run by request and duration instead of by state transition, so a short
workflow costs one to two orders of magnitude less on it. It also differs: a run lasts at
most five minutes, a run is at-least-once (a step may be invoked twice), it has no
``.waitForTaskToken`` or ``.sync`` integrations, no execution history API and no status
change events. :func:`choose_engine` picks Express for ``engine: auto`` only where none of
that can change what the workflow does:

1. no step waits for a callback or a child execution (approval, waitpoint, wait_for_event,
   sub_workflow, llm_batch's poll loop, an agent's approval tools, a step that parks on
   error); with the compiled machine at hand, any ``.waitForTaskToken`` or ``.sync`` Task
   refuses it too, whatever step kind emitted it;
2. the longest possible run is under five minutes: the smaller of ``run_timeout_seconds``
   and a bound over the steps (every step once; a for_each item step once per round of
   ``max_concurrency``; the steps of cycles ``max_steps_per_run`` times), each step counted
   with its delay, or its attempts × timeout plus the retry waits between them;
3. every acting step records its result under its step identity
   (:mod:`relayflow.steps.idempotency`), so a duplicate invocation acts once;
4. no workflow setting needs the recorder to see the run end at once: ``singleton`` and
   ``concurrency`` release their slot at the end, ``notifications`` and the workflow
   ``breaker`` act on it, and ``cancel_on`` stops executions (Express executions cannot be
   stopped).

Pure and deterministic: a validated workflow in, an :class:`EngineChoice` out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from relayflow.compiler.asl import THROTTLED_RETRY
from relayflow.compiler.plan import WorkflowPlan
from relayflow.definition.effective import effective_workflow
from relayflow.definition.models import Workflow
from relayflow.definition.policies import RetryPolicy
from relayflow.definition.problems import Problem

Engine = Literal["standard", "express"]


class CompiledMachine(Protocol):
    """What the choice reads of a compiled workflow
    (:class:`relayflow.compiler.options.CompiledWorkflow`): its ASL."""

    asl: dict[str, Any]


#: The longest an Express execution may run (Step Functions' hard limit).
EXPRESS_MAX_SECONDS = 300
#: Iterations an inline Map runs at once when ``max_concurrency`` is 0 (no limit): Step
#: Functions runs up to 40 concurrently.
INLINE_MAP_PARALLELISM = 40
#: Each step function's timeout in ``template.yaml`` (a Task without ``timeout_seconds``
#: runs until its Lambda times out). A unit test keeps this in step with the template.
FUNCTION_TIMEOUT_SECONDS: dict[str, int] = {
    "agent": 900,
    "approval": 30,
    "code": 30,
    "condition": 30,
    "custom": 60,
    "llm_batch": 300,
    "tool": 60,
    "transform": 30,
    "wait_for_event": 30,
    "waitpoint": 30,
    "webhook_out": 60,
}
#: Step types that act on the world, and whether their function records the step's result
#: under its identity (``recorded_step`` / ``run_recorded``). ``tests/unit`` checks each
#: handler against this map; a new acting type missing here keeps its workflows Standard.
ACTING_STEP_TYPES: dict[str, bool] = {
    "agent": True,  # every model turn and tool call is a recorded part
    "code": True,
    "custom": True,
    "llm_batch": True,  # the submission is a recorded part
    "tool": True,
    "webhook_out": True,
}
#: Step types whose compiled states wait for a callback or a child execution.
CALLBACK_STEP_TYPES: dict[str, str] = {
    "approval": "waits for a decision (a callback Task)",
    "waitpoint": "waits for a callback (a callback Task)",
    "wait_for_event": "waits for an event (a callback Task)",
    "sub_workflow": "waits for a child run (startExecution.sync)",
    "llm_batch": "polls a batch job in a loop that may last hours",
}
_CALLBACK_SUFFIXES = (".waitForTaskToken", ".sync", ".sync:2")


@dataclass(frozen=True)
class EngineChoice:
    """The engine a workflow runs on and why. ``blocking_step`` names the step that keeps
    it off Express (``None`` when Express was chosen, or when a workflow setting decides).
    ``bound_seconds`` is the longest possible run the choice assumed (``None`` when the
    choice did not get as far as bounding it)."""

    engine: Engine
    reason: str
    blocking_step: str | None = None
    bound_seconds: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "reason": self.reason,
            "blocking_step": self.blocking_step,
            "bound_seconds": self.bound_seconds,
        }


@dataclass(frozen=True)
class _Blocker:
    step: str | None
    reason: str


def _parks(step: Any) -> bool:
    """A step that parks on error (``on_error: {action: park}``) waits for the resume API
    in a callback Task. Read by name, so the rule holds once the field exists."""
    on_error = getattr(step, "on_error", None)
    action = (
        on_error.get("action") if isinstance(on_error, dict) else getattr(on_error, "action", None)
    )
    return action == "park"


def _callback_blocker(workflow: Workflow, compiled: CompiledMachine | None) -> _Blocker | None:
    for key, step in workflow.steps.items():
        if step.type in CALLBACK_STEP_TYPES:
            return _Blocker(key, f"step '{key}' ({step.type}) {CALLBACK_STEP_TYPES[step.type]}")
        if step.type == "agent" and step.require_approval_tools:
            return _Blocker(key, f"step '{key}' (agent) asks for approval of a tool call")
        if _parks(step):
            return _Blocker(key, f"step '{key}' parks on error (a callback Task)")
        if step.type == "for_each" and step.distributed:
            # Its Map Run starts child executions and waits for them: Standard parents only.
            return _Blocker(key, f"step '{key}' (for_each) runs a Distributed Map")
    if compiled is not None:
        for name, resource in _task_resources(compiled.asl.get("States", {})):
            if resource.endswith(_CALLBACK_SUFFIXES):
                key = name.split(".", 1)[0]
                return _Blocker(key, f"state '{name}' waits on {resource}")
    return None


def _task_resources(states: dict[str, Any]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for name, state in states.items():
        if isinstance(state.get("Resource"), str):
            found.append((name, state["Resource"]))
        for branch in state.get("Branches", []):
            found += _task_resources(branch.get("States", {}))
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            found += _task_resources(processor.get("States", {}))
    return found


def _idempotency_blocker(workflow: Workflow) -> _Blocker | None:
    for key, step in workflow.steps.items():
        recorded = ACTING_STEP_TYPES.get(step.type)
        if recorded is False:
            return _Blocker(key, f"step '{key}' ({step.type}) acts without step idempotency")
    return None


def _setting_blocker(workflow: Workflow) -> _Blocker | None:
    if workflow.singleton is not None or workflow.concurrency is not None:
        rule = "singleton" if workflow.singleton is not None else "concurrency"
        return _Blocker(None, f"{rule} frees its slot when the recorder sees the run end")
    if workflow.cancel_on:
        return _Blocker(None, "cancel_on stops executions, and Express executions cannot stop")
    if workflow.notifications is not None or workflow.breaker is not None:
        # Settled by the maintenance sweep for Express: minutes late, not seconds.
        rule = "notifications" if workflow.notifications is not None else "breaker"
        return _Blocker(None, f"{rule} act when the recorder sees the run end")
    return None


def retry_waits(policy: RetryPolicy | None) -> int:
    """The longest total wait between the attempts of a step under ``policy`` (jitter only
    shortens a wait)."""
    if policy is None or policy.max_attempts <= 1:
        return 0
    cap = policy.max_delay_seconds or math.inf
    total = 0.0
    for n in range(1, policy.max_attempts):
        if policy.backoff == "fixed":
            delay = policy.base_seconds
        elif policy.backoff == "linear":
            delay = policy.base_seconds * n
        else:
            delay = policy.base_seconds * 2 ** (n - 1)
        total += min(delay, cap)
    return int(total)


def _throttled_waits() -> int:
    retry = THROTTLED_RETRY
    total = 0.0
    for n in range(retry["MaxAttempts"]):
        total += min(retry["IntervalSeconds"] * retry["BackoffRate"] ** n, retry["MaxDelaySeconds"])
    return math.ceil(total)


#: The retrier every Lambda Task gets (``ScopeContext.retriers``) retries a Lambda service
#: error, where the function did not run, 3 times, 1 + 2 + 4 s apart.
SERVICE_ERROR_WAITS = 7


def step_seconds(
    workflow: Workflow, key: str, native: set[str] | frozenset[str] = frozenset()
) -> int | None:
    """The longest one pass through step ``key`` can take, or ``None`` when nothing bounds it
    (a delay whose length comes from the run's data). ``native``: the condition and transform
    steps that compile to a Choice or Pass (they take no time)."""
    step = workflow.steps[key]
    if step.type == "delay":
        return step.seconds if isinstance(step.seconds, int) else None
    if step.type in ("noop", "parallel", "for_each") or key in native:
        return 0  # their own states take no time; branches and items are counted as steps
    timeout = step.timeout_seconds or FUNCTION_TIMEOUT_SECONDS.get(step.type)
    if timeout is None:
        return None
    policy = step.retry
    attempts = policy.max_attempts if policy is not None else 1
    seconds = attempts * timeout + retry_waits(policy) + SERVICE_ERROR_WAITS
    if step.concurrency is not None or step.rate_limit is not None:
        seconds += _throttled_waits()
    return seconds


def longest_run_seconds(
    workflow: Workflow, plan: WorkflowPlan | None = None
) -> tuple[int | None, str | None]:
    """An upper bound on a run's length in seconds and the step that decides it: the longest
    step, or the step that leaves the run unbounded (``None``). Every step counts once; the
    item step of a for_each once per round of ``max_concurrency``; the steps of cycles
    ``max_steps_per_run`` times the longest of them. ``run_timeout_seconds`` caps it.
    ``plan``: the graph facts of ``workflow`` at hand (the driver that compiled it)."""
    if plan is None:
        plan = WorkflowPlan(workflow)
    native = plan.native_steps()
    in_cycles = {k for s in plan.scopes for c in plan.graph.cycles(s) for k in c}
    rounds: dict[str, int] = {}
    for step in workflow.steps.values():
        if step.type == "for_each":
            width = min(step.max_concurrency or INLINE_MAP_PARALLELISM, step.max_items)
            rounds[step.step] = math.ceil(step.max_items / width)
    total, longest, longest_key, cycle_max = 0, -1, None, 0
    for key in workflow.steps:
        seconds = step_seconds(workflow, key, native)
        if seconds is None:
            # The run timeout still bounds a run whose delay the data decides.
            return (
                (workflow.run_timeout_seconds, key)
                if workflow.run_timeout_seconds < (EXPRESS_MAX_SECONDS)
                else (None, key)
            )
        if key in in_cycles:
            cycle_max = max(cycle_max, seconds)
        else:
            total += seconds * rounds.get(key, 1)
        if seconds > longest:
            longest, longest_key = seconds, key
    total += cycle_max * workflow.max_steps_per_run
    return min(total, workflow.run_timeout_seconds), longest_key


def _compensates(workflow: Workflow) -> bool:
    """Whether a step declares ``compensate`` (directly, or as a for_each's item step)."""
    return any(getattr(step, "compensate", None) is not None for step in workflow.steps.values())


def _auto(
    workflow: Workflow, compiled: CompiledMachine | None, plan: WorkflowPlan | None
) -> EngineChoice:
    for check in (
        lambda: _callback_blocker(workflow, compiled),
        lambda: _idempotency_blocker(workflow),
        lambda: _setting_blocker(workflow),
    ):
        blocker = check()
        if blocker is not None:
            return EngineChoice("standard", blocker.reason, blocker.step)
    bound, key = longest_run_seconds(workflow, plan)
    if bound is None:
        return EngineChoice(
            "standard", f"step '{key}' (delay) waits as long as the run's data says", key
        )
    if bound >= EXPRESS_MAX_SECONDS:
        return EngineChoice(
            "standard",
            f"a run may last {bound} s (step '{key}' is the longest), over Express's "
            f"{EXPRESS_MAX_SECONDS} s",
            key,
            bound,
        )
    if bound >= workflow.run_timeout_seconds and _compensates(workflow):
        # A timed-out saga run is compensated from its execution history (its last $.saga),
        # and Express keeps none (docs/reliability.md, saga compensation).
        return EngineChoice(
            "standard",
            f"a run may reach run_timeout_seconds ({workflow.run_timeout_seconds} s), and a "
            "timed-out saga run is compensated from its execution history, which Express "
            "does not keep",
            key,
            bound,
        )
    return EngineChoice(
        "express",
        f"short ({bound} s at most), no callbacks, every acting step idempotent",
        None,
        bound,
    )


def choose_engine(
    workflow: Workflow, compiled: CompiledMachine | None = None, plan: WorkflowPlan | None = None
) -> EngineChoice:
    """The engine ``workflow`` runs on. ``engine: standard`` is always honoured; ``engine:
    express`` is honoured when Express is safe (else the choice is Standard and the reason
    says why: validation reports it); ``engine: auto`` picks Express exactly when it is safe.
    ``compiled``, when given, lets any callback or ``.sync`` Task in the machine refuse
    Express too; ``plan``, the compilation that made it, lends its graph facts."""
    # Judge what the machine does: the workflow's and the seed's defaults applied.
    workflow = effective_workflow(workflow)
    requested = getattr(workflow, "engine", "auto")
    if requested == "standard":
        return EngineChoice("standard", "engine: standard in the definition")
    choice = _auto(workflow, compiled, plan)
    if requested == "express" and choice.engine == "express":
        return EngineChoice(
            "express", "engine: express in the definition", None, choice.bound_seconds
        )
    return choice


def engine_problems(workflow: Workflow, file: str | None) -> list[Problem]:
    """The problem with ``engine: express`` on a workflow Express cannot run unchanged: at
    the blocking step's path (``steps.<key>``), or at ``engine`` when a setting decides."""
    if getattr(workflow, "engine", "auto") != "express":
        return []
    choice = choose_engine(workflow)
    if choice.engine == "express":
        return []
    path = f"steps.{choice.blocking_step}" if choice.blocking_step else "engine"
    return [
        Problem(
            file,
            path,
            "engine",
            f"engine: express is not possible: {choice.reason}; use engine: standard or auto",
        )
    ]
