"""Validation rules of ``for_each`` at scale (``mode``, ``items_from``, ``items_format``,
``tolerated_failures``). Part of :mod:`relayflow.validation.validate`'s one pass; every
problem has the rule ``for-each-distributed`` unless a more specific one applies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from relayflow.definition.for_each import (
    FORMAT_BY_EXTENSION,
    ITEMS_FROM_PATTERN,
    bucket_problem,
    items_format_of,
    split_items_from,
)
from relayflow.expressions import template_to_parameters

if TYPE_CHECKING:
    from relayflow.validation.context import CheckContext

RULE = "for-each-distributed"


def _distributed(raw: Mapping[str, Any]) -> bool:
    mode = raw.get("mode", "auto")
    return mode == "distributed" or (mode == "auto" and raw.get("items_from") is not None)


def check_for_each(checker: CheckContext) -> None:
    """Where the items come from (exactly one source, a readable S3 location), and the
    settings that only one mode can honour."""
    import re

    for key, raw in checker.steps.items():
        if raw.get("type") != "for_each":
            continue
        base = f"steps.{key}"
        items, items_from = raw.get("items"), raw.get("items_from")
        if (items is None) == (items_from is None):
            checker.add(
                base,
                "for-each-items",
                "a for_each needs exactly one of items (a list in the state document) or "
                "items_from (s3://bucket/key)",
            )
        distributed = _distributed(raw)
        if isinstance(items_from, str) and re.match(ITEMS_FROM_PATTERN, items_from):
            _check_items_from(checker, base, items_from, raw)
            if raw.get("mode") == "inline":
                checker.add(
                    f"{base}.mode",
                    RULE,
                    "items read from S3 (items_from) always run distributed; drop mode: inline",
                )
            if "max_items" in raw:
                checker.add(
                    f"{base}.max_items",
                    RULE,
                    "max_items bounds items from the state document; the items of an S3 object "
                    "are as many as it holds",
                )
        elif raw.get("items_format") is not None:
            checker.add(f"{base}.items_format", RULE, "items_format describes items_from")
        if distributed and raw.get("on_item_failure") == "continue":
            checker.add(
                f"{base}.on_item_failure",
                RULE,
                "a distributed for_each runs each item as a child execution: a failed item "
                "fails its execution; accept failures with tolerated_failures instead",
            )
        if not distributed and raw.get("tolerated_failures") is not None:
            checker.add(
                f"{base}.tolerated_failures",
                RULE,
                "tolerated_failures applies to a distributed for_each (mode: distributed or "
                "items_from); an inline one fails on its first failed item, or continues "
                "past every failure with on_item_failure: continue",
            )


def _check_items_from(
    checker: CheckContext, base: str, items_from: str, raw: Mapping[str, Any]
) -> None:
    path = f"{base}.items_from"
    bucket, key = split_items_from(items_from)
    problem = bucket_problem(bucket)
    if problem:
        checker.add(path, RULE, problem)
    if items_format_of(items_from, raw.get("items_format")) is None:
        checker.add(
            f"{base}.items_format",
            RULE,
            f"the key has none of the extensions {', '.join(FORMAT_BY_EXTENSION)}: say what "
            "the object holds with items_format: json, jsonl or csv",
        )
    before = len(checker.problems)
    # The key renders before any item exists: item and index are not there yet.
    checker.check_template_field(path, key, ("trigger", "steps", "run"))
    if len(checker.problems) > before:
        return
    if "'" in key or template_to_parameters({"Key": key}) is None:
        checker.add(
            path,
            RULE,
            "the key may hold only literal text (no quotes) and placeholders naming a value, "
            "e.g. 'exports/{{ trigger.date }}.jsonl'",
        )
