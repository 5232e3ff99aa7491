"""for_each: an item-count guard, then a native Map running the item step per item (a
Distributed Map for a for_each at scale: :mod:`.for_each_distributed`)."""

from __future__ import annotations

from relayflow.compiler.asl import SUCCEEDED
from relayflow.compiler.emitter import Emitter
from relayflow.compiler.kinds.for_each_distributed import emit_distributed_for_each
from relayflow.compiler.kinds.for_each_items import guard_item_count, item_selector
from relayflow.compiler.states import Map
from relayflow.definition.models import ForEachStep


def emit_for_each(ctx: Emitter, key: str, step: ForEachStep) -> None:
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
