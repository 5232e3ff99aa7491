"""Output liveness: which step outputs the state document must still carry, and where the
compiler may drop the others.

A step's output is *live* at a point of the step graph when something after that point may
read it: a later step's templates or CEL expression, a code step's ``steps[...]``, a custom
step (it sends every output to its URL), or the run's final output. The final output keeps
the output of the step the run ended on and the steps named in the workflow's ``outputs``.

Dropping is native. ASL cannot delete a key, so a drop rebuilds ``$.steps`` with the live
keys (``Parameters`` + ``ResultPath: $.steps``). Every key a rebuild names must be present
at run time, so a rebuild happens only where each live key that *may* be present *is* present
on every path (a must/may analysis over the same graph). Rebuilds happen:

* inside a native ``noop`` / ``transform`` step's own ``Pass`` (no extra transition);
* in the ``ResultSelector`` of a step after which only its own output is live
  (``ResultPath: $.steps``, its record alone; no extra transition);
* in a ``<key>.prune`` ``Pass`` after a step whose single success route is taken, when at
  least :data:`PRUNE_BATCH` dead outputs may have piled up since the last drop, or when the
  step ends the run (so the final output is exactly what is live at the end);
* in the ``Pass`` that ends a run through a condition, custom or approval route
  (``<key>.done``, which is a ``Succeed`` state otherwise).

Each step still writes its own output, so every output is in its own state's
``StateExited`` event: the timeline (``relayflow run``, ``GET /runs/{id}``, the recorder and the
DLQ) reads it there.

Pure: a :class:`Workflow` and its :class:`StepGraph` in, a :class:`LivenessPlan` out. Key
sets are Python ints used as bit sets, so a 4,000-step chain costs a few milliseconds, and
each scope is solved a fixed number of times however deep parallels nest (:class:`_Analysis`).
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from relayflow.definition.graph import Scope, StepGraph
from relayflow.definition.models import Workflow
from relayflow.expressions import expression_paths, template_expressions

#: Dead outputs that may pile up in the document before a step that cannot drop them itself
#: gets a ``<key>.prune`` state (one extra transition per this many dead outputs at most).
PRUNE_BATCH = 10
#: Most keys one rebuild names; where more outputs are live the compiler does not rebuild
#: (the compiled definition would grow with every kept key at every drop point).
MAX_KEEP = 40
#: Fields of each step type that hold templates (as rendered by the step, or compiled).
TEMPLATE_FIELDS: dict[str, tuple[str, ...]] = {
    "transform": ("mapping",),
    "delay": ("seconds", "until"),
    "for_each": ("items", "items_from"),
    "tool": ("args",),
    "agent": ("prompt",),
    "llm_batch": ("items", "prompt_template"),
    "sub_workflow": ("input",),
    "webhook_out": ("url", "headers", "body"),
    "approval": ("title", "prompt", "description"),
    "custom": ("url", "headers", "payload_config"),
    "code": ("input",),
    "waitpoint": ("idempotency_key",),
}
#: Step types whose success adds nothing at ``$.steps.<key>``.
_SILENT_TYPES = frozenset({"delay", "parallel"})
#: Step types that write ``$.steps.<key>`` before they can fail (``<key>.size``,
#: ``<key>.prepare``), so a failure route may find a partial record there.
_EARLY_WRITERS = frozenset({"for_each", "sub_workflow"})
#: Step types that leave through one success route (or the end), where a ``.prune`` fits
#: (a custom step only without branches).
_SINGLE_EXIT_TYPES = frozenset(
    {"transform", "delay", "tool", "webhook_out", "code", "waitpoint", "parallel"}
    | {"for_each", "sub_workflow", "noop", "custom"}
)
#: Step types whose main state writes its record through a ``ResultSelector``.
_RESULT_SELECTOR_TYPES = frozenset(
    {"transform", "tool", "webhook_out", "code", "custom", "waitpoint", "sub_workflow"}
    | {"for_each"}
)
#: Names through which Python code could reach ``steps`` without naming a key.
_INTROSPECTION = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "locals",
        "vars",
        "globals",
        "getattr",
        "__import__",
        "_getframe",
        "currentframe",
        "f_locals",
        "f_back",
        "inspect",
        "gc",
    }
)
_FAILURE_KINDS = frozenset({"on_failure", "on_timeout"})


class ReadsAll(Exception):
    """Raised inside the analysis when a reader may read any output."""


def _expression_reads(sources: Iterable[str]) -> set[str]:
    keys: set[str] = set()
    for src in sources:
        for path in expression_paths(src):
            if not path or path[0] != "steps":
                continue
            if len(path) == 1:
                raise ReadsAll
            keys.add(path[1])
    return keys


def code_reads(code: str) -> set[str] | None:
    """Step keys a code step reads, or ``None`` when it may read any.

    The code sees ``steps`` as a parameter. It reads only named outputs when every use of
    the name is ``steps["<key>"]`` or ``steps.get("<key>"…)`` with a literal key, and it
    names nothing that reaches variables dynamically (``eval``, ``locals``, frames…).
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    keys: set[str] = set()
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _INTROSPECTION:
            return None
        if isinstance(node, ast.Attribute) and node.attr in _INTROSPECTION:
            return None
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "steps"
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            keys.add(node.slice.value)
            allowed.add(id(node.value))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "steps"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            keys.add(node.args[0].value)
            allowed.add(id(node.func.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "steps" and id(node) not in allowed:
            return None
    return keys


def step_sources(step: Any, workflow: Workflow) -> list[str]:
    """The CEL expressions ``step`` evaluates over the run's data: its templates, condition,
    event match, flow-control keys, fallback and HTTP tool operation."""
    raw = step.model_dump(mode="json", exclude_none=True, by_alias=False)
    sources: list[str] = []
    for name in TEMPLATE_FIELDS.get(step.type, ()):
        value = raw.get(name)
        if value is not None and not isinstance(value, int | float | bool):
            sources.extend(template_expressions(value))
    on_error = raw.get("on_error")
    if isinstance(on_error, Mapping) and on_error.get("output") is not None:
        sources.extend(template_expressions(on_error["output"]))  # a fallback reads too
    for control in ("concurrency", "rate_limit"):
        setting = raw.get(control)
        if isinstance(setting, Mapping) and isinstance(setting.get("key"), str):
            sources.extend(template_expressions(setting["key"]))
    if step.type == "condition":
        sources.append(step.expression)
    if step.type == "wait_for_event" and step.match is not None:
        # The match runs over the run's data when an event arrives (relayflow.steps.event_wait).
        sources.append(step.match)
    if step.type == "tool" and step.tool.startswith("http."):
        parts = step.tool.split(".")
        tool = workflow.http_tools.get(parts[1])
        if tool is not None and len(parts) > 2 and parts[2] in tool.operations:
            operation = tool.operations[parts[2]].model_dump(mode="json", exclude_none=True)
            for name in ("path", "query", "headers", "body"):
                if operation.get(name) is not None:
                    sources.extend(template_expressions(operation[name]))
    return sources


#: Step types whose function hands the whole trigger to code or to a remote service.
_TRIGGER_READERS = frozenset({"code", "custom", "agent"})


def reads_trigger(step: Any, workflow: Workflow) -> bool:
    """Whether ``step`` may read ``trigger`` (any of its expressions names it, or its
    function hands the trigger on whole: code, custom, agent)."""
    if step.type in _TRIGGER_READERS:
        return True
    return any(
        path and path[0] == "trigger"
        for src in step_sources(step, workflow)
        for path in expression_paths(src)
    )


def step_reads(key: str, step: Any, workflow: Workflow) -> set[str] | None:
    """Step keys whose outputs ``step`` itself may read (its templates, expression, code,
    HTTP tool operation), or ``None`` when it may read every output."""
    if step.type == "custom":
        return None  # the request carries every output
    sources = step_sources(step, workflow)
    try:
        keys = _expression_reads(sources)
    except ReadsAll:
        return None
    if step.type == "code":
        from_code = code_reads(step.code)
        if from_code is None:
            return None
        keys |= from_code
    return {k for k in keys if k in workflow.steps}


@dataclass
class LivenessPlan:
    """Where the compiled machine drops outputs, and what is live where (for reports)."""

    #: native noop/transform step → the other outputs its own Pass keeps in ``$.steps``.
    folds: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: step → the outputs a ``<key>.prune`` Pass after its success keeps in ``$.steps``.
    prunes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: steps of ``prunes`` whose own ``ResultSelector`` rebuilds ``$.steps`` (keeping only
    #: their own record) instead of a ``.prune`` state.
    own_results: set[str] = field(default_factory=set)
    #: step → the outputs kept where one of its routes ends the run (``<key>.done``).
    end_prunes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: for_each step → the outputs its items' document names (``ItemSelector``: the ones
    #: its item step reads, each present on every path to it); absent: all of ``$.steps``.
    item_steps: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: step → outputs live when it starts / after it succeeds (main and branch scopes).
    live_in: dict[str, frozenset[str]] = field(default_factory=dict)
    live_out: dict[str, frozenset[str]] = field(default_factory=dict)

    def drops(self) -> int:
        """How many drop points the machine has (folded, ``.prune`` and end)."""
        return len(self.folds) + len(self.prunes) + len(self.end_prunes)


@dataclass
class _Node:
    key: str
    success: list[str]
    failure: list[str]
    ends: bool
    writes: bool
    reads: int
    #: The step's own key when it writes ``$.steps.<key>`` on success (which kills an older
    #: value: in a loop, the previous pass's output is live before the step only if read).
    own: int = 0
    live_in: int = 0
    live_out: int = 0  # after success (before the step's own write is read), the end's readers
    live_fail: int = 0
    may_in: int = 0
    must_in: int = 0
    seeded: bool = False
    pending_in: int = 0


def _corners(f00: int, f10: int, f01: int, f11: int, a: int, b: int) -> int:
    """A bitwise monotone function of two bit sets, from its values at the four corners:
    ``f(a, b)`` where ``f00 = f(∅, ∅)``, ``f10 = f(all, ∅)``, ``f01 = f(∅, all)``,
    ``f11 = f(all, all)``. Each bit of a monotone boolean function of two variables is
    ``f00 ∨ (a ∧ f10) ∨ (b ∧ f01) ∨ (a ∧ b ∧ f11)``."""
    return f00 | (a & f10) | (b & f01) | (a & b & f11)


@dataclass
class _ForwardForm:
    """A branch scope's must / may facts as functions of what flows in (see
    :meth:`_Analysis._forward_form`): per corner ``(M, L)`` in the order (∅,∅), (all,∅),
    (∅,all), (all,all), each member's ``may_in`` / ``must_in`` and the branch's end facts."""

    may: dict[str, tuple[int, int, int, int]]
    must: dict[str, tuple[int, int, int, int]]
    end_may: tuple[int, int, int, int]
    end_must: tuple[int, int, int, int]


class _Analysis:
    """The analysis over every scope.

    Every fact is a bit set, and each bit (one output) is decided on its own: a transfer
    function only ORs, ANDs and masks. So what a branch scope computes is a bitwise monotone
    function of what flows into it (what is live after its parallel; what may / must be in
    the document when it starts), and the analysis solves each branch scope once per
    corner of its inputs (∅ or every output) and combines the corners with bit operations
    wherever the branch is needed (:func:`_corners`). Each scope is solved a fixed number
    of times however deep the parallels nest, so the whole analysis costs time linear in
    steps and nesting (each fixed point iterates in reverse post-order, a few passes).
    """

    def __init__(
        self, workflow: Workflow, graph: StepGraph, scopes: list[Scope], native: Collection[str]
    ) -> None:
        self.wf = workflow
        self.graph = graph
        self.native = set(native)
        self.keys = list(workflow.steps)
        self.bit = {key: 1 << i for i, key in enumerate(self.keys)}
        self.all = (1 << len(self.keys)) - 1
        self.branches: dict[str, list[Scope]] = {}
        for scope in scopes:
            if scope.owner is not None:
                self.branches.setdefault(scope.owner, []).append(scope)
        #: ``settle: all`` parallels: any step of their branches may end its branch (failed).
        self.settling = {
            key for key, step in workflow.steps.items() if getattr(step, "settle", None) == "all"
        }
        self.reads = {key: self._reads(key) for key in self.keys}
        self.outputs = self._mask(workflow.outputs)
        self.plan = LivenessPlan()
        # Memos, by scope (``(owner, entry)``) or by step.
        self._static: dict[tuple[str | None, str], dict[str, _Node]] = {}
        self._orders: dict[tuple[str | None, str], list[str]] = {}
        self._live_forms: dict[tuple[str | None, str], tuple[dict[str, _Node], ...]] = {}
        self._forward_forms: dict[tuple[str | None, str], _ForwardForm] = {}
        self._terminal_masks: dict[str, int] = {}

    # ----------------------------------------------------------------- sets

    def _mask(self, keys: Iterable[str]) -> int:
        mask = 0
        for key in keys:
            mask |= self.bit.get(key, 0)
        return mask

    def _keys(self, mask: int) -> tuple[str, ...]:
        """The keys of a bit set, in definition order."""
        keys = []
        while mask:
            low = mask & -mask
            keys.append(self.keys[low.bit_length() - 1])
            mask ^= low
        return tuple(keys)

    def _reads(self, key: str) -> int:
        step = self.wf.steps[key]
        keys = step_reads(key, step, self.wf)
        mask = self.all if keys is None else self._mask(keys)
        if step.type == "for_each":  # the item scope is one step, compiled whole
            inner = step_reads(step.step, self.wf.steps[step.step], self.wf)
            mask |= self.all if inner is None else self._mask(inner)
        return mask

    # ----------------------------------------------------------------- graph facts

    def _writes(self, key: str) -> bool:
        step = self.wf.steps[key]
        if step.type in _SILENT_TYPES:
            return False
        return not (step.type == "condition" and key in self.native)

    def _ends(self, key: str) -> bool:
        step = self.wf.steps[key]
        if step.type == "condition":
            return step.on_true is None or step.on_false is None
        if step.type == "approval":
            return True  # its route Choice ends the run when no declared route matches
        return getattr(step, "on_success", None) is None

    def _terminals(self, key: str) -> int:
        """Branch steps a parallel may end on (their outputs are its result)."""
        if key not in self._terminal_masks:
            mask = 0
            for scope in self.branches.get(key, []):
                for member in scope.steps:
                    if self._ends(member) or key in self.settling:
                        mask |= self.bit[member] | self._terminals(member)
            self._terminal_masks[key] = mask
        return self._terminal_masks[key]

    def _nodes(self, scope: Scope) -> dict[str, _Node]:
        """Fresh nodes of ``scope`` (its static facts, built once)."""
        name = (scope.owner, scope.entry)
        if name not in self._static:
            members = set(scope.steps)
            nodes: dict[str, _Node] = {}
            for key in scope.steps:
                success: list[str] = []
                failure: list[str] = []
                for edge in self.graph.routes(key):
                    if edge.target in members:
                        (failure if edge.kind in _FAILURE_KINDS else success).append(edge.target)
                writes = self._writes(key)
                nodes[key] = _Node(
                    key=key,
                    success=success,
                    failure=failure,
                    ends=self._ends(key),
                    writes=writes,
                    reads=self.reads[key],
                    own=self.bit[key] if writes else 0,
                )
            self._static[name] = nodes
        return {key: replace(node) for key, node in self._static[name].items()}

    def _order(self, scope: Scope) -> list[str]:
        """The scope's steps in reverse post-order of a depth-first walk from its entry (a
        forward fixed point visits each step after its predecessors, back edges aside)."""
        name = (scope.owner, scope.entry)
        if name not in self._orders:
            nodes = self._nodes(scope)
            post: list[str] = []
            seen = {scope.entry}
            work: list[tuple[str, int]] = [(scope.entry, 0)]
            while work:
                key, i = work.pop()
                targets = [*nodes[key].success, *nodes[key].failure]
                if i < len(targets):
                    work.append((key, i + 1))
                    if targets[i] not in seen:
                        seen.add(targets[i])
                        work.append((targets[i], 0))
                else:
                    post.append(key)
            post.reverse()
            self._orders[name] = post + [k for k in scope.steps if k not in seen]
        return self._orders[name]

    # ----------------------------------------------------------------- liveness (backward)

    def _liveness(self, scope: Scope, end_live: int, is_main: bool) -> dict[str, _Node]:
        """Live outputs before and after each step of ``scope``. ``end_live``: what is read
        after the scope ends (the final output in the main scope; in a branch, whatever
        is read after its parallel step)."""
        nodes = self._nodes(scope)
        order = self._order(scope)[::-1]
        changed = True
        while changed:
            changed = False
            for key in order:
                node = nodes[key]
                out = 0
                for target in node.success:
                    out |= nodes[target].live_in
                if node.ends:
                    out |= end_live
                    if is_main:
                        out |= self.bit[key] | self.outputs
                        if self.wf.steps[key].type == "parallel":
                            out |= self._terminals(key)
                fail = 0
                for target in node.failure:
                    fail |= nodes[target].live_in
                if scope.owner in self.settling:
                    fail |= end_live  # a failure may end a settling branch
                reads = node.reads
                if self.wf.steps[key].type == "parallel":
                    for branch in self.branches.get(key, []):
                        low, high = self._live_form(branch)
                        entry = branch.entry
                        reads |= low[entry].live_in | (out & high[entry].live_in)
                live_in = reads | (out & ~node.own) | fail
                if (live_in, out, fail) != (node.live_in, node.live_out, node.live_fail):
                    node.live_in, node.live_out, node.live_fail = live_in, out, fail
                    changed = True
        return nodes

    def _live_form(self, branch: Scope) -> tuple[dict[str, _Node], ...]:
        """A branch's liveness with nothing and with everything read after it: liveness is
        bitwise and monotone, so with ``L`` read after it a fact is ``low | (L & high)``."""
        name = (branch.owner, branch.entry)
        if name not in self._live_forms:
            self._live_forms[name] = (
                self._liveness(branch, 0, False),
                self._liveness(branch, self.all, False),
            )
        return self._live_forms[name]

    def _live_at(self, branch: Scope, end_live: int) -> dict[str, _Node]:
        """A branch's liveness with ``end_live`` read after it (fresh nodes)."""
        low, high = self._live_form(branch)
        nodes = self._nodes(branch)
        for key, node in nodes.items():
            lo, hi = low[key], high[key]
            node.live_in = lo.live_in | (end_live & hi.live_in)
            node.live_out = lo.live_out | (end_live & hi.live_out)
            node.live_fail = lo.live_fail | (end_live & hi.live_fail)
        return nodes

    # ----------------------------------------------------------------- must / may (forward)

    def _forward(self, scope: Scope, nodes: dict[str, _Node], may: int, must: int) -> None:
        """Which live outputs may / must be in the document when each step starts."""
        entry = nodes[scope.entry]
        entry.may_in, entry.must_in, entry.seeded = may & entry.live_in, must, True
        entry.must_in &= entry.live_in
        order = self._order(scope)
        changed = True
        while changed:
            changed = False
            for key in order:
                node = nodes[key]
                if not node.seeded:
                    continue
                if self.wf.steps[key].type == "parallel":
                    out_may, out_must = self._after_parallel(node)
                else:
                    out_may, out_must = node.may_in | node.own, node.must_in | node.own
                early = self.bit[key] if self.wf.steps[key].type in _EARLY_WRITERS else 0
                flows = [(t, out_may, out_must) for t in node.success]
                flows += [(t, node.may_in | early, node.must_in) for t in node.failure]
                for target, flow_may, flow_must in flows:
                    succ = nodes[target]
                    new_may = succ.may_in | (flow_may & succ.live_in)
                    new_must = flow_must & succ.live_in
                    if succ.seeded:
                        new_must &= succ.must_in
                    if not succ.seeded or (new_may, new_must) != (succ.may_in, succ.must_in):
                        succ.may_in, succ.must_in, succ.seeded = new_may, new_must, True
                        changed = True

    def _branch_end(self, owner: str, inner: dict[str, _Node]) -> tuple[int, int]:
        """May / must when a branch of ``owner`` ends: the union of what its ending members
        leave (every member of a settling branch may end it, failed, with its record)."""
        end_may, end_must = 0, -1
        for member in inner.values():
            if owner in self.settling:
                end_may |= member.may_in | self.bit[member.key]
                end_must &= member.must_in | self.bit[member.key]
            if member.ends:
                end_may |= member.may_in | member.own
                end_must &= member.must_in | member.own
                if self.wf.steps[member.key].type == "parallel":
                    inner_may, inner_must = self._after_parallel(member)
                    end_may |= inner_may
                    end_must &= inner_must
        return end_may, end_must & self.all

    def _forward_form(self, branch: Scope) -> _ForwardForm:
        """A branch's must / may facts at the four corners of its inputs: ``M`` (what may
        and must be present when it starts; may and must never mix) and ``L`` (what is read
        after its parallel), each ∅ or every output."""
        name = (branch.owner, branch.entry)
        if name not in self._forward_forms:
            owner = str(branch.owner)
            corners = []
            for m, end_live in ((0, 0), (self.all, 0), (0, self.all), (self.all, self.all)):
                nodes = self._live_at(branch, end_live)
                self._forward(branch, nodes, m, m)
                corners.append((nodes, self._branch_end(owner, nodes)))
            self._forward_forms[name] = _ForwardForm(
                may={k: tuple(c[0][k].may_in for c in corners) for k in branch.steps},  # type: ignore[misc]
                must={k: tuple(c[0][k].must_in for c in corners) for k in branch.steps},  # type: ignore[misc]
                end_may=tuple(c[1][0] for c in corners),  # type: ignore[arg-type]
                end_must=tuple(c[1][1] for c in corners),  # type: ignore[arg-type]
            )
        return self._forward_forms[name]

    def _solved_at(self, branch: Scope, end_live: int, may: int, must: int) -> dict[str, _Node]:
        """A branch's nodes, liveness and must / may, for what flows into it (fresh)."""
        nodes = self._live_at(branch, end_live)
        form = self._forward_form(branch)
        for key, node in nodes.items():
            node.may_in = _corners(*form.may[key], may, end_live)
            node.must_in = _corners(*form.must[key], must, end_live)
            node.seeded = True
        return nodes

    def _after_parallel(self, node: _Node) -> tuple[int, int]:
        """May / must after a parallel step: the union of what its branches end with."""
        out_may, out_must = node.may_in, node.must_in
        for branch in self.branches.get(node.key, []):
            form = self._forward_form(branch)
            out_may |= _corners(*form.end_may, node.may_in, node.live_out)
            out_must |= _corners(*form.end_must, node.must_in, node.live_out)
        return out_may, out_must

    # ----------------------------------------------------------------- drop points

    def solve(self, scope: Scope, end_live: int, may: int, must: int, is_main: bool) -> None:
        if is_main:
            nodes = self._liveness(scope, end_live, True)
            self._forward(scope, nodes, may, must)
        else:
            nodes = self._solved_at(scope, end_live, may, must)
        for key, node in nodes.items():
            self.plan.live_in[key] = frozenset(self._keys(node.live_in))
            self.plan.live_out[key] = frozenset(self._keys(node.live_out))
            if self.wf.steps[key].type == "for_each":
                self._item_steps(key, node)
        self._place_drops(scope, nodes, is_main)
        for key, node in nodes.items():
            for branch in self.branches.get(key, []):
                if self.wf.steps[key].type == "parallel":
                    self.solve(branch, node.live_out, node.may_in, node.must_in, False)

    def _item_steps(self, key: str, node: _Node) -> None:
        """The outputs a for_each's items need: what its item step reads, when each of them
        is in the document on every path to the for_each (naming an absent one would fail
        the Map); else the items get all of ``$.steps``."""
        item = self.wf.steps[key].step
        reads = step_reads(item, self.wf.steps[item], self.wf)
        if reads is None:
            return
        mask = self._mask(reads)
        if mask & ~node.must_in or mask.bit_count() > MAX_KEEP:
            return
        self.plan.item_steps[key] = self._keys(mask)

    def _keep(self, live: int, may: int, must: int) -> int | None:
        """The outputs a rebuild keeps, or ``None`` when it cannot rebuild here."""
        if live & may & ~must:
            return None  # a live output that may be absent: naming it could fail the run
        keep = live & must
        if keep.bit_count() > MAX_KEEP:
            return None
        return keep

    def _place_drops(self, scope: Scope, nodes: dict[str, _Node], is_main: bool) -> None:
        """Walk the scope in route order (back edges ignored: a loop rewrites the same keys)
        counting dead outputs that may be in the document, and place the drops."""
        back = self.graph.back_edges(scope)
        indegree = dict.fromkeys(scope.steps, 0)
        for key in scope.steps:
            for target in {*nodes[key].success, *nodes[key].failure}:
                if (key, target) not in back:
                    indegree[target] += 1
        ready = deque([scope.entry])
        seen: set[str] = set()
        while ready:
            key = ready.popleft()
            if key in seen:
                continue
            seen.add(key)
            node = nodes[key]
            pending = self._decide(node, is_main)
            for target in {*node.success, *node.failure}:
                if (key, target) in back:
                    continue
                nodes[target].pending_in = max(nodes[target].pending_in, pending)
                indegree[target] -= 1
                if indegree[target] <= 0:
                    ready.append(target)

    def _decide(self, node: _Node, is_main: bool) -> int:
        """Place the drop points of one step; return how many dead outputs may follow it."""
        key = node.key
        step = self.wf.steps[key]
        if step.type == "parallel":
            may, must = self._after_parallel(node)
        else:
            may, must = node.may_in | node.own, node.must_in | node.own
        dying = ((node.live_in | node.own) & ~(node.live_out | node.live_fail)).bit_count()
        pending = min(PRUNE_BATCH, node.pending_in + dying)
        if is_main and node.ends and step.type in ("condition", "custom", "approval") and pending:
            at_end = self._keep(self.bit[key] | self.outputs, may, must)
            if at_end is not None:
                self.plan.end_prunes[key] = self._keys(at_end)
        keep = self._keep(node.live_out, may, must)
        if keep is None:
            return pending
        own_dead = 1 if node.own and not node.live_out & node.own else 0
        foldable = step.type == "noop" or (step.type == "transform" and key in self.native)
        if foldable:
            if pending - own_dead > 0:
                self.plan.folds[key] = self._keys(keep & ~node.own)
                return own_dead
            return pending
        routes = step.type == "custom" and bool(step.branches)
        single_exit = step.type in _SINGLE_EXIT_TYPES and not routes
        if not single_exit:
            return pending
        if step.type in _RESULT_SELECTOR_TYPES and not keep & ~node.own:
            # Nothing but its own output is live after it: its ResultSelector can rebuild
            # ``$.steps`` alone, at no extra transition.
            if pending - own_dead > 0:
                self.plan.prunes[key] = self._keys(keep)
                self.plan.own_results.add(key)
                return own_dead
            return pending
        if pending >= PRUNE_BATCH or (node.ends and is_main and pending):
            self.plan.prunes[key] = self._keys(keep)
            return 0
        return pending


def analyse(
    workflow: Workflow,
    graph: StepGraph,
    scopes: list[Scope],
    native: Collection[str] = (),
) -> LivenessPlan:
    """The liveness plan of a validated workflow. ``native``: the condition and transform
    steps that compile to native Choice / Pass states (the compiler decides)."""
    analysis = _Analysis(workflow, graph, scopes, native)
    analysis.solve(scopes[0], 0, 0, 0, True)
    return analysis.plan
