"""The compiler's driver: walks the step graph scope by scope and hands each step to its
kind's emitter (through :class:`ScopeContext`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.compiler.compensation import with_compensation
from relayflow.compiler.on_error import RUN_FLAGS
from relayflow.compiler.options import CompileOptions
from relayflow.compiler.plan import WorkflowPlan
from relayflow.compiler.scope import ScopeContext
from relayflow.compiler.states import Pass, ScopeMachine, carry_through
from relayflow.definition.graph import Scope
from relayflow.definition.models import Workflow
from relayflow.errors import BASE_NON_RETRYABLE_ERRORS, NON_RETRYABLE_ERRORS

#: The first state of a machine that carries ``$.run_flags`` (:meth:`Driver.compile`).
FLAGS_INIT = "_flags"


class Driver(WorkflowPlan):
    """One compilation of one workflow: the graph, its scopes (:class:`WorkflowPlan`), and
    what the emitted states need from outside their scope (step runners, sub_workflow
    children, cycle counters): the :class:`~relayflow.compiler.emitter.Compilation` the step
    kinds see as ``ctx.c``."""

    def __init__(self, workflow: Workflow, options: CompileOptions) -> None:
        super().__init__(workflow)
        self.options = options
        self.runners: dict[str, str] = {}
        #: Workflow ids the sub_workflow steps start (for the IAM statements).
        self.children: set[str] = set()
        #: Function kinds that auxiliary states invoke besides the steps' runners (a park's
        #: callback Task, a fallback rendered in the transform function).
        self.functions: set[str] = set()
        #: Distributed for_each steps → the bucket their items are read from (None: from the
        #: state document), for the IAM statements.
        self.distributed: dict[str, str | None] = {}
        #: The errors no retry policy retries (the AI steps' only where the machine has one).
        self.non_retryable: list[str] = list(
            NON_RETRYABLE_ERRORS
            if any(s.type in ("agent", "llm_batch") for s in self.wf.steps.values())
            else BASE_NON_RETRYABLE_ERRORS
        )

    # ------------------------------------------------------------------ scopes

    def compile(self) -> dict[str, Any]:
        main = self.compile_scope(self.scopes[0], mode="main")
        flags = self.carries_run_flags()
        if flags:
            carry_through(main, "run_flags")
        main = with_compensation(ScopeContext(self, main, "main", set()))
        if flags:
            # Present from the start, so every Parallel can carry it whether a fallback was
            # used before it or not (a path that names an absent field fails the state).
            init = Pass(result={}, result_path=RUN_FLAGS, next=main.start_at)
            main = ScopeMachine(FLAGS_INIT, {FLAGS_INIT: init, **main.states})
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

    def carries_run_flags(self) -> bool:
        """Whether ``$.run_flags`` must travel through the states that rebuild the document:
        a step may continue with a fallback (which sets it) and a parallel rebuilds the
        document from its branches (which would drop it)."""
        types = {step.type for step in self.wf.steps.values()}
        return "parallel" in types and any(
            getattr(getattr(step, "on_error", None), "action", None) == "continue"
            for step in self.wf.steps.values()
        )

    def scope_for(self, entry: str, owner: str) -> Scope:
        for scope in self.scopes:
            if scope.entry == entry and scope.owner == owner:
                return scope
        raise KeyError(f"no scope {owner}/{entry}")  # validation guarantees it exists

    def compile_scope(self, scope: Scope, mode: str, *, settle: bool = False) -> ScopeMachine:
        """``mode``: ``main`` (the state machine) or ``branch`` (a Parallel branch);
        ``settle``: a branch of a ``settle: all`` parallel (see :meth:`ScopeContext.settled`)."""
        machine = ScopeMachine(self.entry_state(scope.entry))
        back_edges = self.graph.back_edges(scope)
        cycle_size = {k: len(c) for c in self.graph.cycles(scope) for k in c}
        ctx = ScopeContext(self, machine, mode, back_edges)
        ctx.in_cycle = set(cycle_size)
        ctx.settle = settle
        #: State name → the step whose emitter (or loop guard) added it.
        owners: dict[str, str] = {}
        for key in scope.steps:
            ctx.emit(key, self.wf.steps[key])
            owners.update(dict.fromkeys(added_states(machine, owners), key))
        for header in sorted({target for _, target in back_edges}):
            ctx.emit_loop_guard(header, cycle_size.get(header, 1))
            owners.update(dict.fromkeys(added_states(machine, owners), header))
        if mode == "main":
            self.drop_unrouted_handler(machine, owners)
        return machine

    def drop_unrouted_handler(self, machine: ScopeMachine, owners: dict[str, str]) -> None:
        """Remove the states of the workflow-wide error handler (and of the steps only it
        leads to) when no compiled state routes to them: the route applies only to states
        that can catch (``Task``, ``Parallel``, ``Map``) or raise a compiled failure, and a
        state nothing enters is a definition Step Functions refuses. Their runners go too."""
        handler_only = self.graph.handler_only()
        if not handler_only:
            return
        reached = machine.reachable()
        entered = {owner for name, owner in owners.items() if name in reached}
        # A step of which some state is entered stays whole (the check reports the rest).
        dropped = handler_only - entered
        for name, owner in owners.items():
            if owner in dropped:
                del machine.states[name]
        for scope in self.scopes:
            if scope.owner in dropped:
                dropped.update(scope.steps)
        for key in dropped:
            self.runners.pop(key, None)

    def compile_item(self, owner: str, item_step: str, *, item_continue: bool) -> ScopeMachine:
        """A for_each item processor: its single step ends with its own record as output.
        With ``item_continue`` a failed item is recorded and the Map goes on."""
        item_scope = self.scope_for(item_step, owner)
        machine = ScopeMachine(self.entry_state(item_scope.entry))
        ctx = ScopeContext(self, machine, "item", set())
        ctx.item_continue = item_continue
        ctx.emit(item_step, self.wf.steps[item_step])
        return machine


def added_states(machine: ScopeMachine, owners: Mapping[str, str]) -> list[str]:
    """The names of the states added to ``machine`` since ``owners`` was last brought up to
    date, in the order they were added. :meth:`ScopeMachine.add` only appends, so they are the
    names at the end that ``owners`` does not hold yet: reading from the end keeps a scope's
    compilation linear in its states (reading the whole machine after every step did not)."""
    added: list[str] = []
    for name in reversed(machine.states):
        if name in owners:
            break
        added.append(name)
    return added[::-1]
