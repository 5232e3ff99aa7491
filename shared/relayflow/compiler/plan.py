"""What the compiler knows of a workflow before it emits a state: the effective definition,
its step graph and scopes, which steps compile to native states, and the liveness plan.

The driver compiles from a :class:`WorkflowPlan`; the engine choice and the document-size
estimate read one without compiling (they import this module, never the driver)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from relayflow.compiler.liveness import LivenessPlan, analyse
from relayflow.definition.effective import effective_workflow
from relayflow.definition.graph import RouteReach, StepGraph
from relayflow.definition.models import Workflow
from relayflow.expressions import condition_to_choice, template_to_parameters


def must_catch(step: Any, *, item_continue: bool = False) -> bool:
    """Native Pass and Choice states cannot retry, catch or time out: a step that asks for any
    of these runs in its Lambda instead (as does any step of a for_each item that continues
    past failures, ``item_continue``). The workflow-wide error route does not count: a native
    state can only fail with States.Runtime, which no Catch matches on AWS, so a Lambda would
    add cost without changing where the run goes."""
    return bool(
        step.retry
        or step.timeout_seconds
        or step.on_failure
        or getattr(step, "concurrency", None)
        or getattr(step, "rate_limit", None)
        or item_continue
    )


class WorkflowPlan:
    """One workflow's graph facts, computed once: ``wf`` (the effective workflow: its
    defaults filled in), ``graph``, ``scopes`` (the main flow first), ``has_cycles``, the
    native steps and the liveness plan."""

    def __init__(self, workflow: Workflow) -> None:
        # Compile what each step effectively says: the workflow's defaults filled in.
        workflow = effective_workflow(workflow)
        self.wf = workflow
        raw = {k: s.model_dump(mode="json", exclude_none=True) for k, s in workflow.steps.items()}
        self.graph = StepGraph(raw, workflow.start, workflow.errors.on_failure)
        self.scopes, _ = self.graph.scopes()
        self.has_cycles = any(self.graph.cycles(s) for s in self.scopes)

    @cached_property
    def reach(self) -> RouteReach:
        """Which steps can run before which (built on first use: the step limit's routes)."""
        return self.graph.route_reach()

    @cached_property
    def liveness(self) -> LivenessPlan:
        """Where the compiled machine drops outputs no later reader needs (computed on first
        use: the emitters, the document-size estimate)."""
        return analyse(self.wf, self.graph, self.scopes, self.native_steps())

    @cached_property
    def _native(self) -> frozenset[str]:
        native: set[str] = set()
        for key, step in self.wf.steps.items():
            if step.type == "condition":
                compiles = condition_to_choice(step.expression) is not None
            elif step.type == "transform":
                compiles = template_to_parameters({"output": step.mapping}) is not None
            else:
                continue
            if compiles and not must_catch(step):
                native.add(key)
        return frozenset(native)

    def native_steps(self) -> set[str]:
        """Condition and transform steps that compile to a native Choice / Pass outside a
        for_each item (their emitters make the same decision). Decided once per plan."""
        return set(self._native)

    def entry_state(self, key: str) -> str:
        """The state a route into step ``key`` enters: its main state, or the list and
        item-count checks in front of a for_each's Map, or the depth guard in front of a
        sub_workflow."""
        step = self.wf.steps[key]
        if step.type == "for_each":
            return f"{key}.list" if step.items is not None else key
        if step.type == "sub_workflow":
            return f"{key}.depth"
        return key
