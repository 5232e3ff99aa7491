"""Rules that keep a definition inside what Step Functions accepts: finite numbers, real
RFC 3339 timestamps, and a compiled state machine under the definition size quota."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from relayflow.definition.problems import Problem

if TYPE_CHECKING:
    from relayflow.definition.models import Workflow

#: RFC 3339 ``date-time`` as a Wait state's Timestamp takes it: upper-case ``T`` and ``Z``,
#: ASCII digits only (``re.ASCII``: ``\d`` would also match other scripts' digits).
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:Z|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)
#: How many of the largest steps a size problem names.
LARGEST_STEPS = 5


def parse_rfc3339(text: str) -> datetime | None:
    """The instant ``text`` names when it is a real RFC 3339 date-time with a zone, else
    None: impossible dates (02-30), hour 24, minute or second 60, offsets beyond ±23:59 and
    non-ASCII digits are refused."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    sign, offset_hours, offset_minutes = match.group(7, 8, 9)
    zone: timezone = UTC
    if sign is not None:
        hours, minutes = int(offset_hours), int(offset_minutes)
        if hours > 23 or minutes > 59:
            return None
        delta = timedelta(hours=hours, minutes=minutes)
        zone = timezone(delta if sign == "+" else -delta)
    try:
        return datetime(year, month, day, hour, minute, second, tzinfo=zone)
    except ValueError:
        return None


def non_finite_paths(value: Any, path: str = "") -> Iterator[str]:
    """Paths (``steps.a.mapping.x``, ``items[2]``) of the infinities and NaNs in ``value``:
    YAML's ``.inf`` / ``.nan`` and JSON's ``Infinity`` / ``NaN``, which JSON cannot hold."""
    if isinstance(value, float) and not math.isfinite(value):
        yield path
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from non_finite_paths(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from non_finite_paths(item, f"{path}[{index}]")


def non_finite_problems(data: Any, file: str | None) -> list[Problem]:
    return [
        Problem(
            file,
            path,
            "non-finite-number",
            "numbers must be finite: .inf, .nan (Infinity, NaN) have no JSON form",
        )
        for path in non_finite_paths(data)
    ]


def compiled_size_problems(workflow: Workflow, file: str | None) -> list[Problem]:
    """A problem when the compiled state machine would exceed Step Functions' definition
    quota on any deployment (measured with the longest names one uses), naming the steps
    that take the most room."""
    from relayflow.compiler.compile import compile_workflow
    from relayflow.compiler.size import (
        MAX_STATE_MACHINE_BYTES,
        SIZING_OPTIONS,
        definition_bytes,
        step_bytes,
    )

    asl = compile_workflow(workflow, SIZING_OPTIONS).asl
    size = definition_bytes(asl)
    if size <= MAX_STATE_MACHINE_BYTES:
        return []
    sizes = step_bytes(asl)
    largest = ", ".join(
        f"{key} ({count:,} bytes)"
        for key, count in sizes.most_common(LARGEST_STEPS)
        if not key.startswith("_")
    )
    average = sum(sizes.values()) // max(len(sizes), 1)
    return [
        Problem(
            file,
            "steps",
            "compiled-size",
            f"the compiled state machine would be {size:,} bytes; Step Functions accepts at "
            f"most {MAX_STATE_MACHINE_BYTES:,}. Largest steps: {largest}; {len(sizes):,} steps "
            f"take {average:,} bytes each on average. Move part of the "
            "workflow into a sub_workflow, or shrink the largest steps (fewer retry or "
            "routing options, smaller mappings and HTTP bodies)",
        )
    ]
