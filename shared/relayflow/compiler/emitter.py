"""The protocol a step kind compiles through (:mod:`relayflow.compiler.kinds`).

A kind is ``emit(ctx, key, step)`` (:data:`KindEmitter`): it adds the step's states to
``ctx.machine`` (the main state named by the step key, auxiliary states ``<key>.<suffix>``)
and records in ``ctx.c.runners`` whether the step runs natively or in which function.
``ctx`` is an :class:`Emitter` (one scope being compiled: routing, retries, catches, the
shared Lambda and callback Tasks); ``ctx.c`` is the :class:`Compilation` (the whole
workflow's: definition, options, what the machine's role needs, nested scopes).

The driver hands both in (:class:`relayflow.compiler.scope.ScopeContext`,
:class:`relayflow.compiler.driver.Driver`); kinds, ``on_error`` and ``compensation`` import
only this module, so nothing below the driver imports it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from relayflow.compiler.liveness import LivenessPlan
from relayflow.compiler.options import CompileOptions
from relayflow.compiler.states import ScopeMachine, State, Task
from relayflow.definition.graph import RouteReach, Scope, StepGraph
from relayflow.definition.models import Workflow
from relayflow.definition.policies import RetryPolicy


class Compilation(Protocol):
    """One compilation of one workflow, as the emitters see it."""

    #: The effective workflow (its defaults filled in).
    wf: Workflow
    options: CompileOptions
    graph: StepGraph
    #: The scopes of the graph, the main flow first.
    scopes: list[Scope]
    has_cycles: bool
    #: Step key (or auxiliary state) → "native" or the function kind that runs it.
    runners: dict[str, str]
    #: Workflow ids the machine starts as children (IAM statements).
    children: set[str]
    #: Function kinds auxiliary states invoke besides the steps' runners.
    functions: set[str]
    #: Distributed for_each steps → the bucket their items are read from (None: the document).
    distributed: dict[str, str | None]
    #: The errors no retry policy retries.
    non_retryable: list[str]

    @property
    def liveness(self) -> LivenessPlan: ...

    @property
    def reach(self) -> RouteReach:
        """Which steps can run before which (:meth:`StepGraph.route_reach`)."""
        ...

    def entry_state(self, key: str) -> str:
        """The state a route into step ``key`` enters."""
        ...

    def scope_for(self, entry: str, owner: str) -> Scope:
        """The scope that starts at ``entry`` inside step ``owner`` (a parallel's branch)."""
        ...

    def compile_scope(self, scope: Scope, mode: str, *, settle: bool = False) -> ScopeMachine:
        """The states of a nested scope (``mode`` ``branch``: a Parallel branch)."""
        ...

    def compile_item(self, owner: str, item_step: str, *, item_continue: bool) -> ScopeMachine:
        """A for_each item processor running ``item_step``."""
        ...


class Emitter(Protocol):
    """One scope being compiled: what a step kind adds states through."""

    #: The whole compilation (definition, options, runners, nested scopes).
    c: Compilation
    #: The scope's states, in emission order.
    machine: ScopeMachine
    #: ``main`` (the state machine), ``branch`` (a Parallel branch) or ``item`` (a Map item).
    mode: str
    #: A branch of a ``settle: all`` parallel.
    settle: bool

    def step_result_path(self, key: str) -> str:
        """Where step ``key``'s record lands in the state document."""
        ...

    def route(self, source: str, target: str | None) -> str | None:
        """The state a route from step ``source`` to step ``target`` enters."""
        ...

    def end_state(self, key: str) -> str:
        """The state that ends the scope early after step ``key``."""
        ...

    def fold(self, key: str, record: dict[str, Any]) -> dict[str, Any]:
        """``Pass`` fields writing step ``key``'s record (with the liveness drop folded in)."""
        ...

    def flow(self, state: State, key: str, target: str | None) -> State:
        """Wire ``state`` of step ``key`` on to step ``target`` (or the scope's end)."""
        ...

    def failure_target(self, key: str) -> str | None:
        """Where a failure of step ``key`` goes once its retries are spent."""
        ...

    def must_catch(self, step: Any) -> bool:
        """Whether ``step`` needs a Lambda to retry, catch or time out."""
        ...

    def document_selector(self, prefix: str) -> dict[str, Any]:
        """The state document's fields, read from ``prefix``."""
        ...

    def retriers(
        self, policy: RetryPolicy | None, *, flow_controlled: bool = False
    ) -> list[dict[str, Any]]:
        """The ``Retry`` of a Task under ``policy``."""
        ...

    def catchers(
        self, key: str, policy: RetryPolicy | None, *, failure_state: str | None = None
    ) -> list[dict[str, Any]]:
        """The ``Catch`` of step ``key``'s Task."""
        ...

    def raise_error(self, name: str, error: str, cause: str, failure: str | None) -> None:
        """Add state ``name``: a compiled failure taking route ``failure`` (else failing)."""
        ...

    def reraise_state(self, key: str) -> str:
        """A Fail state re-raising the error at ``$.error``."""
        ...

    def step_config(self, step: Any) -> dict[str, Any]:
        """What the step's Lambda needs from the definition."""
        ...

    def lambda_task(
        self, key: str, step: Any, kind: str, next_target: str | None, *, then: str | None = None
    ) -> Task:
        """A ``lambda:invoke`` Task running ``step`` in the ``kind`` function."""
        ...

    def callback_task(
        self, key: str, step: Any, config: dict[str, Any], result_selector: dict[str, Any]
    ) -> Task:
        """A ``lambda:invoke.waitForTaskToken`` Task in the step type's function."""
        ...


#: A step kind: adds step ``key``'s states through ``ctx``.
KindEmitter = Callable[[Emitter, str, Any], None]
