"""The step graph of a definition: edges, scopes and cycles.

A workflow has one *main scope* entered at ``start``. A ``parallel`` step opens one scope per
branch (entered at each branch's first step) and a ``for_each`` step opens one scope for its
per-item step. Routes (``on_success``, ``on_failure``, condition and branch routes) stay
inside their scope; a step belongs to exactly one scope. The compiler turns every scope into
one ASL ``States`` object (the state machine, a Parallel branch, a Map item processor).

The graph is built from plain data so that validation can still check references in a
definition whose fields did not all parse.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Single-target route fields, in the order the compiler wires them.
ROUTE_FIELDS = ("on_success", "on_true", "on_false", "on_approve", "on_reject", "on_timeout")
#: Route maps: name → step key.
ROUTE_MAPS = ("outcomes",)
#: An outcome routed here takes the step's failure handling instead of a step.
INHERIT = "inherit"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: str  # route field name, "on_failure", "branches[i]", "branch:<name>", "step"
    path: str  # definition path of the reference, e.g. steps.check.on_true

    @property
    def is_containment(self) -> bool:
        """A parallel branch or a for_each item step: the target opens a new scope."""
        return self.kind == "step" or self.kind.startswith("branches[")


def step_edges(key: str, raw: Mapping[str, Any]) -> list[Edge]:
    """Every reference a step makes to another step, in a stable order."""
    edges: list[Edge] = []
    base = f"steps.{key}"
    step_type = raw.get("type")
    for name in ROUTE_FIELDS:
        target = raw.get(name)
        if isinstance(target, str):
            edges.append(Edge(key, target, name, f"{base}.{name}"))
    branches = raw.get("branches")
    if step_type == "parallel" and isinstance(branches, list):
        edges.extend(
            Edge(key, target, f"branches[{i}]", f"{base}.branches[{i}]")
            for i, target in enumerate(branches)
            if isinstance(target, str)
        )
    elif isinstance(branches, Mapping):
        edges.extend(
            Edge(key, target, f"branch:{name}", f"{base}.branches.{name}")
            for name, target in branches.items()
            if isinstance(target, str)
        )
    for field_name in ROUTE_MAPS:
        routes = raw.get(field_name)
        if isinstance(routes, Mapping):
            edges.extend(
                Edge(key, target, f"branch:{name}", f"{base}.{field_name}.{name}")
                for name, target in routes.items()
                if isinstance(target, str) and target != INHERIT
            )
    if step_type == "for_each" and isinstance(raw.get("step"), str):
        edges.append(Edge(key, raw["step"], "step", f"{base}.step"))
    on_failure = raw.get("on_failure")
    if isinstance(on_failure, str):
        edges.append(Edge(key, on_failure, "on_failure", f"{base}.on_failure"))
    return edges


@dataclass
class Scope:
    """Steps compiled into one ASL ``States`` object."""

    entry: str
    owner: str | None  # the parallel / for_each step that opens it; None for the main scope
    steps: list[str] = field(default_factory=list)


@dataclass
class StepGraph:
    steps: Mapping[str, Mapping[str, Any]]
    start: str
    default_on_failure: str | None = None
    edges: dict[str, list[Edge]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.edges = {
            key: step_edges(key, raw if isinstance(raw, Mapping) else {})
            for key, raw in self.steps.items()
        }
        handler = self.default_on_failure
        if handler in self.steps:
            # The workflow-wide error route applies to main-scope steps that declare none,
            # except the handler itself and the steps it leads to (no error loops).
            scopes, _ = self.scopes()
            handled = self._reachable(handler)
            for key in scopes[0].steps if scopes else []:
                if key in handled or any(e.kind == "on_failure" for e in self.edges[key]):
                    continue
                self.edges[key].append(Edge(key, handler, "on_failure", "errors.on_failure"))

    def _reachable(self, entry: str) -> set[str]:
        seen, stack = {entry}, [entry]
        while stack:
            for edge in self.routes(stack.pop()):
                if edge.target not in seen:
                    seen.add(edge.target)
                    stack.append(edge.target)
        return seen

    def reachable(self, entry: str) -> set[str]:
        """The steps of ``entry``'s scope that routes lead to from it (``entry`` included)."""
        return self._reachable(entry)

    def handler_only(self) -> set[str]:
        """Main-flow steps that only the workflow-wide error route leads to: the handler and
        the steps reachable from it, unless an ordinary route reaches them as well."""
        if self.default_on_failure not in self.steps or self.start not in self.steps:
            return set()
        seen, stack = {self.start}, [self.start]
        while stack:
            for edge in self.routes(stack.pop()):
                if edge.path != "errors.on_failure" and edge.target not in seen:
                    seen.add(edge.target)
                    stack.append(edge.target)
        return self._reachable(self.default_on_failure) - seen

    def failure_route(self, key: str) -> str | None:
        """The step's effective on_failure target (its own, or the workflow default)."""
        for edge in self.edges.get(key, []):
            if edge.kind == "on_failure":
                return edge.target
        return None

    def routes(self, key: str) -> Iterator[Edge]:
        """Edges that stay in the step's scope (everything but containment)."""
        for edge in self.edges.get(key, []):
            if not edge.is_containment and edge.target in self.steps:
                yield edge

    def scopes(self) -> tuple[list[Scope], dict[str, list[Scope]]]:
        """Every scope, main first, and for each step the scopes that reach it.

        A step reached from more than one scope is a definition error; validation reports it
        from the second mapping.
        """
        scopes: list[Scope] = []
        reached_by: dict[str, list[Scope]] = {}
        pending: deque[tuple[str, str | None]] = deque()
        if self.start in self.steps:
            pending.append((self.start, None))
        opened: set[tuple[str, str | None]] = set()
        while pending:
            entry, owner = pending.popleft()
            if (entry, owner) in opened:
                continue
            opened.add((entry, owner))
            scope = Scope(entry=entry, owner=owner)
            scopes.append(scope)
            queue, seen = deque([entry]), {entry}
            while queue:
                key = queue.popleft()
                scope.steps.append(key)
                reached_by.setdefault(key, []).append(scope)
                for edge in self.edges.get(key, []):
                    if edge.target not in self.steps:
                        continue
                    if edge.is_containment:
                        pending.append((edge.target, key))
                    elif edge.target not in seen:
                        seen.add(edge.target)
                        queue.append(edge.target)
        return scopes, reached_by

    def _scope_successors(self, scope: Scope) -> dict[str, list[str]]:
        members = set(scope.steps)
        return {
            key: [e.target for e in self.routes(key) if e.target in members] for key in scope.steps
        }

    def cycles(self, scope: Scope) -> list[list[str]]:
        """Strongly connected components of a scope's route graph that form a cycle, each in
        scope order."""
        succ = self._scope_successors(scope)
        order = {k: i for i, k in enumerate(scope.steps)}
        result = [
            sorted(component, key=order.__getitem__)
            for component in strong_components(scope.steps, succ)
            if len(component) > 1 or component[0] in succ[component[0]]
        ]
        return sorted(result, key=lambda c: order[c[0]])

    def route_reach(self) -> RouteReach:
        """Which steps can run before which, for every step at once (one pass over the
        routes; see :class:`RouteReach`)."""
        succ = {key: [e.target for e in self.routes(key)] for key in self.steps}
        return RouteReach.build(list(self.steps), succ)

    def back_edges(self, scope: Scope) -> set[tuple[str, str]]:
        """Route edges that close a cycle, found by depth-first search from the scope entry.
        The compiler puts the step counter on exactly these edges."""
        succ = self._scope_successors(scope)
        state: dict[str, int] = {scope.entry: 1}  # 1 = on the DFS path, 2 = finished
        back: set[tuple[str, str]] = set()
        work: list[tuple[str, int]] = [(scope.entry, 0)]
        while work:
            node, i = work.pop()
            if i < len(succ[node]):
                work.append((node, i + 1))
                target = succ[node][i]
                mark = state.get(target)
                if mark == 1:
                    back.add((node, target))
                elif mark is None:
                    state[target] = 1
                    work.append((target, 0))
            else:
                state[node] = 2
        return back


