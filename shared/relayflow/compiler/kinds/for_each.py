"""for_each: an item-count guard, then a native Map running the item step per item (a
Distributed Map for a for_each at scale: :mod:`.for_each_distributed`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from relayflow.compiler.asl import SUCCEEDED, json_path_of_placeholder, over_limit
from relayflow.compiler.kinds.for_each_distributed import emit_distributed_for_each
from relayflow.compiler.liveness import reads_trigger
from relayflow.compiler.states import Map, Pass
from relayflow.definition.models import ForEachStep
from relayflow.errors import TooManyItems

if TYPE_CHECKING:
    from relayflow.compiler.scope import ScopeContext


def emit_for_each(ctx: ScopeContext, key: str, step: ForEachStep) -> None:
    if step.distributed:
        emit_distributed_for_each(ctx, key, step)
        return
    ctx.c.runners[key] = "native"
    assert step.items is not None  # validation: an inline for_each reads items
    items_path = guard_item_count(ctx, key, step, step.items)
    item_machine = ctx.c.compile_item(
        key, step.step, item_continue=step.on_item_failure == "continue"
    )
    state = Map(
        items_path=items_path,
        item_selector=item_selector(ctx, key, step),
        max_concurrency=step.max_concurrency or None,
        item_processor=item_machine,
        result_selector={"output.$": "$", "status": SUCCEEDED},
        result_path=ctx.step_result_path(key),
        retry=ctx.retriers(step.retry) if step.retry else [],
        catch=ctx.catchers(key, None),
    )
    ctx.machine.add(key, ctx.flow(state, key, step.on_success))


def item_selector(ctx: ScopeContext, key: str, step: ForEachStep) -> dict[str, Any]:
    """Each item's document: the run, the item and its index, and only what the item step
    can read besides: the trigger when it reads the trigger at all, and of ``$.steps`` the
    outputs it reads (all of them where the liveness plan cannot name them). Every item (a
    child execution, a Lambda payload) would otherwise carry the whole document, the items
    themselves included when they come from the trigger."""
    item = ctx.c.wf.steps[step.step]
    selector: dict[str, Any] = {"run.$": "$.run"}
    if reads_trigger(item, ctx.c.wf):
        selector["trigger.$"] = "$.trigger"
    if ctx.c.has_cycles:
        selector["counters.$"] = "$.counters"
    keep = ctx.c.liveness.item_steps.get(key)
    if keep is None:
        selector["steps.$"] = "$.steps"
    else:
        selector["steps"] = {f"{k}.$": f"$.steps.{k}" for k in keep}
    selector["item.$"] = "$$.Map.Item.Value"
    selector["index.$"] = "$$.Map.Item.Index"
    return selector


def guard_item_count(ctx: ScopeContext, key: str, step: ForEachStep, items: str) -> str:
    """Add ``<key>.size`` → ``<key>.check``, which fails the step with ``TooManyItems``
    (along its failure route) when the items at placeholder ``items`` number more than
    ``max_items`` and otherwise goes on to state ``key``; returns the items' JSONPath."""
    items_path = json_path_of_placeholder(items)
    size, check, too_many = f"{key}.size", f"{key}.check", f"{key}.too_many"
    ctx.machine.add(
        size,
        Pass(
            parameters={"count.$": f"States.ArrayLength({items_path})"},
            result_path=f"$.steps.{key}",
            next=check,
        ),
    )
    ctx.machine.add(check, over_limit(f"$.steps.{key}.count", step.max_items, too_many, key))
    ctx.raise_error(
        too_many,
        TooManyItems.error_name,
        f"for_each '{key}' allows at most {step.max_items} items",
        ctx.failure_target(key),
    )
    return items_path
