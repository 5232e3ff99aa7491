"""parallel: a native Parallel state whose branches' ``steps`` are merged back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from relayflow.compiler.states import Parallel
from relayflow.definition.models import ParallelStep

if TYPE_CHECKING:
    from relayflow.compiler.scope import ScopeContext


def emit_parallel(ctx: ScopeContext, key: str, step: ParallelStep) -> None:
    ctx.c.runners[key] = "native"
    branches = [
        ctx.c.compile_scope(ctx.c.scope_for(root, key), mode="branch") for root in step.branches
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
        result_selector={**ctx.document_selector("$[0]"), "steps.$": merged},
        result_path="$",
        retry=ctx.retriers(step.retry) if step.retry else [],
        catch=ctx.catchers(key, None),
    )
    ctx.machine.add(key, ctx.flow(state, key, step.on_success))
