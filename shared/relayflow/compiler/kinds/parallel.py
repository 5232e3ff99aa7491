"""parallel: a native Parallel state whose branches' ``steps`` are merged back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from relayflow.compiler.states import Parallel
from relayflow.definition.models import ParallelStep

if TYPE_CHECKING:
    from relayflow.compiler.scope import ScopeContext


def branch_merge(count: int) -> str:
    """The intrinsic that shallow-merges the ``steps`` of ``count`` branch results, left to
    right (a later branch wins a shared key, as a left fold would).

    A balanced tree of ``States.JsonMerge``: ASL allows at most 10 nested intrinsics in one
    field, and the tree nests ``ceil(log2(count))`` deep (7 at 100 branches) where a fold
    would nest ``count - 1`` deep."""
    if count == 1:
        return "States.JsonMerge($[0].steps, $[0].steps, false)"

    def merge(first: int, end: int) -> str:
        if end - first == 1:
            return f"$[{first}].steps"
        middle = (first + end + 1) // 2
        return f"States.JsonMerge({merge(first, middle)}, {merge(middle, end)}, false)"

    return merge(0, count)


def emit_parallel(ctx: ScopeContext, key: str, step: ParallelStep) -> None:
    ctx.c.runners[key] = "native"
    branches = [
        ctx.c.compile_scope(ctx.c.scope_for(root, key), mode="branch") for root in step.branches
    ]
    # Each branch returns the whole document with its steps added; the branches share the
    # steps from before the fork, so a shallow merge of their `steps` joins them.
    state = Parallel(
        branches=branches,
        result_selector={**ctx.document_selector("$[0]"), "steps.$": branch_merge(len(branches))},
        result_path="$",
        retry=ctx.retriers(step.retry) if step.retry else [],
        catch=ctx.catchers(key, None),
    )
    ctx.machine.add(key, ctx.flow(state, key, step.on_success))
