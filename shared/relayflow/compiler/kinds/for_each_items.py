"""What both forms of for_each put in front of their Map and give each item: the item-count
guard (:func:`guard_item_count`) and the item's document (:func:`item_selector`)."""

from __future__ import annotations

from typing import Any

from relayflow.compiler.asl import json_path_of_placeholder, over_limit
from relayflow.compiler.emitter import Emitter
from relayflow.compiler.liveness import reads_trigger
from relayflow.compiler.states import Choice, Pass
from relayflow.definition.models import ForEachStep
from relayflow.errors import NotAList, TooManyItems


def item_selector(ctx: Emitter, key: str, step: ForEachStep) -> dict[str, Any]:
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


def guard_item_count(ctx: Emitter, key: str, step: ForEachStep, items: str) -> str:
    """Add the guards in front of the Map and return the items' JSONPath:

    * ``<key>.list`` (Choice, the step's entry): items that are absent, null, a string, a
      number or a boolean go to ``<key>.not_a_list``; a list with a first item goes on;
      anything else (an empty list, or an object) to ``<key>.list_text``, a Pass that writes
      the items' JSON text, and ``<key>.list_empty``, a Choice that lets ``[]`` through.
      ``States.ArrayLength`` of something else than a list would fail the run with
      ``States.Runtime``, which no Catch matches: ``<key>.not_a_list`` raises
      ``Relayflow.NotAList`` along the step's failure route instead;
    * ``<key>.size`` → ``<key>.check``, which fails the step with ``TooManyItems`` (along
      its failure route) when there are more than ``max_items`` items, else goes on to the
      Map (state ``key``)."""
    items_path = json_path_of_placeholder(items)
    size, check, too_many = f"{key}.size", f"{key}.check", f"{key}.too_many"
    is_list, text, empty, not_a_list = (
        f"{key}.list",
        f"{key}.list_text",
        f"{key}.list_empty",
        f"{key}.not_a_list",
    )
    scalar = [
        {"Not": {"Variable": items_path, "IsPresent": True}, "Next": not_a_list},
        *(
            {"Variable": items_path, test: True, "Next": not_a_list}
            for test in ("IsNull", "IsString", "IsNumeric", "IsBoolean")
        ),
        {"Variable": f"{items_path}[0]", "IsPresent": True, "Next": size},
    ]
    ctx.machine.add(is_list, Choice(choices=scalar, default=text))
    ctx.machine.add(
        text,
        Pass.intrinsic("text", f"States.JsonToString({items_path})", f"$.steps.{key}", empty),
    )
    ctx.machine.add(
        empty,
        Choice(
            choices=[{"Variable": f"$.steps.{key}.text", "StringEquals": "[]", "Next": size}],
            default=not_a_list,
        ),
    )
    ctx.raise_error(
        not_a_list,
        NotAList.error_name,
        f"for_each '{key}' needs a list of items at {items_path}",
        ctx.failure_target(key),
    )
    ctx.machine.add(
        size,
        Pass.intrinsic("count", f"States.ArrayLength({items_path})", f"$.steps.{key}", check),
    )
    ctx.machine.add(check, over_limit(f"$.steps.{key}.count", step.max_items, too_many, key))
    ctx.raise_error(
        too_many,
        TooManyItems.error_name,
        f"for_each '{key}' allows at most {step.max_items} items",
        ctx.failure_target(key),
    )
    return items_path
