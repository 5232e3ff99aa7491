"""parallel: a native Parallel state whose branches' ``steps`` are merged back.

With ``settle: all`` every branch runs to its end: a failure that the failing step does not
route itself ends its branch with the step's record ``{"status": "failed", "error"}`` (a
Catch inside the branch, the scope's ``<key>.settled``), so the merge keeps the other
branches' outputs. With ``fail_when: any`` a Choice after the merge raises
``Relayflow.BranchesFailed`` (routable like any step failure) when a branch step's record
says ``failed``.
"""

from __future__ import annotations

from typing import Any

from relayflow.compiler.emitter import Emitter
from relayflow.compiler.states import Choice, Parallel, Pass, State
from relayflow.definition.models import ParallelStep
from relayflow.errors import BranchesFailed

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


def emit_parallel(ctx: Emitter, key: str, step: ParallelStep) -> None:
    ctx.c.runners[key] = "native"
    settle = step.settle == "all"
    scopes = [ctx.c.scope_for(root, key) for root in step.branches]
    branches = [ctx.c.compile_scope(scope, mode="branch", settle=settle) for scope in scopes]
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
    members = [member for scope in scopes for member in scope.steps]
    check = step.fail_when == "any"
    if count <= MERGE_PER_FIELD:
        finish(ctx, key, state, key, step, members if check else None)
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
    finish(ctx, merge_state, joined, key, step, members if check else None)


def finish(
    ctx: Emitter,
    name: str,
    state: State,
    key: str,
    step: ParallelStep,
    members: list[str] | None,
) -> None:
    """Add ``state`` (the Parallel, or the Pass that merges its parts) as ``name``, going on
    to the step's success route, through the ``fail_when: any`` check of ``members`` (the
    steps of the branches) when they are given."""
    if members is None:
        ctx.machine.add(name, ctx.flow(state, key, step.on_success))
        return
    check = f"{key}.settle_check"
    state.next = check  # type: ignore[attr-defined]
    ctx.machine.add(name, state)
    # Where the state would have gone (a prune, the next step or the end) is where the
    # check goes when no branch failed.
    probe = ctx.flow(Pass(), key, step.on_success)
    default = probe.next  # type: ignore[attr-defined]
    if default is None:
        default = f"{key}.settle_end"
        ctx.machine.add(default, Pass(end=True, output_path=getattr(probe, "output_path", None)))
    failed = f"{key}.branches_failed"
    rules: list[dict[str, Any]] = [
        {
            "And": [
                {"Variable": f"$.steps.{member}.status", "IsPresent": True},
                {"Variable": f"$.steps.{member}.status", "StringEquals": "failed"},
            ]
        }
        for member in members
    ]
    rule = rules[0] if len(rules) == 1 else {"Or": rules}
    ctx.machine.add(check, Choice(choices=[{**rule, "Next": failed}], default=default))
    ctx.raise_error(
        failed,
        BranchesFailed.error_name,
        f"a branch of parallel step '{key}' failed (fail_when: any); the failed steps' "
        "records hold their errors",
        ctx.failure_target(key),
    )
