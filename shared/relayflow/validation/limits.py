"""Rules that keep a definition inside what Step Functions accepts: finite numbers, real
RFC 3339 timestamps, and a compiled state machine within the Step Functions quotas."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from relayflow.definition.paths import leaves
from relayflow.definition.problems import Problem

if TYPE_CHECKING:
    from relayflow.definition.models import Workflow

#: RFC 3339 ``date-time`` as a Wait state's Timestamp takes it: upper-case ``T`` and ``Z``,
#: ASCII digits only (``re.ASCII``: ``\d`` would also match other scripts' digits).
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:Z|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)


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
    for where, leaf in leaves(value, path):
        if isinstance(leaf, float) and not math.isfinite(leaf):
            yield where


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


def compiled_quota_problems(workflow: Workflow, file: str | None) -> list[Problem]:
    """The Step Functions quotas the compiled state machine would pass on any deployment
    (:mod:`relayflow.compiler.quotas`), from one compile with the longest names one uses: a
    ``compiled-size`` problem naming the steps that take the most room, and
    ``history-events`` problems when the workflow runs on Standard."""
    from relayflow.compiler.compile import compile_workflow
    from relayflow.compiler.engine import choose_engine
    from relayflow.compiler.quotas import history_problems, size_problem
    from relayflow.compiler.size import SIZING_OPTIONS

    compiled = compile_workflow(workflow, SIZING_OPTIONS)
    size = size_problem(compiled.asl, file)
    problems = [size] if size is not None else []
    history = history_problems(workflow, compiled.asl, file)
    # Rarely any: only then ask which engine runs it (the sizing compile is Standard's).
    if history and choose_engine(workflow, compiled).engine == "standard":
        problems += history
    return problems