def strong_components(nodes: Sequence[str], succ: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """The strongly connected components of the graph ``succ`` over ``nodes`` (Tarjan's
    algorithm, iterative so long chains need no deep recursion). Components come in the order
    Tarjan completes them: every component a route leads to comes before the one it leaves
    (reverse topological order). Targets outside ``nodes`` must not occur in ``succ``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            if i < len(succ[node]):
                work.append((node, i + 1))
                target = succ[node][i]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    item = stack.pop()
                    on_stack.discard(item)
                    component.append(item)
                    if item == node:
                        break
                result.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return result


@dataclass(frozen=True)
class RouteReach:
    """For every step, the steps that can run before it: those from which some route (one or
    more, loops and error routes included) leads to it.

    Built in one pass: the strongly connected components of the route graph, then, in
    reverse topological order of the components, each component's set of later components as
    a Python int used as a bitset (bit ``i``: the component Tarjan completed ``i``-th). A
    component's set is the union of its successors' sets and bits, so the work is one
    big-integer ``|`` per route. On a chain of ``n`` steps the sets hold ``n²/2`` bits in all,
    but each ``|`` is a loop over machine words: at 4,000 steps they take 1.2 MB and 14 ms to
    build, against the walk of the graph once per reading step they replaced (16 M ``routes``
    calls). Whether a route leads to a cycle is kept per component in the same pass."""

    component: Mapping[str, int]
    #: Per component: the bits of the components a route leads to from it, at any distance.
    later: Sequence[int]
    #: Components on a cycle (more than one step, or a step routing to itself).
    cyclic: frozenset[int]
    #: Components on a cycle or from which a route leads to one.
    toward_cycle: frozenset[int]

    @classmethod
    def build(cls, nodes: Sequence[str], succ: Mapping[str, Sequence[str]]) -> RouteReach:
        components = strong_components(nodes, succ)
        component = {key: i for i, members in enumerate(components) for key in members}
        later: list[int] = []
        cyclic: set[int] = set()
        toward_cycle: set[int] = set()
        for i, members in enumerate(components):
            found = 0
            for key in members:
                for target in succ[key]:
                    j = component[target]
                    if j == i:
                        cyclic.add(i)
                    else:  # j < i: Tarjan completed it first
                        found |= later[j] | (1 << j)
                        if j in toward_cycle:
                            toward_cycle.add(i)
            later.append(found)
            if i in cyclic:
                toward_cycle.add(i)
        return cls(component, later, frozenset(cyclic), frozenset(toward_cycle))

    def runs_before(self, before: str, step: str) -> bool:
        """Whether a route leads from ``before`` to ``step``, so ``before`` can finish before
        ``step`` runs (a step runs before itself only on a cycle)."""
        i, j = self.component[before], self.component[step]
        if i == j:
            return i in self.cyclic
        return bool(self.later[i] >> j & 1)

    def leads_to_cycle(self, step: str) -> bool:
        """Whether ``step`` is on a cycle or some route from it leads to one."""
        return self.component[step] in self.toward_cycle
