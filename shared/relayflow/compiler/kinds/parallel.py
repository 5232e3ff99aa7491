"""parallel: a native Parallel state whose branches' ``steps`` are merged back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from relayflow.compiler.states import Parallel, Pass
from relayflow.definition.models import ParallelStep

if TYPE_CHECKING:
    from relayflow.compiler.scope import ScopeContext


#: Step Functions allows at most 10 intrinsic functions in one field (compiler.check counts
#: every call, nested or not), so one field can merge at most 11 branch results.
MERGE_PER_FIELD = 11


def merge_paths(paths: list[str]) -> str:
    """The intrinsic that shallow-merges the objects at ``paths``, left to right (a later one
    wins a shared key, as a left fold would): a balanced tree of ``States.JsonMerge``, which
    uses ``len(paths) - 1`` calls and nests ``ceil(log2(len(paths)))`` deep."""
    if len(paths) == 1:
        return f"States.JsonMerge({paths[0]}, {paths[0]}, false)"

    def merge(first: int, end: int) -> str:
        if end - first == 1:
            return paths[first]
        middle = (first + end + 1) // 2
        return f"States.JsonMerge({merge(first, middle)}, {merge(middle, end)}, false)"

    return merge(0, len(paths))


def branch_merge(count: int) -> str:
    """The intrinsic that merges the ``steps`` of ``count`` branch results in one field
    (``count`` at most :data:`MERGE_PER_FIELD`)."""
    return merge_paths([f"$[{i}].steps" for i in range(count)])


def merge_parts(count: int) -> list[list[int]]:
    """Branch indexes in groups of at most :data:`MERGE_PER_FIELD`, in order."""
    return [
        list(range(start, min(start + MERGE_PER_FIELD, count)))
        for start in range(0, count, MERGE_PER_FIELD)
    ]


def emit_parallel(ctx: ScopeContext, key: str, step: ParallelStep) -> None:
    ctx.c.runners[key] = "native"
    branches = [
        ctx.c.compile_scope(ctx.c.scope_for(root, key), mode="branch") for root in step.branches
    ]
    # Each branch returns the whole document with its steps added; the branches share the
    # steps from before the fork, so a shallow merge of their `steps` joins them.
    count = len(branches)
    state = Parallel(
        branches=branches,
        result_selector={**ctx.document_selector("$[0]"), "steps.$": branch_merge(count)},
        result_path="$",
        retry=ctx.retriers(step.retry) if step.retry else [],
        catch=ctx.catchers(key, None),
    )
    if count <= MERGE_PER_FIELD:
        ctx.machine.add(key, ctx.flow(state, key, step.on_success))
        return
    # More branches than one field can merge: the selector merges groups of branches into
    # `parts` (one field per group), and a Pass merges the groups (one more transition).
    parts = merge_parts(count)
    state.result_selector = {
        **ctx.document_selector("$[0]"),
        "parts": {
            f"p{n}.$": merge_paths([f"$[{i}].steps" for i in group])
            if len(group) > 1
            else f"$[{group[0]}].steps"
            for n, group in enumerate(parts)
        },
    }
    merge_state = f"{key}.merge"
    state.next = merge_state
    ctx.machine.add(key, state)
    joined = Pass(
        parameters={
            **ctx.document_selector("$"),
            "steps.$": merge_paths([f"$.parts.p{n}" for n in range(len(parts))]),
        },
    )
    ctx.machine.add(merge_state, ctx.flow(joined, key, step.on_success))
